-- The id an order's logistics trace is asked by, where the platform's trace does not take the
-- order id (docs/wire-formats.md): JD's carrier waybill number (from the order list) and
-- 1688's `logisticsId` (from its logistics info call). NULL until the platform gave one.
ALTER TABLE orders ADD COLUMN tracking TEXT;
