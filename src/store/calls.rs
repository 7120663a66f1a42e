//! The calls ledger, the gate-change audit trail and the stale-response cache.

use super::backend::{execute, fetch, sql, Pool, Sql, Tx};
use super::{from_ms, to_i64, to_ms, to_u64, QueryCtx, Store, StoreError};
use super::{ApiCalls, CallRecord, CallReport, ClassCalls, GateChange, StaleEntry};
use crate::platform::{Api, Platform};
use crate::time::china_offset;
use chrono::{DateTime, NaiveDate, TimeZone, Utc};

/// The calls ledger's minute key: 'YYYY-MM-DD HH:MM' in UTC (sorts as time).
pub fn minute_key(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M").to_string()
}

/// Stale-cache answers written per SQLite transaction ([`Store::stale_put_many`]): a few
/// milliseconds of the write lock at a time (128 held it 10-28 ms in the demo).
const STALE_PUT_CHUNK: usize = 32;

const STALE_PUT: Sql = sql!(
    "INSERT INTO stale_cache (platform, api, key, body, stored_at)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (platform, api, key) DO UPDATE SET
         body = excluded.body, stored_at = excluded.stored_at"
);

type GateRow = (
    i64,
    i64,
    String,
    String,
    String,
    Option<f64>,
    f64,
    Option<i64>,
    Option<i64>,
    String,
);

impl Store {
    /// Add a batch of call counts in one transaction (upsert-increment per
    /// (minute, platform, api, class)). Called in batches by the link layer.
    pub async fn record_calls(&self, batch: &[CallRecord]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin("record_calls: begin").await?;
        self.record_calls_in(&mut tx, batch).await?;
        tx.commit().await.ctx(self, "record_calls: commit")?;
        Ok(())
    }

    /// Inside `tx`: the upserts of [`Store::record_calls`].
    pub(super) async fn record_calls_in(
        &self,
        tx: &mut Tx,
        batch: &[CallRecord],
    ) -> Result<(), StoreError> {
        // Rows in key order: two workers upserting the same minutes lock them in the same
        // order (PostgreSQL), so they wait for each other instead of deadlocking.
        let mut rows: Vec<(String, &CallRecord)> =
            batch.iter().map(|r| (minute_key(r.minute), r)).collect();
        rows.sort_by(|(ma, a), (mb, b)| {
            (ma, a.platform.as_str(), a.api.as_str(), a.class.as_str()).cmp(&(
                mb,
                b.platform.as_str(),
                b.api.as_str(),
                b.class.as_str(),
            ))
        });
        for (minute, r) in rows {
            execute!(
                tx.on(),
                sql!(
                    "INSERT INTO api_calls (minute, platform, api, class, calls, useful)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (minute, platform, api, class) DO UPDATE SET
                         calls = api_calls.calls + excluded.calls,
                         useful = api_calls.useful + excluded.useful"
                ),
                minute,
                r.platform.as_str(),
                r.api.as_str(),
                r.class.as_str(),
                to_i64(r.calls),
                to_i64(r.useful)
            )
            .ctx(self, "record_calls: upsert")?;
        }
        Ok(())
    }

    /// Calls and useful calls per (platform, api) and per class, for minutes in `[from, to)`
    /// (both truncated to the minute).
    pub async fn report_calls(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<CallReport, StoreError> {
        let mut c = self.conn("report_calls").await?;
        let rows = fetch!(
            fetch_all as (String, String, String, i64, i64),
            c.on(),
            sql!(
                "SELECT platform, api, class, CAST(SUM(calls) AS BIGINT),
                        CAST(SUM(useful) AS BIGINT)
                 FROM api_calls WHERE minute >= $1 AND minute < $2
                 GROUP BY platform, api, class ORDER BY platform, api, class"
            ),
            minute_key(from),
            minute_key(to)
        )
        .ctx(self, "report_calls")?;
        let mut report = CallReport {
            from,
            to,
            by_api: Vec::new(),
            by_class: Vec::new(),
        };
        for (platform, api, class, calls, useful) in rows {
            let platform: Platform = self.parse(&platform, "api_calls.platform")?;
            let api: Api = self.parse(&api, "api_calls.api")?;
            let (calls, useful) = (to_u64(calls), to_u64(useful));
            report.by_class.push(ClassCalls {
                platform,
                api,
                class: self.parse(&class, "api_calls.class")?,
                calls,
            });
            match report.by_api.last_mut() {
                Some(last) if last.platform == platform && last.api == api => {
                    last.calls += calls;
                    last.useful += useful;
                }
                _ => report.by_api.push(ApiCalls {
                    platform,
                    api,
                    calls,
                    useful,
                }),
            }
        }
        Ok(report)
    }

    /// [`Store::report_calls`] for one platform day (00:00 to 24:00 GMT+8, the quota day).
    pub async fn report_calls_for_day(&self, day: NaiveDate) -> Result<CallReport, StoreError> {
        let next = day.succ_opt().unwrap_or(day);
        self.report_calls(day_start(day), day_start(next)).await
    }

    /// [`Store::report_calls_for_day`] up to `before` (whole minutes that began before it).
    pub async fn report_calls_for_day_before(
        &self,
        day: NaiveDate,
        before: DateTime<Utc>,
    ) -> Result<CallReport, StoreError> {
        let next = day_start(day.succ_opt().unwrap_or(day));
        self.report_calls(day_start(day), before.min(next)).await
    }

    /// Append a gate change to the audit trail; returns its id and the instant it was
    /// recorded. The instant is the database's clock, like every instant in the ledger
    /// (changes made from different hosts sort by one clock): `change.at` is not written.
    pub async fn record_gate_change(
        &self,
        change: &GateChange,
    ) -> Result<(i64, DateTime<Utc>), StoreError> {
        let mut c = self.conn("record_gate_change").await?;
        let (id, at) = fetch!(
            fetch_one as (i64, i64),
            c.on(),
            sql!(
                "INSERT INTO gate_changes
                    (at, who, platform, api, old_rate, new_rate, old_burst, new_burst, why)
                 VALUES (" NOW ", $1, $2, $3, $4, $5, $6, $7, $8) RETURNING id, at"
            ),
            &change.who,
            change.platform.as_str(),
            change.api.as_str(),
            change.old_rate,
            change.new_rate,
            change.old_burst.map(i64::from),
            change.new_burst.map(i64::from),
            &change.why
        )
        .ctx(self, "record_gate_change")?;
        Ok((id, from_ms(at)))
    }

    /// The last `limit` gate changes, newest first, with their ids.
    pub async fn gate_changes(&self, limit: u32) -> Result<Vec<(i64, GateChange)>, StoreError> {
        let mut c = self.conn("gate_changes").await?;
        let rows = fetch!(
            fetch_all as GateRow,
            c.on(),
            sql!(
                "SELECT id, at, who, platform, api, old_rate, new_rate, old_burst, new_burst, why
                 FROM gate_changes ORDER BY id DESC LIMIT $1"
            ),
            i64::from(limit)
        )
        .ctx(self, "gate_changes")?;
        let burst = |b: Option<i64>| b.map(|b| u32::try_from(b).unwrap_or(u32::MAX));
        rows.into_iter()
            .map(
                |(id, at, who, platform, api, old_rate, new_rate, old_b, new_b, why)| {
                    Ok((
                        id,
                        GateChange {
                            at: from_ms(at),
                            who,
                            platform: self.parse(&platform, "gate_changes.platform")?,
                            api: self.parse(&api, "gate_changes.api")?,
                            old_rate,
                            new_rate,
                            old_burst: burst(old_b),
                            new_burst: burst(new_b),
                            why,
                        },
                    ))
                },
            )
            .collect()
    }

    /// Keep `body_json` as the last good response for (platform, api, key).
    pub async fn stale_put(
        &self,
        platform: Platform,
        api: Api,
        key: &str,
        body_json: &str,
        stored_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut c = self.conn("stale_put").await?;
        execute!(
            c.on(),
            STALE_PUT,
            platform.as_str(),
            api.as_str(),
            key,
            body_json,
            to_ms(stored_at)
        )
        .ctx(self, "stale_put")?;
        Ok(())
    }

    /// [`Store::stale_put`] for a batch of answers, in key order (so concurrent writers lock
    /// shared keys in one order): one statement on PostgreSQL, transactions of
    /// `STALE_PUT_CHUNK` answers on SQLite (a chunk that fails is not written, nor are those
    /// after it). A key given twice keeps its latest answer.
    pub async fn stale_put_many(
        &self,
        entries: &[(Platform, Api, String, StaleEntry)],
    ) -> Result<(), StoreError> {
        let mut sorted: Vec<&(Platform, Api, String, StaleEntry)> = entries.iter().collect();
        sorted.sort_by(|a, b| {
            (a.0.as_str(), a.1.as_str(), &a.2, a.3.stored_at).cmp(&(
                b.0.as_str(),
                b.1.as_str(),
                &b.2,
                b.3.stored_at,
            ))
        });
        // The latest of each key (the last of its run); one upsert may not touch a row twice.
        let mut latest: Vec<&(Platform, Api, String, StaleEntry)> =
            Vec::with_capacity(sorted.len());
        for e in sorted {
            match latest.last_mut() {
                Some(last) if (last.0, last.1, &last.2) == (e.0, e.1, &e.2) => *last = e,
                _ => latest.push(e),
            }
        }
        if latest.is_empty() {
            return Ok(());
        }
        match &self.pool {
            // In-process statements are cheap: one prepared upsert per answer, in transactions
            // of `STALE_PUT_CHUNK` answers. A worker's 2 s of reads in one transaction held
            // SQLite's one write lock 50-260 ms, and every task's outcomes waited behind it
            // (and its calls with them); between chunks they take their turns.
            Pool::Sqlite(_) => {
                for chunk in latest.chunks(STALE_PUT_CHUNK) {
                    let mut tx = self.begin("stale_put_many: begin").await?;
                    for (platform, api, key, entry) in chunk {
                        execute!(
                            tx.on(),
                            STALE_PUT,
                            platform.as_str(),
                            api.as_str(),
                            key,
                            &entry.body,
                            to_ms(entry.stored_at)
                        )
                        .ctx(self, "stale_put_many: upsert")?;
                    }
                    tx.commit().await.ctx(self, "stale_put_many: commit")?;
                }
                Ok(())
            }
            // Over the network: the batch (a worker's reads of 2 s, thousands) is one
            // statement over arrays, one round trip instead of one per answer.
            Pool::Postgres(pg) => {
                let platforms: Vec<&str> = latest.iter().map(|e| e.0.as_str()).collect();
                let apis: Vec<&str> = latest.iter().map(|e| e.1.as_str()).collect();
                let keys: Vec<&str> = latest.iter().map(|e| e.2.as_str()).collect();
                let bodies: Vec<&str> = latest.iter().map(|e| e.3.body.as_str()).collect();
                let stored: Vec<i64> = latest.iter().map(|e| to_ms(e.3.stored_at)).collect();
                sqlx::query(
                    "INSERT INTO stale_cache (platform, api, key, body, stored_at)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
                                          $5::bigint[])
                     ON CONFLICT (platform, api, key) DO UPDATE SET
                         body = excluded.body, stored_at = excluded.stored_at",
                )
                .bind(platforms)
                .bind(apis)
                .bind(keys)
                .bind(bodies)
                .bind(stored)
                .execute(pg)
                .await
                .ctx(self, "stale_put_many: upsert")?;
                Ok(())
            }
        }
    }

    /// The last good response for (platform, api, key), if any.
    pub async fn stale_get(
        &self,
        platform: Platform,
        api: Api,
        key: &str,
    ) -> Result<Option<StaleEntry>, StoreError> {
        let mut c = self.conn("stale_get").await?;
        let row = fetch!(
            fetch_optional as (String, i64),
            c.on(),
            sql!(
                "SELECT body, stored_at FROM stale_cache
                 WHERE platform = $1 AND api = $2 AND key = $3"
            ),
            platform.as_str(),
            api.as_str(),
            key
        )
        .ctx(self, "stale_get")?;
        Ok(row.map(|(body, stored_at)| StaleEntry {
            body,
            stored_at: from_ms(stored_at),
        }))
    }

    /// Drop cached responses stored before `older_than` (retention); returns how many.
    pub async fn stale_purge(&self, older_than: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut c = self.conn("stale_purge").await?;
        execute!(
            c.on(),
            sql!("DELETE FROM stale_cache WHERE stored_at < $1"),
            to_ms(older_than)
        )
        .ctx(self, "stale_purge")
    }
}

/// 00:00 GMT+8 of `day`, the platform day's start.
fn day_start(day: NaiveDate) -> DateTime<Utc> {
    china_offset()
        .from_local_datetime(&day.and_hms_opt(0, 0, 0).unwrap_or_default())
        .single()
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minute_key_drops_seconds() {
        let t = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 59).unwrap();
        assert_eq!(minute_key(t), "2026-01-02 03:04");
    }
}
