//! The attempt loop of one logical call: retry budget, then [`Gateway::step`] (breaker → gate
//! → bulkhead → send → classify) until an answer, or until the retry policy, the time budget
//! or the fleet's retry budget says stop.

use super::step::{Mode, Refusal};
use super::{CallContext, Gateway, LinkError, LinkErrorKind};
use crate::link::policy::{Attempts, CallShape, FailureFacts, StopReason, Verdict};
use crate::platform::{
    Api, ApiRequest, ApiResponse, CallError, ErrorClass, Platform, TransportError,
};
use std::time::Duration;

/// What the attempt loop ended with before degrading.
#[derive(Debug)]
pub(super) struct Failed {
    pub(super) err: LinkError,
    /// Whether a stale answer may stand in (upstream trouble, not a caller error).
    pub(super) degradable: bool,
}

impl Failed {
    fn new(err: LinkError) -> Failed {
        // Stale data stands in only when the upstream cannot answer (failures, open breaker,
        // budgets). Caller errors must surface, and a gate refusal is "not now": the job
        // re-queues it for fresh data.
        let degradable = err.class == ErrorClass::Retry
            && matches!(
                err.kind,
                LinkErrorKind::Platform
                    | LinkErrorKind::BreakerOpen
                    | LinkErrorKind::BudgetExhausted
                    | LinkErrorKind::RetryBudget
            );
        Failed { err, degradable }
    }
}

/// How the loop stops, in named parts; the call's platform, api, sends and last platform
/// error are added by [`Progress::fail`].
struct Stop {
    kind: LinkErrorKind,
    class: ErrorClass,
    message: String,
    retry_at: Option<Duration>,
}

/// What a logical call has done so far.
struct Progress {
    platform: Platform,
    api: Api,
    /// Requests sent (HTTP attempts).
    sends: u32,
    /// The last platform error.
    last: Option<CallError>,
}

impl Progress {
    fn fail(&mut self, stop: Stop) -> Failed {
        Failed::new(LinkError {
            platform: self.platform,
            api: self.api,
            class: stop.class,
            kind: stop.kind,
            message: stop.message,
            retry_at: stop.retry_at,
            attempts: self.sends,
            last: self.last.take(),
        })
    }

    /// An attempt refused before the wire; breaker and budget refusals carry the class of the
    /// last platform error.
    fn refused(&mut self, r: Refusal) -> Failed {
        let class = r.class_after(self.last.as_ref());
        self.fail(Stop {
            kind: r.kind,
            class,
            message: r.message,
            retry_at: r.retry_at,
        })
    }

    /// The last platform error's text, for messages that add why there is no retry.
    fn last_text(&self) -> String {
        self.last.as_ref().map_or(String::new(), |e| e.to_string())
    }
}

impl Gateway {
    /// The attempt loop: budget → (breaker → gate → bulkhead → HTTP → classify) → retry.
    /// `sends` ends as the number of requests that went on the wire.
    pub(super) async fn attempts(
        &self,
        platform: Platform,
        req: &ApiRequest,
        ctx: &CallContext,
        sends: &mut u32,
    ) -> Result<ApiResponse, Failed> {
        let mut progress = Progress {
            platform,
            api: req.api(),
            sends: 0,
            last: None,
        };
        let result = self.attempt_loop(req, ctx, &mut progress).await;
        *sends = progress.sends;
        result
    }

    async fn attempt_loop(
        &self,
        req: &ApiRequest,
        ctx: &CallContext,
        p: &mut Progress,
    ) -> Result<ApiResponse, Failed> {
        let inner = &self.inner;
        let (platform, api) = (p.platform, p.api);
        let bulkhead = self.bulkhead(platform).map_err(|r| p.refused(r))?;
        let class_timeout = self.read_timeout(api);
        let shape = CallShape {
            write: api.is_write(),
        };
        self.budget_record_call(platform, api).await;
        let mut attempts = Attempts::default();
        loop {
            let mode = Mode::Call {
                ctx,
                sends_before: p.sends,
            };
            let sent = match self.step(bulkhead, platform, req, mode).await {
                Ok(sent) => sent,
                Err(refusal) => return Err(p.refused(refusal)),
            };
            p.sends += 1;
            let err = match sent.result {
                Ok(resp) => {
                    if !api.is_write() {
                        self.stale_put(platform, req, &resp).await;
                    }
                    return Ok(resp);
                }
                Err(e) => e,
            };
            // Retry within the policy and the budgets.
            let facts = FailureFacts {
                // A limit guessed from an unmapped code's words is no limit of the gate: not
                // back through it at once, the item's rounds decide (`CallError::guessed_limit`).
                class: if err.guessed_limit {
                    ErrorClass::Unknown
                } else {
                    err.class
                },
                peer_closed: err.transport == Some(TransportError::PeerClosed),
                surely_not_sent: err.surely_not_sent(),
            };
            let verdict = inner.policy.decide(
                facts,
                shape,
                Attempts {
                    counted: attempts.counted + 1,
                    ..attempts
                },
            );
            if verdict == Verdict::RetryNow {
                attempts.free += 1;
            } else {
                attempts.counted += 1;
            }
            let class = err.class;
            p.last = Some(err);
            match verdict {
                Verdict::RetryNow | Verdict::BackToGate => continue,
                Verdict::RetryAfterBackoff => {
                    let delay = inner.backoff.delay(attempts.counted.saturating_sub(1));
                    if delay > ctx.budget.wait_allowance(inner.clock.now(), class_timeout) {
                        let message = format!("{} (no budget left for a retry)", p.last_text());
                        return Err(p.fail(Stop {
                            kind: LinkErrorKind::Platform,
                            class,
                            message,
                            retry_at: None,
                        }));
                    }
                    if !self.budget_try_retry(platform, api).await {
                        let message = format!(
                            "{} (retry budget spent: upstream looks sick)",
                            p.last_text()
                        );
                        return Err(p.fail(Stop {
                            kind: LinkErrorKind::RetryBudget,
                            class,
                            message,
                            retry_at: None,
                        }));
                    }
                    tokio::time::sleep(delay).await;
                }
                Verdict::Stop(reason) => {
                    let message = match (&p.last, reason) {
                        (Some(e), StopReason::AttemptsExhausted) => {
                            format!("{e} (after {} attempts)", p.sends)
                        }
                        (Some(e), StopReason::Fatal | StopReason::Unknown) => e.to_string(),
                        (Some(e), r) => format!("{e} ({})", r.as_str()),
                        (None, r) => r.as_str().to_string(),
                    };
                    // A rate limit is "not now", never a failure of the item: come back after
                    // the ban, or after a second when the platform named none. A limit only
                    // guessed from an unmapped code's words is not: the item's retry rounds
                    // bound it.
                    let retry_at = p
                        .last
                        .as_ref()
                        .filter(|e| e.is_rate_limit())
                        .map(|e| e.ban.unwrap_or(Duration::from_secs(1)));
                    return Err(p.fail(Stop {
                        kind: LinkErrorKind::Platform,
                        class,
                        message,
                        retry_at,
                    }));
                }
            }
        }
    }
}
