//! Typed rows of the ledger: what callers pass in and get back.

use crate::platform::{Api, ErrorClass, Platform, UnknownName};
use chrono::{DateTime, Utc};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Declares a string-backed enum with `as_str`, `Display` and `FromStr` (the stored spelling).
macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling stored in the ledger.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownName::new(
                        stringify!($name),
                        other,
                        format!("one of: {}", [$($text),+].join(", ")),
                    )),
                }
            }
        }
    };
}

text_enum! {
    /// The three kinds of job. A task carries its job's kind on the queue in this spelling.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    JobKind {
        /// Copy items from one platform to another (`item_get` then `item_add`).
        Listing => "listing",
        /// Sync orders modified in a window.
        Orders => "orders",
        /// Track logistics of shipped, unsigned orders.
        Logistics => "logistics",
    }
}

text_enum! {
    /// What a schedule does with a tick that comes while its last run is still running.
    OnOverlap {
        /// The tick is recorded `skipped`: the next one covers what it would have.
        Skip => "skip",
        /// One run waits (`queued`) and starts when the running one is settled.
        Queue => "queue",
    }
}

text_enum! {
    /// What became of one tick of a schedule (docs/design.md, "Continuous sync").
    RunOutcome {
        /// Its job was created; it runs.
        Started => "started",
        /// Waiting for the running run to be settled.
        Queued => "queued",
        /// Not run: a run was still running, or there was nothing new to cover.
        Skipped => "skipped",
        /// Not run: more ticks were due at once (the fleet was down) than catch-up allows.
        Missed => "missed",
        /// Its job finished with every item done or skipped: its window is covered.
        Covered => "covered",
        /// Its job finished with an item failed: the watermark stayed, the next run covers
        /// the window again.
        Failed => "failed",
    }
}

text_enum! {
    /// Whether a job still has pending items.
    JobState {
        /// At least one item is pending.
        Running => "running",
        /// No item is pending (a reset or revived item makes the job run again).
        Finished => "finished",
    }
}

text_enum! {
    /// Where an item stands. Every status but `Pending` is terminal.
    ItemStatus {
        /// Not finished yet (never run, or reset for a retry).
        Pending => "pending",
        /// Finished on fresh data.
        Done => "done",
        /// Finished on degraded (stale) data, flagged.
        Stale => "stale",
        /// Failed, with its error class and message.
        Failed => "failed",
        /// Cut before calling (signed, duplicate, unchanged, already listed).
        Skipped => "skipped",
        /// Its job was cancelled before it ran (`syncfleet job cancel`).
        Cancelled => "cancelled",
    }
}

text_enum! {
    /// What an operator asked of a running job (`syncfleet job pause|resume|cancel`).
    JobControl {
        /// Its tasks go back to the queue uncharged until the job is resumed.
        Paused => "paused",
        /// Its pending items ended `cancelled`; nothing more is called for it.
        Cancelled => "cancelled",
    }
}

text_enum! {
    /// Outcome class of one platform call in the calls ledger: `ok`, the four error classes,
    /// or `stale` (answered from the stale cache after the call could not succeed).
    CallClass {
        /// The call succeeded.
        Ok => "ok",
        /// Failed with [`ErrorClass::Retry`] (transient).
        Retry => "retry",
        /// Failed with [`ErrorClass::Slow`] (rate limit or quota).
        Slow => "slow",
        /// Failed with [`ErrorClass::Fatal`] (caller error).
        Fatal => "fatal",
        /// Failed with [`ErrorClass::Unknown`] (unmapped error).
        Unknown => "unknown",
        /// Answered from the stale cache after the call could not succeed.
        Stale => "stale",
    }
}

impl From<ErrorClass> for CallClass {
    fn from(c: ErrorClass) -> Self {
        match c {
            ErrorClass::Retry => CallClass::Retry,
            ErrorClass::Slow => CallClass::Slow,
            ErrorClass::Fatal => CallClass::Fatal,
            ErrorClass::Unknown => CallClass::Unknown,
        }
    }
}

/// The result of running one item, recorded by [`crate::store::Store::finish_items`].
#[derive(Debug, Clone, PartialEq)]
pub struct ItemOutcome {
    pub(crate) key: String,
    /// `Pending` records an attempt without finishing the item (attempts is still bumped).
    pub(crate) status: ItemStatus,
    pub(crate) error_class: Option<ErrorClass>,
    pub(crate) error_message: Option<String>,
    /// What the item produced (e.g. the new item id), or why it was skipped.
    pub(crate) result: Option<String>,
}

impl ItemOutcome {
    /// Finished on fresh data, with an optional result (e.g. the new item id).
    pub fn done(key: impl Into<String>, result: Option<String>) -> Self {
        ItemOutcome {
            key: key.into(),
            status: ItemStatus::Done,
            error_class: None,
            error_message: None,
            result,
        }
    }

    /// Finished on degraded data; `reason` says why the fresh call failed.
    pub fn stale(
        key: impl Into<String>,
        result: Option<String>,
        reason: impl Into<String>,
    ) -> Self {
        ItemOutcome {
            key: key.into(),
            status: ItemStatus::Stale,
            error_class: None,
            error_message: Some(reason.into()),
            result,
        }
    }

    /// Failed with an error class and message.
    pub fn failed(key: impl Into<String>, class: ErrorClass, message: impl Into<String>) -> Self {
        ItemOutcome {
            key: key.into(),
            status: ItemStatus::Failed,
            error_class: Some(class),
            error_message: Some(message.into()),
            result: None,
        }
    }

    /// Cut before calling; `reason` (e.g. "signed", "unchanged") goes to `result`.
    pub fn skipped(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ItemOutcome {
            key: key.into(),
            status: ItemStatus::Skipped,
            error_class: None,
            error_message: None,
            result: Some(reason.into()),
        }
    }

    /// An attempt that did not finish the item (it stays pending, attempts + 1).
    pub fn attempted(
        key: impl Into<String>,
        class: ErrorClass,
        message: impl Into<String>,
    ) -> Self {
        ItemOutcome {
            key: key.into(),
            status: ItemStatus::Pending,
            error_class: Some(class),
            error_message: Some(message.into()),
            result: None,
        }
    }
}

/// What [`crate::store::Store::finish_items`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinishReport {
    /// Outcomes recorded (items that were pending; outcomes for already-terminal items are
    /// ignored, so the first terminal outcome of an item wins).
    pub recorded: u64,
    /// True when this call finished the job (no pending item left): exactly one caller sees it.
    pub job_finished: bool,
}

/// Item counts per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    /// Items in [`ItemStatus::Pending`].
    pub pending: u64,
    /// Items in [`ItemStatus::Done`].
    pub done: u64,
    /// Items in [`ItemStatus::Stale`].
    pub stale: u64,
    /// Items in [`ItemStatus::Failed`].
    pub failed: u64,
    /// Items in [`ItemStatus::Skipped`].
    pub skipped: u64,
    /// Items in [`ItemStatus::Cancelled`].
    pub cancelled: u64,
}

impl StatusCounts {
    pub(crate) fn add(&mut self, status: ItemStatus, n: u64) {
        match status {
            ItemStatus::Pending => self.pending += n,
            ItemStatus::Done => self.done += n,
            ItemStatus::Stale => self.stale += n,
            ItemStatus::Failed => self.failed += n,
            ItemStatus::Skipped => self.skipped += n,
            ItemStatus::Cancelled => self.cancelled += n,
        }
    }

    /// Items in a terminal status.
    pub fn terminal(&self) -> u64 {
        self.done + self.stale + self.failed + self.skipped + self.cancelled
    }
}

/// Summaries of finished jobs kept between two listings ([`Store::list_jobs_reusing`]).
#[derive(Debug, Default)]
pub struct FinishedSummaries(pub(crate) std::collections::HashMap<i64, JobSummary>);

/// One job with its item counts.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    pub(crate) id: i64,
    pub(crate) kind: JobKind,
    /// Whether the job still has pending items.
    pub state: JobState,
    /// Number of items the job was created with.
    pub total: u64,
    /// Item counts per status.
    pub counts: StatusCounts,
    /// When the job was created (database clock).
    pub created_at: DateTime<Utc>,
    /// When the last pending item finished; `None` while the job runs.
    pub finished_at: Option<DateTime<Utc>>,
    /// Paused or cancelled by an operator; `None` when it runs as enqueued.
    pub control: Option<JobControl>,
}

/// A running job's rate is measured over this window before now (its ETA follows the recent
/// pace, not the average since it started).
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(60);

impl JobSummary {
    /// The job's state as an operator sees it: `running` or `finished`, or what they asked of
    /// it (`paused`, `cancelled`).
    pub fn state_label(&self) -> &'static str {
        match (self.control, self.state) {
            (Some(JobControl::Paused), JobState::Running) => "paused",
            (Some(JobControl::Cancelled), _) => "cancelled",
            (_, state) => state.as_str(),
        }
    }

    /// Items finished per second. A finished job: all its terminal items over its life
    /// (`created_at` to `finished_at`), so the figure stays what the job did, however long
    /// ago it ended. A running job: `recent` (items finished within [`RATE_WINDOW`] before
    /// `now`) over that window, or over its life when it is younger (a young job's rate would
    /// otherwise read low). `now` must come from the clock that stamped the items.
    pub(crate) fn rate_per_sec(&self, recent: u64, now: DateTime<Utc>) -> f64 {
        if let Some(finished) = self.finished_at {
            let life_s = (finished - self.created_at).num_milliseconds() as f64 / 1000.0;
            let terminal = self.counts.terminal();
            if terminal == 0 {
                return 0.0;
            }
            // A job that finished within the same millisecond it started: count 1 ms.
            return terminal as f64 / life_s.max(0.001);
        }
        let age_s = (now - self.created_at).num_milliseconds() as f64 / 1000.0;
        let window_s = age_s.clamp(1.0, RATE_WINDOW.as_secs_f64());
        recent as f64 / window_s
    }

    /// Share of items in a terminal status, 0..=100.
    pub fn percent(&self) -> f64 {
        if self.total == 0 {
            return 100.0;
        }
        100.0 * self.counts.terminal() as f64 / self.total as f64
    }
}

/// A job's full status, for `syncfleet status JOB`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStatus {
    /// The job's counts and times.
    pub job: JobSummary,
    /// The job's spec as given to `create_job` (JSON text).
    pub spec: String,
    /// Items finished per second: over the last minute while running, over the job's life
    /// once finished ([`JobSummary::rate_per_sec`]).
    pub rate_per_sec: f64,
}

impl JobStatus {
    /// Time left at the last minute's rate; `Some(0)` when nothing is pending; None when
    /// nothing moved lately or the job is paused (its last minute's rate says nothing of when
    /// it will be resumed).
    pub fn eta(&self) -> Option<Duration> {
        let pending = self.job.counts.pending;
        if pending == 0 {
            return Some(Duration::ZERO);
        }
        if self.rate_per_sec <= 0.0 || self.job.control == Some(JobControl::Paused) {
            return None;
        }
        Some(Duration::from_secs_f64(pending as f64 / self.rate_per_sec))
    }
}

/// `job_items.error_class`: the error class of the item's last call, or `dead` when its task
/// went to the dead-letter stream (docs/design.md, "Dead letters").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemErrorClass {
    /// The class of the platform call that failed the item.
    Call(ErrorClass),
    /// The item's task exhausted its attempts (`syncfleet dead --requeue` puts it back).
    Dead,
}

impl ItemErrorClass {
    /// The spelling stored in the ledger.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemErrorClass::Call(class) => class.as_str(),
            ItemErrorClass::Dead => "dead",
        }
    }
}

impl FromStr for ItemErrorClass {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dead" => Ok(ItemErrorClass::Dead),
            other => other.parse().map(ItemErrorClass::Call),
        }
    }
}

/// One item row.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRecord {
    /// The item's key, unique within its job.
    pub key: String,
    /// Position of the key in the list the job was created with (from 0).
    pub seq: u64,
    /// Where the item stands.
    pub status: ItemStatus,
    /// Why the item failed, if it did: its last call's error class, or a dead task.
    pub error_class: Option<ItemErrorClass>,
    /// Error message of the last failed attempt (or why stale data was used), truncated.
    pub error_message: Option<String>,
    /// What the item produced (e.g. the new item id), or why it was skipped.
    pub result: Option<String>,
    /// Outcomes recorded for the item so far (kept when it is reset for a retry).
    pub attempts: u32,
    /// When the item last changed (database clock).
    pub updated_at: DateTime<Utc>,
}

/// An order as read from a platform's order list, normalised by the adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    /// The platform the order lives on.
    pub platform: Platform,
    /// The platform's order id (unique per platform).
    pub order_id: String,
    /// The shop (seller) the order belongs to.
    pub shop: String,
    /// The platform's own status text.
    pub status: String,
    /// The adapter's reading of `status`: shipped and not yet received (a logistics candidate).
    pub shipped: bool,
    /// When the platform last modified the order (stored to the millisecond).
    pub modified: DateTime<Utc>,
    /// Order amount in the smallest currency unit (fen).
    pub amount_cents: i64,
    /// The id the platform's logistics trace is asked by, when it is not the order id (JD's
    /// waybill number, 1688's `logisticsId`); None until the platform gave one.
    pub tracking: Option<String>,
}

/// An order's state as a change message brought it (docs/design.md, "Change messages").
#[derive(Debug, Clone, PartialEq)]
pub struct OrderNotice {
    /// The platform the order lives on.
    pub platform: Platform,
    /// The platform's order id.
    pub order_id: String,
    /// The shop the message names (a known order keeps its own).
    pub shop: String,
    /// The platform's own status text.
    pub status: String,
    /// The adapter's reading of `status` (a logistics candidate).
    pub shipped: bool,
    /// The order's own `modified`, when the message carries it.
    pub modified: Option<DateTime<Utc>>,
    /// Order amount in fen.
    pub amount_cents: i64,
    /// When the message was published: the state was true then.
    pub born: DateTime<Utc>,
}

/// An order row with its logistics state.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderRecord {
    /// The order as last stored.
    pub order: Order,
    /// When the status held was true: the order's own `modified` for a state an order list
    /// brought, the message's publication time for one a change message brought.
    pub status_at: DateTime<Utc>,
    /// Last logistics status seen (platform text).
    pub last_status: Option<String>,
    /// The parcel was signed for: never query its logistics again.
    pub signed: bool,
    /// When its logistics were last queried (database clock); `None` if never.
    pub last_queried_at: Option<DateTime<Utc>>,
}

/// One logistics trace step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogisticsEvent {
    /// The platform's timestamp text, as given (part of the dedup key).
    pub event_time: String,
    /// The step's status as the platform gives it (part of the dedup key).
    pub status: String,
    /// The step's human-readable text.
    pub description: String,
}

/// Calls of one (minute, platform, api, class), added to the calls ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Any instant within the minute (seconds are dropped).
    pub minute: DateTime<Utc>,
    /// The platform called.
    pub platform: Platform,
    /// The API called.
    pub api: Api,
    /// How the calls ended.
    pub class: CallClass,
    /// Number of calls to add.
    pub calls: u64,
    /// Calls among `calls` that brought new data.
    pub useful: u64,
}

/// Calls and useful calls of one (platform, api).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCalls {
    /// The platform called.
    pub platform: Platform,
    /// The API called.
    pub api: Api,
    /// Calls of every class.
    pub calls: u64,
    /// Calls among `calls` that brought new data.
    pub useful: u64,
}

impl ApiCalls {
    /// Fewer calls than this say nothing of an API's waste: a probe's two calls a day, a
    /// `syncfleet call` from the terminal.
    pub const CALLS_TO_JUDGE: u64 = 100;
    /// Below this share of useful calls an API is wasting its quota: cache or go incremental.
    pub const USEFUL_FLOOR: f64 = 0.3;

    /// Whether the day's calls show waste: enough calls to judge, and too few of them useful.
    pub fn wasteful(&self) -> bool {
        self.calls >= Self::CALLS_TO_JUDGE && self.useful_ratio() < Self::USEFUL_FLOOR
    }

    /// useful / calls (0 when no calls).
    pub fn useful_ratio(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.useful as f64 / self.calls as f64
        }
    }
}

/// Calls of one (platform, api, class).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassCalls {
    pub(crate) platform: Platform,
    /// The API called.
    pub api: Api,
    /// How the calls ended.
    pub class: CallClass,
    /// Number of calls.
    pub calls: u64,
}

/// The calls ledger over a time range.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    pub(crate) from: DateTime<Utc>,
    pub(crate) to: DateTime<Utc>,
    /// Per (platform, api), ordered by platform then api.
    pub by_api: Vec<ApiCalls>,
    /// Per (platform, api, class), same order.
    pub by_class: Vec<ClassCalls>,
}

impl CallReport {
    /// Calls over all APIs.
    pub fn total_calls(&self) -> u64 {
        self.by_api.iter().map(|a| a.calls).sum()
    }
    /// Useful calls over all APIs.
    pub fn total_useful(&self) -> u64 {
        self.by_api.iter().map(|a| a.useful).sum()
    }
    /// Useful-call ratio over all APIs.
    pub(crate) fn useful_ratio(&self) -> f64 {
        let calls = self.total_calls();
        if calls == 0 {
            0.0
        } else {
            self.total_useful() as f64 / calls as f64
        }
    }
    /// Calls of one (platform, api), 0 when none (for the burn ratio per gate).
    pub fn calls_of(&self, platform: Platform, api: Api) -> u64 {
        self.by_api
            .iter()
            .find(|a| a.platform == platform && a.api == api)
            .map_or(0, |a| a.calls)
    }
}

/// A run-time gate change: who changed which gate, when, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct GateChange {
    /// When the change was recorded, by the database's clock ([`Store::record_gate_change`]
    /// stamps it and does not read this field).
    ///
    /// [`Store::record_gate_change`]: crate::store::Store::record_gate_change
    pub at: DateTime<Utc>,
    /// Who made it (`user@host` from the CLI, `dashboard` from the dashboard).
    pub who: String,
    /// The gate's platform.
    pub platform: Platform,
    /// The gate's API.
    pub api: Api,
    /// Rate before the change, calls per second (`None` when not known).
    pub old_rate: Option<f64>,
    /// Rate after the change, calls per second.
    pub new_rate: f64,
    /// Burst before the change, calls (`None` when not known).
    pub old_burst: Option<u32>,
    /// Burst after the change, calls (`None` when not known).
    pub new_burst: Option<u32>,
    /// The reason given for the change.
    pub why: String,
}

/// A stored last-good response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleEntry {
    /// The response body (JSON text).
    pub body: String,
    /// When the response was stored.
    pub stored_at: DateTime<Utc>,
}

/// Who holds the embedded-worker lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBy {
    /// The holding worker's name (unique per process).
    pub holder: String,
    /// Process id of the holder (on its own host).
    pub pid: u32,
    pub(crate) since: DateTime<Utc>,
    pub(crate) heartbeat_at: DateTime<Utc>,
}

impl fmt::Display for HeldBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "another embedded worker is running on this ledger: `{}` (pid {}) since {}, \
             last heartbeat {}; stop it, or use Redis (--redis) to run several workers",
            self.holder,
            self.pid,
            self.since.format("%Y-%m-%d %H:%M:%S UTC"),
            self.heartbeat_at.format("%Y-%m-%d %H:%M:%S%.3f UTC"),
        )
    }
}

#[cfg(test)]
mod tests;
