//! Change messages received: which message ids are recorded, so a message delivered again
//! costs no second write (docs/design.md, "Continuous sync").

use super::backend::{execute, fetch, sql};
use super::{from_ms, QueryCtx, Store, StoreError};
use crate::platform::Platform;
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// One message to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// The platform's message id.
    pub id: u64,
    /// Its topic.
    pub topic: String,
    /// The shop it concerns.
    pub shop: String,
    /// The order it concerns, if any.
    pub order_id: Option<String>,
    /// When the change happened.
    pub born: DateTime<Utc>,
}

/// Messages received per shop, for `schedule list` and the guide's SQL (docs/guide/sql.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTally {
    /// The shop.
    pub shop: String,
    /// Messages recorded.
    pub received: u64,
    /// When the newest was received (the ledger's clock).
    pub last_received: DateTime<Utc>,
    /// The newest change a message brought.
    pub last_born: DateTime<Utc>,
}

fn db_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

impl Store {
    /// Which of `ids` are recorded already.
    pub async fn known_messages(
        &self,
        platform: Platform,
        ids: &[u64],
    ) -> Result<HashSet<u64>, StoreError> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let mut c = self.conn("known_messages").await?;
        let list = serde_json::Value::from(ids.iter().map(|i| i.to_string()).collect::<Vec<_>>())
            .to_string();
        let rows = fetch!(
            fetch_all as (i64,),
            c.on(),
            sql!(
                "SELECT message_id FROM platform_messages
                 WHERE platform = $1 AND message_id IN (SELECT CAST(k.value AS BIGINT) FROM "
                [KEYS "$2" AS k] ")"
            ),
            platform.as_str(),
            list
        )
        .ctx(self, "known_messages")?;
        Ok(rows
            .into_iter()
            .filter_map(|(i,)| u64::try_from(i).ok())
            .collect())
    }

    /// Record messages whose change is in the ledger; a message recorded before is left as
    /// it was. Returns how many were new.
    pub async fn record_messages(
        &self,
        platform: Platform,
        messages: &[ReceivedMessage],
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin("record_messages: begin").await?;
        let mut n = 0;
        for m in messages {
            n += execute!(
                tx.on(),
                sql!(
                    "INSERT INTO platform_messages
                         (platform, message_id, topic, shop, order_id, born_at, received_at)
                     VALUES ($1, $2, $3, $4, $5, $6, " NOW ")
                     ON CONFLICT (platform, message_id) DO NOTHING"
                ),
                platform.as_str(),
                db_id(m.id),
                &m.topic,
                &m.shop,
                m.order_id.as_deref(),
                m.born.timestamp_millis()
            )
            .ctx(self, "record_messages")?;
        }
        tx.commit().await.ctx(self, "record_messages: commit")?;
        Ok(n)
    }

    /// Messages received per shop of `platform`.
    pub async fn message_tallies(
        &self,
        platform: Platform,
    ) -> Result<Vec<MessageTally>, StoreError> {
        let mut c = self.conn("message_tallies").await?;
        let rows = fetch!(
            fetch_all as (String, i64, i64, i64),
            c.on(),
            sql!(
                "SELECT shop, COUNT(*), MAX(received_at), MAX(born_at) FROM platform_messages
                 WHERE platform = $1 GROUP BY shop ORDER BY shop"
            ),
            platform.as_str()
        )
        .ctx(self, "message_tallies")?;
        Ok(rows
            .into_iter()
            .map(|(shop, n, received, born)| MessageTally {
                shop,
                received: u64::try_from(n).unwrap_or(0),
                last_received: from_ms(received),
                last_born: from_ms(born),
            })
            .collect())
    }
}
