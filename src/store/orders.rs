//! Orders and logistics events: keep only what changed, never query what is settled.

use super::jobs::now_ms;
use super::{from_ms, json_list, to_ms, QueryCtx, Store, StoreError};
use super::{LogisticsEvent, Order, OrderRecord};
use crate::platform::Platform;
use std::time::Duration;

// Instants written here come from the database's clock (`now_ms!`), never the host's.
const UPSERT_ORDER: &str = concat!(
    "INSERT INTO orders
        (platform, order_id, shop, status, shipped, modified, amount_cents, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ",
    now_ms!(),
    ")
    ON CONFLICT (platform, order_id) DO UPDATE SET
        shop = excluded.shop, status = excluded.status, shipped = excluded.shipped,
        modified = excluded.modified, amount_cents = excluded.amount_cents,
        updated_at = excluded.updated_at
    WHERE excluded.modified > orders.modified"
);

const INSERT_EVENT: &str = concat!(
    "INSERT OR IGNORE INTO logistics_events
        (platform, order_id, event_time, status, description, stored_at)
    VALUES (?, ?, ?, ?, ?, ",
    now_ms!(),
    ")"
);

/// `signed` is sticky: once an order is signed it stays signed (a late, out-of-order trace
/// cannot make it a candidate again).
const SET_LAST_STATUS: &str = "UPDATE orders SET last_status = ?, signed = MAX(signed, ?)
    WHERE platform = ? AND order_id = ?";

type OrderRow = (
    String,
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    i64,
    Option<i64>,
);

impl Store {
    /// Insert the order, or update it only if its `modified` advanced. True when the order is
    /// new or changed (a useful call); false when the ledger already had this version or a
    /// newer one. Logistics fields (`last_status`, `signed`, `last_queried_at`) are kept.
    pub async fn upsert_order_if_advanced(&self, order: &Order) -> Result<bool, StoreError> {
        let changed = sqlx::query(UPSERT_ORDER)
            .bind(order.platform.as_str())
            .bind(&order.order_id)
            .bind(&order.shop)
            .bind(&order.status)
            .bind(order.shipped)
            .bind(to_ms(order.modified))
            .bind(order.amount_cents)
            .execute(&self.pool)
            .await
            .ctx(self, "upsert_order_if_advanced")?
            .rows_affected();
        Ok(changed == 1)
    }

    /// [`Store::upsert_order_if_advanced`] for a page of orders in one transaction; returns
    /// how many were new or advanced (0 means the page brought nothing new).
    pub async fn upsert_orders_if_advanced(&self, orders: &[Order]) -> Result<u64, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "upsert_orders_if_advanced: begin")?;
        let mut changed = 0;
        for order in orders {
            changed += sqlx::query(UPSERT_ORDER)
                .bind(order.platform.as_str())
                .bind(&order.order_id)
                .bind(&order.shop)
                .bind(&order.status)
                .bind(order.shipped)
                .bind(to_ms(order.modified))
                .bind(order.amount_cents)
                .execute(&mut *tx)
                .await
                .ctx(self, "upsert_orders_if_advanced: upsert")?
                .rows_affected();
        }
        tx.commit()
            .await
            .ctx(self, "upsert_orders_if_advanced: commit")?;
        Ok(changed)
    }

    /// One order with its logistics state.
    pub async fn get_order(
        &self,
        platform: Platform,
        order_id: &str,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let row: Option<OrderRow> = sqlx::query_as(
            "SELECT platform, order_id, shop, status, shipped, modified, amount_cents,
                    last_status, signed, last_queried_at
             FROM orders WHERE platform = ? AND order_id = ?",
        )
        .bind(platform.as_str())
        .bind(order_id)
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "get_order")?;
        let Some((p, id, shop, status, shipped, modified, amount, last, signed, queried)) = row
        else {
            return Ok(None);
        };
        Ok(Some(OrderRecord {
            order: Order {
                platform: self.parse(&p, "orders.platform")?,
                order_id: id,
                shop,
                status,
                shipped: shipped != 0,
                modified: from_ms(modified),
                amount_cents: amount,
            },
            last_status: last,
            signed: signed != 0,
            last_queried_at: queried.map(from_ms),
        }))
    }

    /// Orders of `shop` on `platform` worth a logistics query now: shipped, not signed, and
    /// never queried or last queried at least `min_interval` ago, on the database's clock (the
    /// one that stamped `last_queried_at`). Distinct, by order id.
    pub async fn logistics_candidates(
        &self,
        platform: Platform,
        shop: &str,
        min_interval: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let interval_ms = i64::try_from(min_interval.as_millis()).unwrap_or(i64::MAX);
        sqlx::query_scalar(concat!(
            "SELECT DISTINCT order_id FROM orders
             WHERE platform = ? AND shop = ? AND signed = 0 AND shipped = 1
               AND (last_queried_at IS NULL OR last_queried_at <= ",
            now_ms!(),
            " - ?)
             ORDER BY order_id"
        ))
        .bind(platform.as_str())
        .bind(shop)
        .bind(interval_ms)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "logistics_candidates")
    }

    /// True when the order was queried less than `min_interval` ago, on the database's clock
    /// (the worker's "queried recently" cut, consistent with [`Store::logistics_candidates`]).
    pub async fn queried_within(
        &self,
        platform: Platform,
        order_id: &str,
        min_interval: Duration,
    ) -> Result<bool, StoreError> {
        let interval_ms = i64::try_from(min_interval.as_millis()).unwrap_or(i64::MAX);
        let recent: Option<i64> = sqlx::query_scalar(concat!(
            "SELECT last_queried_at > ",
            now_ms!(),
            " - ? FROM orders WHERE platform = ? AND order_id = ? AND last_queried_at IS NOT NULL"
        ))
        .bind(interval_ms)
        .bind(platform.as_str())
        .bind(order_id)
        .fetch_optional(&self.pool)
        .await
        .ctx(self, "queried_within")?;
        Ok(recent.unwrap_or(0) != 0)
    }

    /// Record that these orders' logistics were queried now (database clock); returns rows
    /// updated. A trace that was stored is marked by [`Store::record_trace`] itself.
    pub async fn mark_queried(
        &self,
        platform: Platform,
        order_ids: &[String],
    ) -> Result<u64, StoreError> {
        let updated = sqlx::query(concat!(
            "UPDATE orders SET last_queried_at = ",
            now_ms!(),
            " WHERE platform = ? AND order_id IN (SELECT value FROM json_each(?))"
        ))
        .bind(platform.as_str())
        .bind(json_list(order_ids))
        .execute(&self.pool)
        .await
        .ctx(self, "mark_queried")?
        .rows_affected();
        Ok(updated)
    }

    /// Store what one logistics query learned, in one transaction: the trace's events (INSERT
    /// OR IGNORE), the order's last status and `signed` (when the trace has a step), and
    /// `last_queried_at` = now (database clock). All or nothing: an order whose events could
    /// not be stored is not marked queried, so the next run queries it again instead of
    /// skipping it as "queried recently". Returns how many events were new.
    pub async fn record_trace(
        &self,
        platform: Platform,
        order_id: &str,
        events: &[LogisticsEvent],
        signed: bool,
    ) -> Result<u64, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "record_trace: begin")?;
        let new = self
            .insert_events_in(&mut tx, platform, order_id, events)
            .await?;
        if let Some(last) = events.last() {
            sqlx::query(SET_LAST_STATUS)
                .bind(&last.status)
                .bind(signed)
                .bind(platform.as_str())
                .bind(order_id)
                .execute(&mut *tx)
                .await
                .ctx(self, "record_trace: set last status")?;
        }
        sqlx::query(concat!(
            "UPDATE orders SET last_queried_at = ",
            now_ms!(),
            " WHERE platform = ? AND order_id = ?"
        ))
        .bind(platform.as_str())
        .bind(order_id)
        .execute(&mut *tx)
        .await
        .ctx(self, "record_trace: mark queried")?;
        tx.commit().await.ctx(self, "record_trace: commit")?;
        Ok(new)
    }

    /// INSERT OR IGNORE the events of one order inside `tx`; how many were new.
    async fn insert_events_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
        platform: Platform,
        order_id: &str,
        events: &[LogisticsEvent],
    ) -> Result<u64, StoreError> {
        let mut new = 0;
        for event in events {
            new += sqlx::query(INSERT_EVENT)
                .bind(platform.as_str())
                .bind(order_id)
                .bind(&event.event_time)
                .bind(&event.status)
                .bind(&event.description)
                .execute(&mut **tx)
                .await
                .ctx(self, "insert event")?
                .rows_affected();
        }
        Ok(new)
    }

    /// Store one trace event unless already known (INSERT OR IGNORE on
    /// (platform, order, event_time, status)); true when it was new data.
    pub async fn insert_event(
        &self,
        platform: Platform,
        order_id: &str,
        event: &LogisticsEvent,
    ) -> Result<bool, StoreError> {
        let inserted = sqlx::query(INSERT_EVENT)
            .bind(platform.as_str())
            .bind(order_id)
            .bind(&event.event_time)
            .bind(&event.status)
            .bind(&event.description)
            .execute(&self.pool)
            .await
            .ctx(self, "insert_event")?
            .rows_affected();
        Ok(inserted == 1)
    }

    /// [`Store::insert_event`] for a whole trace in one transaction; returns how many events
    /// were new (0: the call brought nothing new).
    pub async fn insert_events(
        &self,
        platform: Platform,
        order_id: &str,
        events: &[LogisticsEvent],
    ) -> Result<u64, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "insert_events: begin")?;
        let new = self
            .insert_events_in(&mut tx, platform, order_id, events)
            .await?;
        tx.commit().await.ctx(self, "insert_events: commit")?;
        Ok(new)
    }

    /// Trace events of one order in time order.
    pub async fn events(
        &self,
        platform: Platform,
        order_id: &str,
    ) -> Result<Vec<LogisticsEvent>, StoreError> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT event_time, status, description FROM logistics_events
             WHERE platform = ? AND order_id = ? ORDER BY event_time, status",
        )
        .bind(platform.as_str())
        .bind(order_id)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "events")?;
        Ok(rows
            .into_iter()
            .map(|(event_time, status, description)| LogisticsEvent {
                event_time,
                status,
                description,
            })
            .collect())
    }

    /// Set the order's last logistics status. `signed` is sticky: once an order is signed it
    /// stays signed (a late, out-of-order trace cannot make it a candidate again).
    /// Returns false when the order is unknown.
    pub async fn set_last_status(
        &self,
        platform: Platform,
        order_id: &str,
        status: &str,
        signed: bool,
    ) -> Result<bool, StoreError> {
        let updated = sqlx::query(SET_LAST_STATUS)
            .bind(status)
            .bind(signed)
            .bind(platform.as_str())
            .bind(order_id)
            .execute(&self.pool)
            .await
            .ctx(self, "set_last_status")?
            .rows_affected();
        Ok(updated == 1)
    }

    /// Seed helper for tests, benchmarks and the demo: insert (or replace) a population of
    /// orders with their logistics state, in one transaction and one statement.
    pub async fn insert_orders(&self, orders: &[OrderRecord]) -> Result<u64, StoreError> {
        let rows: Vec<serde_json::Value> = orders
            .iter()
            .map(|r| {
                serde_json::json!([
                    r.order.platform.as_str(),
                    r.order.order_id,
                    r.order.shop,
                    r.order.status,
                    i64::from(r.order.shipped),
                    to_ms(r.order.modified),
                    r.order.amount_cents,
                    r.last_status,
                    i64::from(r.signed),
                    r.last_queried_at.map(to_ms),
                ])
            })
            .collect();
        let payload = serde_json::Value::Array(rows).to_string();
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "insert_orders: begin")?;
        let inserted = sqlx::query(concat!(
            "INSERT OR REPLACE INTO orders
                (platform, order_id, shop, status, shipped, modified, amount_cents,
                 last_status, signed, last_queried_at, updated_at)
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                    value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, ",
            now_ms!(),
            " FROM json_each(?)"
        ))
        .bind(payload)
        .execute(&mut *tx)
        .await
        .ctx(self, "insert_orders: insert")?
        .rows_affected();
        tx.commit().await.ctx(self, "insert_orders: commit")?;
        Ok(inserted)
    }
}
