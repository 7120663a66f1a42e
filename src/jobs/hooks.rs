//! Completion hooks: every finish of a job (a one-off job or a scheduled run) is POSTed to
//! `[hooks] url`, its body signed with HMAC-SHA256, retried with backoff until the receiver
//! answers 2xx; or handed to `[hooks] command` on its standard input, retried until it exits
//! 0 (docs/design.md, "Completion hooks").
//!
//! Once per finish whatever worker finishes it: the ledger holds one delivery per (job,
//! finish instant), filled from the finished jobs by any worker (`INSERT ... ON CONFLICT DO
//! NOTHING`), and a worker sends one only while it holds its claim. A worker that dies
//! between the receiver's 2xx and its record sends it again after the claim lapses, with the
//! same `X-Syncfleet-Delivery` id: the receiver drops the repeat.

use crate::config::HooksConfig;
use crate::jobs::spec::JobSpec;
use crate::link::backoff::Backoff;
use crate::platform::webhook::Webhook;
use crate::secret::Secret;
use crate::shutdown::Shutdown;
use crate::store::{ClaimedHook, HookDelivery, Store, StoreError};
use std::time::Duration;

/// Where a delivery goes.
#[derive(Debug, Clone)]
enum Target {
    /// POSTed, signed.
    Post(Webhook),
    /// Run: a program and its arguments, no shell.
    Command { program: String, args: Vec<String> },
}

/// What sends the deliveries.
#[derive(Debug, Clone)]
pub(crate) struct HookSender {
    target: Target,
    backoff: Backoff,
    attempts: u32,
    timeout: Duration,
}

impl HookSender {
    /// The sender of `cfg`, or `None` when hooks are off.
    pub(crate) fn new(cfg: &HooksConfig, key: Option<Secret>) -> Option<HookSender> {
        let target = match (&cfg.url, key, &cfg.command) {
            (Some(url), Some(key), _) => Target::Post(Webhook::new(url.clone(), key)),
            (None, _, Some(argv)) => match argv.split_first() {
                Some((program, args)) => Target::Command {
                    program: program.clone(),
                    args: args.to_vec(),
                },
                None => return None,
            },
            _ => return None,
        };
        Some(HookSender {
            target,
            backoff: Backoff::new(
                Duration::from_millis(cfg.backoff_base_ms.max(1)),
                Duration::from_secs(cfg.backoff_cap_s.max(1)),
            ),
            attempts: cfg.attempts.max(1),
            timeout: Duration::from_millis(cfg.timeout_ms.max(1)),
        })
    }
}

/// The body of one delivery: the job, its shop, when it finished and how its items ended.
async fn body(store: &Store, d: &HookDelivery) -> Result<String, StoreError> {
    let status = store.job_status(d.job_id).await?;
    let spec = JobSpec::stored(store, d.job_id).await?;
    let c = &status.job.counts;
    let finished = chrono::DateTime::from_timestamp_millis(d.finished_ms).unwrap_or_default();
    Ok(serde_json::json!({
        "delivery": d.delivery_id(),
        "job": d.job_id,
        "kind": status.job.kind.as_str(),
        "shop": spec.as_ref().map(JobSpec::shop_label),
        "finished_at": finished.to_rfc3339(),
        "total": status.job.total,
        "counts": {"done": c.done, "stale": c.stale, "failed": c.failed, "skipped": c.skipped,
                   "cancelled": c.cancelled, "pending": c.pending},
    })
    .to_string())
}

/// What a hook command gets of the worker's environment: where programs are, the home,
/// the language and the time zone. Nothing else (no secret) is passed.
const HOOK_ENV_PASSED: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ"];

/// Run `program` with `text` on its standard input: `None` when it exited 0, else why not.
/// A command past `timeout` is killed (and the delivery retried).
async fn run_command(
    program: &str,
    args: &[String],
    timeout: Duration,
    delivery: &str,
    text: String,
) -> Option<String> {
    use tokio::io::AsyncWriteExt;
    // A clean environment: the worker's holds app secrets, sessions, database and Redis
    // passwords, the dashboard token; the command gets the delivery id and what it needs to
    // run programs (docs/design.md, "Completion hooks").
    let mut command = tokio::process::Command::new(program);
    command.env_clear();
    for name in HOOK_ENV_PASSED {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let spawned = command
        .args(args)
        .env("SYNCFLEET_DELIVERY", delivery)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Some(format!("`{program}` could not be started: {e}")),
    };
    let run = async {
        if let Some(mut stdin) = child.stdin.take() {
            // A command that exits without reading its input is its own business: its exit
            // status decides.
            let _ = stdin.write_all(text.as_bytes()).await;
        }
        child.wait().await
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(Ok(status)) if status.success() => None,
        Ok(Ok(status)) => Some(format!("`{program}` ended with {status}")),
        Ok(Err(e)) => Some(format!("`{program}` could not be waited for: {e}")),
        Err(_) => Some(format!(
            "`{program}` ran past {} ms and was killed",
            timeout.as_millis()
        )),
    }
}

/// Send one claimed delivery and record what came of it.
async fn deliver(store: &Store, s: &HookSender, claimed: &ClaimedHook) -> Result<bool, StoreError> {
    let d = &claimed.delivery;
    let text = body(store, d).await?;
    let id = d.delivery_id();
    let failed = match &s.target {
        Target::Post(hook) => hook.post(s.timeout, &id, text).await,
        Target::Command { program, args } => run_command(program, args, s.timeout, &id, text).await,
    };
    let Some(error) = failed else {
        if !store.hook_delivered(claimed).await? {
            lapsed(d);
        }
        return Ok(true);
    };
    let retry = (d.attempts + 1 < s.attempts)
        .then(|| i64::try_from(s.backoff.equal_jitter(d.attempts).as_millis()).unwrap_or(i64::MAX));
    tracing::warn!(
        job = d.job_id,
        delivery = %d.delivery_id(),
        attempt = d.attempts + 1,
        gives_up = retry.is_none(),
        "completion hook: {error}"
    );
    if !store.hook_attempt_failed(claimed, &error, retry).await? {
        lapsed(d);
    }
    Ok(false)
}

/// The attempt outlasted its claim and another worker holds the delivery now: its outcome
/// is that worker's to record.
fn lapsed(d: &HookDelivery) {
    tracing::warn!(
        job = d.job_id,
        delivery = %d.delivery_id(),
        "completion hook: the attempt outlasted its claim; another worker records this delivery"
    );
}

/// One round: add the new finishes, then send every delivery due that this worker claims.
pub(crate) async fn hooks_once(store: &Store, s: &HookSender) -> Result<usize, StoreError> {
    store.fill_hook_outbox().await?;
    let lease =
        i64::try_from((s.timeout + Duration::from_secs(10)).as_millis()).unwrap_or(i64::MAX);
    let mut sent = 0;
    while let Some(d) = store.claim_hook(lease).await? {
        if deliver(store, s, &d).await? {
            sent += 1;
        }
    }
    Ok(sent)
}

/// Run [`hooks_once`] every `every` until `shutdown`.
pub(crate) async fn run_hook_loop(
    store: Store,
    s: HookSender,
    every: Duration,
    shutdown: Shutdown,
) {
    let mut rounds = shutdown.every(every);
    while rounds.next().await {
        if let Err(e) = hooks_once(&store, &s).await {
            tracing::warn!("completion hooks not sent this round (the next one tries again): {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default retry schedule outlasts a receiver down for hours: even with the shortest
    /// jitter every time, the last attempt comes more than 12 hours after the first.
    #[test]
    fn the_default_schedule_outlasts_an_outage_of_hours() {
        let cfg = HooksConfig {
            command: Some(vec!["true".into()]),
            ..HooksConfig::default()
        };
        let s = HookSender::new(&cfg, None).expect("a command hook");
        let shortest: Duration = (0..s.attempts - 1)
            .map(|n| s.backoff.equal_jitter_with(n, 0.0))
            .sum();
        assert!(
            shortest > Duration::from_secs(12 * 3600),
            "{shortest:?} from the first attempt to the last"
        );
    }
}
