//! Orders and logistics events: keep only what changed, never query what is settled.

use super::backend::{execute, fetch, scalar, sql, Sql, Tx};
use super::{from_ms, json_list, to_ms, QueryCtx, Store, StoreError};
use super::{LogisticsEvent, Order, OrderNotice, OrderRecord};
use crate::platform::Platform;
use std::time::Duration;

// Instants written here come from the database's clock (`NOW`), never the host's. An order
// keeps the shop it was first stored under: a change message from a seller the config does
// not name is recorded under the seller's own name and must not move a known shop's order.
//
// An order list is the record: its state wins whenever the order's own `modified` advanced,
// whatever a message said meanwhile (a message may be published long after the change it
// reports, and one that is lost must not leave a later list's state refused).
const UPSERT_ORDER: Sql = sql!(
    "INSERT INTO orders
        (platform, order_id, shop, status, shipped, modified, amount_cents, tracking,
         status_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $6, " NOW ")
    ON CONFLICT (platform, order_id) DO UPDATE SET
        status = excluded.status, shipped = excluded.shipped,
        modified = excluded.modified, amount_cents = excluded.amount_cents,
        tracking = COALESCE(excluded.tracking, orders.tracking),
        status_at = excluded.status_at, updated_at = excluded.updated_at
    WHERE excluded.modified > orders.modified"
);

// A message's state is taken when it is newer than the state held (`status_at`) and than
// the order's own time; `modified` moves only to a time the message itself gives.
const APPLY_NOTICE: Sql = sql!(
    "INSERT INTO orders
        (platform, order_id, shop, status, shipped, modified, amount_cents, status_at,
         updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, " NOW ")
    ON CONFLICT (platform, order_id) DO UPDATE SET
        status = excluded.status, shipped = excluded.shipped,
        modified = " GREATEST "(orders.modified, excluded.modified),
        amount_cents = excluded.amount_cents,
        status_at = excluded.status_at, updated_at = excluded.updated_at
    WHERE excluded.status_at > orders.status_at AND excluded.status_at >= orders.modified"
);

/// Dedup by the UNIQUE key: one affected row means a new event. SQLite keeps its
/// `INSERT OR IGNORE`; PostgreSQL says `ON CONFLICT DO NOTHING`.
const INSERT_EVENT: Sql = sql!(
    sqlite: concat!(
        "INSERT OR IGNORE INTO logistics_events
            (platform, order_id, event_time, status, description, stored_at)
        VALUES ($1, $2, $3, $4, $5, ", sql!(@sqlite NOW), ")"
    ),
    postgres: concat!(
        "INSERT INTO logistics_events
            (platform, order_id, event_time, status, description, stored_at)
        VALUES ($1, $2, $3, $4, $5, ", sql!(@postgres NOW), ")
        ON CONFLICT DO NOTHING"
    ),
);

/// `signed` is sticky: once an order is signed it stays signed (a late, out-of-order trace
/// cannot make it a candidate again).
const SET_LAST_STATUS: Sql = sql!(
    "UPDATE orders SET last_status = $1, signed = (signed OR $2)
     WHERE platform = $3 AND order_id = $4"
);

type OrderRow = (
    String,
    String,
    String,
    String,
    bool,
    i64,
    i64,
    Option<String>,
    bool,
    Option<i64>,
    Option<String>,
    i64,
);

impl Store {
    /// Insert the order, or update it only if its `modified` advanced. True when the order is
    /// new or changed (a useful call); false when the ledger already had this version or a
    /// newer one. Logistics fields (`last_status`, `signed`, `last_queried_at`) are kept.
    pub async fn upsert_order_if_advanced(&self, order: &Order) -> Result<bool, StoreError> {
        Ok(self
            .upsert_orders_if_advanced(std::slice::from_ref(order))
            .await?
            == 1)
    }

    /// [`Store::upsert_order_if_advanced`] for a page of orders in one transaction; returns
    /// how many were new or advanced (0 means the page brought nothing new).
    pub async fn upsert_orders_if_advanced(&self, orders: &[Order]) -> Result<u64, StoreError> {
        // Rows in key order, so concurrent pages lock shared orders in one order (PostgreSQL).
        let mut sorted: Vec<&Order> = orders.iter().collect();
        sorted.sort_by(|a, b| {
            (a.platform.as_str(), &a.order_id).cmp(&(b.platform.as_str(), &b.order_id))
        });
        let mut tx = self.begin("upsert_orders_if_advanced: begin").await?;
        let mut changed = 0;
        for order in sorted {
            changed += execute!(
                tx.on(),
                UPSERT_ORDER,
                order.platform.as_str(),
                &order.order_id,
                &order.shop,
                &order.status,
                order.shipped,
                to_ms(order.modified),
                order.amount_cents,
                order.tracking.as_deref()
            )
            .ctx(self, "upsert_orders_if_advanced: upsert")?;
        }
        tx.commit()
            .await
            .ctx(self, "upsert_orders_if_advanced: commit")?;
        Ok(changed)
    }

    /// Apply the order states change messages brought, in one transaction; returns how many
    /// changed the ledger. A state older than the one held is ignored (messages come late and
    /// out of order); the order's `modified` stays its own (docs/design.md, "Change messages").
    pub async fn apply_order_notices(&self, notices: &[OrderNotice]) -> Result<u64, StoreError> {
        let mut sorted: Vec<&OrderNotice> = notices.iter().collect();
        sorted.sort_by(|a, b| {
            (a.platform.as_str(), &a.order_id).cmp(&(b.platform.as_str(), &b.order_id))
        });
        let mut tx = self.begin("apply_order_notices: begin").await?;
        let mut changed = 0;
        for n in sorted {
            changed += execute!(
                tx.on(),
                APPLY_NOTICE,
                n.platform.as_str(),
                &n.order_id,
                &n.shop,
                &n.status,
                n.shipped,
                n.modified.map_or(0, to_ms),
                n.amount_cents,
                to_ms(n.born)
            )
            .ctx(self, "apply_order_notices: apply")?;
        }
        tx.commit().await.ctx(self, "apply_order_notices: commit")?;
        Ok(changed)
    }

    /// One order with its logistics state.
    pub async fn get_order(
        &self,
        platform: Platform,
        order_id: &str,
    ) -> Result<Option<OrderRecord>, StoreError> {
        let mut c = self.conn("get_order").await?;
        let row = fetch!(
            fetch_optional as OrderRow,
            c.on(),
            sql!(
                "SELECT platform, order_id, shop, status, shipped, modified, amount_cents,
                        last_status, signed, last_queried_at, tracking, status_at
                 FROM orders WHERE platform = $1 AND order_id = $2"
            ),
            platform.as_str(),
            order_id
        )
        .ctx(self, "get_order")?;
        let Some((
            p,
            id,
            shop,
            status,
            shipped,
            modified,
            amount,
            last,
            signed,
            queried,
            tracking,
            status_at,
        )) = row
        else {
            return Ok(None);
        };
        Ok(Some(OrderRecord {
            order: Order {
                platform: self.parse(&p, "orders.platform")?,
                order_id: id,
                shop,
                status,
                shipped,
                modified: from_ms(modified),
                amount_cents: amount,
                tracking,
            },
            status_at: from_ms(status_at),
            last_status: last,
            signed,
            last_queried_at: queried.map(from_ms),
        }))
    }

    /// Keep the id an order's logistics trace is asked by (1688's `logisticsId`, learnt from
    /// its logistics info call). True when the order exists.
    pub async fn set_order_tracking(
        &self,
        platform: Platform,
        order_id: &str,
        tracking: &str,
    ) -> Result<bool, StoreError> {
        let mut c = self.conn("set_order_tracking").await?;
        let updated = execute!(
            c.on(),
            sql!("UPDATE orders SET tracking = $1 WHERE platform = $2 AND order_id = $3"),
            tracking,
            platform.as_str(),
            order_id
        )
        .ctx(self, "set_order_tracking")?;
        Ok(updated == 1)
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
        let mut c = self.conn("logistics_candidates").await?;
        scalar!(
            fetch_all as String,
            c.on(),
            sql!(
                "SELECT DISTINCT order_id FROM orders
                 WHERE platform = $1 AND shop = $2 AND NOT signed AND shipped
                   AND (last_queried_at IS NULL OR last_queried_at <= " NOW " - $3)
                 ORDER BY order_id"
            ),
            platform.as_str(),
            shop,
            interval_ms
        )
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
        let mut c = self.conn("queried_within").await?;
        let recent = scalar!(
            fetch_optional as bool,
            c.on(),
            sql!(
                "SELECT last_queried_at > " NOW " - $1 FROM orders
                 WHERE platform = $2 AND order_id = $3 AND last_queried_at IS NOT NULL"
            ),
            interval_ms,
            platform.as_str(),
            order_id
        )
        .ctx(self, "queried_within")?;
        Ok(recent.unwrap_or(false))
    }

    /// Record that these orders' logistics were queried now (database clock); returns rows
    /// updated. A trace that was stored is marked by [`Store::record_trace`] itself.
    pub async fn mark_queried(
        &self,
        platform: Platform,
        order_ids: &[String],
    ) -> Result<u64, StoreError> {
        let mut c = self.conn("mark_queried").await?;
        execute!(
            c.on(),
            sql!(
                "UPDATE orders SET last_queried_at = " NOW
                " WHERE platform = $1 AND order_id IN (SELECT value FROM " [KEYS "$2" AS k] ")"
            ),
            platform.as_str(),
            json_list(order_ids)
        )
        .ctx(self, "mark_queried")
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
        let mut tx = self.begin("record_trace: begin").await?;
        let new = self
            .insert_events_in(&mut tx, platform, order_id, events)
            .await?;
        if let Some(last) = events.last() {
            execute!(
                tx.on(),
                SET_LAST_STATUS,
                &last.status,
                signed,
                platform.as_str(),
                order_id
            )
            .ctx(self, "record_trace: set last status")?;
        }
        execute!(
            tx.on(),
            sql!(
                "UPDATE orders SET last_queried_at = " NOW
                " WHERE platform = $1 AND order_id = $2"
            ),
            platform.as_str(),
            order_id
        )
        .ctx(self, "record_trace: mark queried")?;
        tx.commit().await.ctx(self, "record_trace: commit")?;
        Ok(new)
    }

    /// Insert the events of one order inside `tx` unless known; how many were new.
    async fn insert_events_in(
        &self,
        tx: &mut Tx,
        platform: Platform,
        order_id: &str,
        events: &[LogisticsEvent],
    ) -> Result<u64, StoreError> {
        let mut new = 0;
        for event in events {
            new += execute!(
                tx.on(),
                INSERT_EVENT,
                platform.as_str(),
                order_id,
                &event.event_time,
                &event.status,
                &event.description
            )
            .ctx(self, "insert event")?;
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
        let mut c = self.conn("insert_event").await?;
        let inserted = execute!(
            c.on(),
            INSERT_EVENT,
            platform.as_str(),
            order_id,
            &event.event_time,
            &event.status,
            &event.description
        )
        .ctx(self, "insert_event")?;
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
        let mut tx = self.begin("insert_events: begin").await?;
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
        let mut c = self.conn("events").await?;
        let rows = fetch!(
            fetch_all as (String, String, String),
            c.on(),
            sql!(
                "SELECT event_time, status, description FROM logistics_events
                 WHERE platform = $1 AND order_id = $2 ORDER BY event_time, status"
            ),
            platform.as_str(),
            order_id
        )
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
        let mut c = self.conn("set_last_status").await?;
        let updated = execute!(
            c.on(),
            SET_LAST_STATUS,
            status,
            signed,
            platform.as_str(),
            order_id
        )
        .ctx(self, "set_last_status")?;
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
                    r.order.shipped,
                    to_ms(r.order.modified),
                    r.order.amount_cents,
                    r.last_status,
                    r.signed,
                    r.last_queried_at.map(to_ms),
                    r.order.tracking,
                    to_ms(r.status_at),
                ])
            })
            .collect();
        let payload = serde_json::Value::Array(rows).to_string();
        let mut tx = self.begin("insert_orders: begin").await?;
        let inserted = execute!(
            tx.on(),
            sql!(
                sqlite: concat!(
                    "INSERT OR REPLACE INTO orders
                        (platform, order_id, shop, status, shipped, modified, amount_cents,
                         last_status, signed, last_queried_at, tracking, status_at, updated_at)
                     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                            value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9,
                            value ->> 10, value ->> 11, ",
                    sql!(@sqlite NOW),
                    " FROM json_each($1)"
                ),
                postgres: concat!(
                    "INSERT INTO orders
                        (platform, order_id, shop, status, shipped, modified, amount_cents,
                         last_status, signed, last_queried_at, tracking, status_at, updated_at)
                     SELECT v ->> 0, v ->> 1, v ->> 2, v ->> 3, CAST(v ->> 4 AS BOOLEAN),
                            CAST(v ->> 5 AS BIGINT), CAST(v ->> 6 AS BIGINT), v ->> 7,
                            CAST(v ->> 8 AS BOOLEAN), CAST(v ->> 9 AS BIGINT), v ->> 10,
                            CAST(v ->> 11 AS BIGINT), ",
                    sql!(@postgres NOW),
                    " FROM json_array_elements(CAST($1 AS json)) AS v
                     ON CONFLICT (platform, order_id) DO UPDATE SET
                         shop = excluded.shop, status = excluded.status,
                         shipped = excluded.shipped, modified = excluded.modified,
                         amount_cents = excluded.amount_cents, last_status = excluded.last_status,
                         signed = excluded.signed, last_queried_at = excluded.last_queried_at,
                         tracking = excluded.tracking, status_at = excluded.status_at,
                         updated_at = excluded.updated_at"
                ),
            ),
            payload
        )
        .ctx(self, "insert_orders: insert")?;
        tx.commit().await.ctx(self, "insert_orders: commit")?;
        Ok(inserted)
    }
}
