//! Orders and logistics events: keep only what changed, never query what is settled.

use super::{from_ms, json_list, to_ms, QueryCtx, Store, StoreError};
use super::{LogisticsEvent, Order, OrderRecord};
use crate::platform::Platform;
use chrono::{DateTime, Utc};
use std::time::Duration;

const UPSERT_ORDER: &str = "INSERT INTO orders
        (platform, order_id, shop, status, shipped, modified, amount_cents, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (platform, order_id) DO UPDATE SET
        shop = excluded.shop, status = excluded.status, shipped = excluded.shipped,
        modified = excluded.modified, amount_cents = excluded.amount_cents,
        updated_at = excluded.updated_at
    WHERE excluded.modified > orders.modified";

const INSERT_EVENT: &str = "INSERT OR IGNORE INTO logistics_events
        (platform, order_id, event_time, status, description, stored_at)
    VALUES (?, ?, ?, ?, ?, ?)";

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
            .bind(to_ms(Utc::now()))
            .execute(&self.pool)
            .await
            .ctx(self, "upsert_order_if_advanced")?
            .rows_affected();
        Ok(changed == 1)
    }

    /// [`Store::upsert_order_if_advanced`] for a page of orders in one transaction; returns
    /// how many were new or advanced (0 means the page brought nothing new).
    pub async fn upsert_orders_if_advanced(&self, orders: &[Order]) -> Result<u64, StoreError> {
        let now = to_ms(Utc::now());
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
                .bind(now)
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

    /// Orders of `shop` on `platform` worth a logistics query at `now`: shipped, not signed,
    /// and never queried or last queried at least `min_interval` ago. Distinct, by order id.
    pub async fn logistics_candidates(
        &self,
        platform: Platform,
        shop: &str,
        min_interval: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, StoreError> {
        let interval_ms = i64::try_from(min_interval.as_millis()).unwrap_or(i64::MAX);
        let cutoff = to_ms(now).saturating_sub(interval_ms);
        sqlx::query_scalar(
            "SELECT DISTINCT order_id FROM orders
             WHERE platform = ? AND shop = ? AND signed = 0 AND shipped = 1
               AND (last_queried_at IS NULL OR last_queried_at <= ?)
             ORDER BY order_id",
        )
        .bind(platform.as_str())
        .bind(shop)
        .bind(cutoff)
        .fetch_all(&self.pool)
        .await
        .ctx(self, "logistics_candidates")
    }

    /// Record that these orders' logistics were queried at `now`; returns rows updated.
    pub async fn mark_queried(
        &self,
        platform: Platform,
        order_ids: &[String],
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let updated = sqlx::query(
            "UPDATE orders SET last_queried_at = ?
             WHERE platform = ? AND order_id IN (SELECT value FROM json_each(?))",
        )
        .bind(to_ms(now))
        .bind(platform.as_str())
        .bind(json_list(order_ids))
        .execute(&self.pool)
        .await
        .ctx(self, "mark_queried")?
        .rows_affected();
        Ok(updated)
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
            .bind(to_ms(Utc::now()))
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
        let now = to_ms(Utc::now());
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .ctx(self, "insert_events: begin")?;
        let mut new = 0;
        for event in events {
            new += sqlx::query(INSERT_EVENT)
                .bind(platform.as_str())
                .bind(order_id)
                .bind(&event.event_time)
                .bind(&event.status)
                .bind(&event.description)
                .bind(now)
                .execute(&mut *tx)
                .await
                .ctx(self, "insert_events: insert")?
                .rows_affected();
        }
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
        let updated = sqlx::query(
            "UPDATE orders SET last_status = ?, signed = MAX(signed, ?)
             WHERE platform = ? AND order_id = ?",
        )
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
        let now = to_ms(Utc::now());
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
        let inserted = sqlx::query(
            "INSERT OR REPLACE INTO orders
                (platform, order_id, shop, status, shipped, modified, amount_cents,
                 last_status, signed, last_queried_at, updated_at)
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4,
                    value ->> 5, value ->> 6, value ->> 7, value ->> 8, value ->> 9, ?
             FROM json_each(?)",
        )
        .bind(now)
        .bind(payload)
        .execute(&mut *tx)
        .await
        .ctx(self, "insert_orders: insert")?
        .rows_affected();
        tx.commit().await.ctx(self, "insert_orders: commit")?;
        Ok(inserted)
    }
}
