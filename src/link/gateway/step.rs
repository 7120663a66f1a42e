//! One attempt: breaker → gate → bulkhead → send → classify. The attempt loop and the probe
//! both go through [`Gateway::step`], so a refusal maps to the same [`LinkErrorKind`] whoever
//! asked (the probe once mapped every gate refusal to `Paused`).

use super::log::{log_send, log_would_reject};
use super::{Bulkhead, CallContext, Gateway, LinkError, LinkErrorKind};
use crate::link::breaker::{Decision, Outcome};
use crate::platform::{Api, ApiRequest, ApiResponse, CallError, ErrorClass, Platform};
use crate::store::CallClass;
use crate::throttle::{GateOutcome, GateRefusal, Lane};
use std::time::Duration;

/// Who asks for the attempt, which decides what bounds it and what it owes besides the send.
#[derive(Clone, Copy)]
pub(super) enum Mode<'a> {
    /// An attempt of a logical call: the breaker admits it and hears its outcome, the task
    /// budget bounds the gate wait and the send, and the send gets its call line.
    Call {
        ctx: &'a CallContext,
        /// Requests of the same logical call already sent (the call line's `retries`).
        sends_before: u32,
    },
    /// A health probe: no breaker, a fixed gate wait, the class read timeout, no call line.
    Probe { max_wait: Duration },
}

/// Why an attempt did not go on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refusal {
    pub(super) kind: LinkErrorKind,
    /// `None` when no platform answer stands behind the refusal (breaker, time budget): the
    /// call reports the class of its last platform error, else `Retry`.
    pub(super) class: Option<ErrorClass>,
    pub(super) message: String,
    pub(super) retry_at: Option<Duration>,
}

impl Refusal {
    /// The class to report, given the last platform error of the call.
    pub(super) fn class_after(&self, last: Option<&CallError>) -> ErrorClass {
        self.class
            .unwrap_or_else(|| last.map_or(ErrorClass::Retry, |e| e.class))
    }

    /// The caller halted the call before it went out: "not now", at once.
    fn halted() -> Refusal {
        Refusal {
            kind: LinkErrorKind::Halted,
            class: Some(ErrorClass::Slow),
            message: "halted before sending (the job was paused or cancelled)".into(),
            retry_at: Some(Duration::ZERO),
        }
    }

    /// A gate that did not let the attempt through: "not now", never the upstream's fault.
    fn gate(refusal: GateRefusal) -> Refusal {
        let (kind, retry_at) = match &refusal {
            GateRefusal::Busy => (LinkErrorKind::Busy, Duration::from_secs(1)),
            GateRefusal::RetryAt(d) => (LinkErrorKind::RateWait, *d),
            GateRefusal::Paused { remaining, .. } => (LinkErrorKind::Paused, *remaining),
            GateRefusal::Unreachable { retry_in, .. } => (LinkErrorKind::Paused, *retry_in),
        };
        Refusal {
            kind,
            class: Some(ErrorClass::Slow),
            message: refusal.to_string(),
            retry_at: Some(retry_at),
        }
    }

    fn budget(e: crate::link::budget::BudgetExhausted) -> Refusal {
        Refusal {
            kind: LinkErrorKind::BudgetExhausted,
            class: None,
            message: e.to_string(),
            retry_at: None,
        }
    }
}

/// An attempt that went on the wire: the classified answer and the time it took.
#[derive(Debug)]
pub(super) struct Sent {
    pub(super) result: Result<ApiResponse, CallError>,
    pub(super) took: Duration,
}

impl Gateway {
    /// The bulkhead of `platform`, or why there is none (a missing secret, or no config).
    pub(super) fn bulkhead(&self, platform: Platform) -> Result<&Bulkhead, Refusal> {
        if let Some(b) = self.inner.bulkheads.get(&platform) {
            return Ok(b);
        }
        let (kind, message) = match self.inner.missing_secrets.get(&platform) {
            Some(var) => (
                LinkErrorKind::MissingSecret,
                format!("{platform} client not built: environment variable {var} is not set (it must hold the secret)"),
            ),
            None => (
                LinkErrorKind::NotConfigured,
                format!("no client configured for {platform}"),
            ),
        };
        Err(Refusal {
            kind,
            class: Some(ErrorClass::Fatal),
            message,
            retry_at: None,
        })
    }

    /// One attempt through `bulkhead`: breaker (calls only) → time budget (calls only) → gate
    /// → bulkhead slot → send → classify. The outcome is reported to the gate (a send spends
    /// quota whoever made it), counted in the ledger, and, for calls, given to the breaker and
    /// logged as a call line. Retries, backoff and the stale cache are the caller's.
    pub(super) async fn step(
        &self,
        bulkhead: &Bulkhead,
        platform: Platform,
        req: &ApiRequest,
        mode: Mode<'_>,
    ) -> Result<Sent, Refusal> {
        let api = req.api();
        let class_timeout = self.read_timeout(api);
        // 1. Breaker (calls only: a probe must see the upstream even while it is open).
        let probe = self.breaker_admission(platform, api, mode).await?;
        // Every admitted half-open probe gets a verdict, whatever stops the attempt.
        let refuse = |r: Refusal| {
            if probe {
                self.record_breaker(platform, api, Outcome::Ignored, true);
            }
            Err(r)
        };
        // 2. Time budget: the gate's wait comes out of it.
        let max_wait = match mode {
            Mode::Call { ctx, .. } => {
                let now = self.inner.clock.now();
                if let Err(e) = ctx.budget.slice(now, class_timeout) {
                    return refuse(Refusal::budget(e));
                }
                ctx.budget.wait_allowance(now, class_timeout)
            }
            Mode::Probe { max_wait } => max_wait,
        };
        // 3. Gate. A halted call gives up its wait (the token it reserved is forfeit).
        let halt = match mode {
            Mode::Call { ctx, .. } => ctx.halt.clone(),
            Mode::Probe { .. } => None,
        };
        if halt.as_ref().is_some_and(|h| h.is_triggered()) {
            return refuse(Refusal::halted());
        }
        // Probes ask for the platform's health on behalf of no job: interactive (a person
        // or an alert waits on them), never stuck behind bulk bookings.
        let (lane, share) = match mode {
            Mode::Call { ctx, .. } => (ctx.lane, ctx.share.as_deref()),
            Mode::Probe { .. } => (Lane::Interactive, None),
        };
        let acquire = self
            .inner
            .gates
            .acquire_as(platform, api, lane, share, max_wait);
        let acquired = match &halt {
            Some(h) => tokio::select! {
                r = acquire => Some(r),
                _ = h.wait() => None,
            },
            None => Some(acquire.await),
        };
        let permit = match acquired {
            Some(Ok(p)) => p,
            Some(Err(refusal)) => return refuse(Refusal::gate(refusal)),
            None => return refuse(Refusal::halted()),
        };
        // 4. Bulkhead slot: a slow platform cannot take another's connections.
        let slot = match bulkhead_slot(bulkhead, platform).await {
            Ok(slot) => slot,
            Err(r) => {
                drop(permit);
                return refuse(r);
            }
        };
        // 5. Send, with the slice the budget grants now (the gate may have waited); not at
        // all if the call was halted meanwhile.
        if let Mode::Call { ctx, .. } = mode {
            if ctx.halted() {
                return refuse(Refusal::halted());
            }
        }
        let slice = match mode {
            Mode::Call { ctx, .. } => match ctx.budget.slice(self.inner.clock.now(), class_timeout)
            {
                Ok(s) => s,
                Err(e) => return refuse(Refusal::budget(e)),
            },
            Mode::Probe { .. } => class_timeout,
        };
        let sent_at = self.inner.clock.now();
        let sent_wall = self.inner.clock.wall();
        let session = match mode {
            Mode::Call { ctx, .. } => ctx.session.as_ref(),
            Mode::Probe { .. } => None,
        };
        // A call cut while on the wire (its task stopped, its lease lost) still left: the
        // platform counts it, so the gate does too (as a failure: no answer came).
        let on_wire = OnWire {
            gates: Some(&self.inner.gates),
            platform,
            api,
            sent: sent_wall,
        };
        let result = bulkhead.transport.call(req, slice, session).await;
        on_wire.answered();
        let took = crate::clock::elapsed_since(sent_at);
        drop(slot);
        drop(permit);
        // 6. Classify and record.
        let sent = Sent { result, took };
        self.record_sent(platform, api, mode, &sent, sent_wall, probe);
        Ok(sent)
    }

    /// The breaker's word on a call (a probe of the platform's health is not asked): a
    /// refusal while it is open, else whether the call is a half-open probe that owes it a
    /// verdict.
    async fn breaker_admission(
        &self,
        platform: Platform,
        api: Api,
        mode: Mode<'_>,
    ) -> Result<bool, Refusal> {
        if let Mode::Probe { .. } = mode {
            return Ok(false);
        }
        match self.admit(platform, api).await {
            Decision::Reject { retry_in } => {
                self.bump(platform, api, |c| c.breaker_rejects += 1);
                Err(Refusal {
                    kind: LinkErrorKind::BreakerOpen,
                    class: None,
                    message: format!("breaker open for {platform} {api}"),
                    retry_at: Some(retry_in),
                })
            }
            decision => {
                if let Decision::WouldReject { retry_in } = decision {
                    log_would_reject(platform, api, retry_in);
                }
                Ok(decision.is_probe())
            }
        }
    }

    /// What a request that went on the wire leaves behind: its call line (calls), its count
    /// in the ledger, its report to the gate (a send spends quota whoever made it) and the
    /// breaker's sample (calls; `probe`: it was the half-open probe).
    fn record_sent(
        &self,
        platform: Platform,
        api: Api,
        mode: Mode<'_>,
        sent: &Sent,
        sent_wall: std::time::SystemTime,
        probe: bool,
    ) {
        let Sent { result, took } = sent;
        if let Mode::Call { ctx, sends_before } = mode {
            log_send(platform, api, ctx, result, *took, sends_before);
        }
        self.ledger_add(
            platform,
            api,
            result
                .as_ref()
                .map_or_else(|e| CallClass::from(e.class), |_| CallClass::Ok),
        );
        self.inner
            .gates
            .report_sent(platform, api, GateOutcome::of(result), sent_wall);
        if let Mode::Call { .. } = mode {
            let slow = *took > Duration::from_millis(self.inner.link.breaker.slow_call_ms);
            let outcome = match result {
                Ok(_) => Outcome::Success { slow },
                Err(e) if e.class == ErrorClass::Retry => Outcome::Failure { slow },
                // Caller errors and rate limits say nothing about upstream health.
                Err(_) => Outcome::Ignored,
            };
            self.record_breaker(platform, api, outcome, probe);
        }
    }

    /// One raw attempt for probes: gate → bulkhead → HTTP, no breaker, retry or stale. The
    /// outcome is reported to the gate (it spends quota like any call). Returns the response
    /// or the classified error, and the HTTP time; a refusal maps as in a logical call.
    pub(crate) async fn probe_call(
        &self,
        platform: Platform,
        req: &ApiRequest,
        max_wait: Duration,
    ) -> Result<(Result<ApiResponse, CallError>, Duration), LinkError> {
        let refused = |r: Refusal| LinkError {
            platform,
            api: req.api(),
            class: r.class_after(None),
            kind: r.kind,
            message: r.message,
            retry_at: r.retry_at,
            attempts: 0,
            last: None,
        };
        let bulkhead = self.bulkhead(platform).map_err(refused)?;
        let sent = self
            .step(bulkhead, platform, req, Mode::Probe { max_wait })
            .await
            .map_err(refused)?;
        Ok((sent.result, sent.took))
    }
}

/// Counts a call that left but whose answer was never awaited (the future was dropped):
/// every call the platform saw counts against the quota.
struct OnWire<'a> {
    gates: Option<&'a crate::throttle::Gates>,
    platform: Platform,
    api: crate::platform::Api,
    sent: std::time::SystemTime,
}

impl OnWire<'_> {
    /// The answer came: the caller reports it.
    fn answered(mut self) {
        self.gates = None;
    }
}

impl Drop for OnWire<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.gates {
            g.report_sent(self.platform, self.api, GateOutcome::Failure, self.sent);
        }
    }
}

/// A connection slot of `bulkhead` within its pool wait: a slow platform cannot take another's
/// connections.
async fn bulkhead_slot(
    bulkhead: &Bulkhead,
    platform: Platform,
) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
    match tokio::time::timeout(bulkhead.pool_wait, bulkhead.slots.clone().acquire_owned()).await {
        Ok(Ok(slot)) => Ok(slot),
        _ => Err(Refusal {
            kind: LinkErrorKind::Busy,
            class: Some(ErrorClass::Slow),
            message: format!(
                "no {platform} connection slot within {} ms",
                bulkhead.pool_wait.as_millis()
            ),
            retry_at: Some(Duration::from_secs(1)),
        }),
    }
}
