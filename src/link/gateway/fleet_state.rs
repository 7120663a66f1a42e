//! Breaker and retry budget, local or fleet-wide. Each process keeps its own breaker window
//! and retry budget; with a fleet, a trip is published to Redis (and a published trip forces
//! the local breaker open) and the retry budget is counted in Redis. When Redis cannot be
//! reached the process falls back to its own state and warns at most every 10 s.

use super::log::log_transition;
use super::Gateway;
use crate::link::breaker::{Breaker, Decision, Outcome, State, Transition, TripReason};
use crate::link::retry_budget::LocalRetryBudget;
use crate::platform::{Api, Platform};
use std::time::{Duration, Instant};

impl Gateway {
    /// Breaker admission, with the fleet's view folded in.
    pub(super) async fn admit(&self, platform: Platform, api: Api) -> Decision {
        let remote = match &self.inner.fleet {
            Some(fleet) => match fleet.breaker_open(platform, api).await {
                Ok(r) => r,
                Err(e) => {
                    self.redis_warn("breaker check", &e);
                    None
                }
            },
            None => None,
        };
        let now = self.inner.clock.now();
        let mut breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let breaker = breakers
            .entry((platform, api))
            .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now));
        if let Some(left) = remote {
            if let Some(t) = breaker.force_open(now, left) {
                log_transition(platform, api, t, breaker.observe_only());
            }
        }
        breaker.admit(now)
    }

    /// Record an attempt's outcome; a trip of this process is published to the fleet.
    pub(super) fn record_breaker(
        &self,
        platform: Platform,
        api: Api,
        outcome: Outcome,
        probe: bool,
    ) {
        let now = self.inner.clock.now();
        let (transition, observe) = {
            let mut breakers = self
                .inner
                .breakers
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let breaker = breakers
                .entry((platform, api))
                .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now));
            (breaker.record(now, outcome, probe), breaker.observe_only())
        };
        let Some(t) = transition else { return };
        log_transition(platform, api, t, observe);
        if let (Transition::Opened { open_for, reason }, false) = (t, observe) {
            if reason == TripReason::Fleet {
                return;
            }
            if let Some(fleet) = self.inner.fleet.clone() {
                // Publish without holding up this call's return; the trip is already local.
                let holder = self.inner.worker_id.clone();
                let this = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = fleet.publish_trip(platform, api, open_for, &holder).await {
                        this.redis_warn("breaker publish", &e);
                    }
                });
            }
        }
    }

    /// The breaker state of (platform, api) in this process.
    pub fn breaker_state(&self, platform: Platform, api: Api) -> State {
        let now = self.inner.clock.now();
        let mut breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        breakers
            .entry((platform, api))
            .or_insert_with(|| Breaker::new(self.inner.link.breaker.clone(), now))
            .state(now)
    }

    /// Count a logical call in the retry budget (locally, and in the fleet's when there is one).
    pub(super) async fn budget_record_call(&self, platform: Platform, api: Api) {
        self.local_budget(platform, api, |b, now| b.record_call(now));
        if let Some(fleet) = &self.inner.fleet {
            if let Err(e) = fleet
                .budget_record_call(platform, api, self.inner.budget_policy.window)
                .await
            {
                self.redis_warn("retry budget", &e);
            }
        }
    }

    /// Take one retry from the fleet's budget, or this process's when Redis is unreachable.
    pub(super) async fn budget_try_retry(&self, platform: Platform, api: Api) -> bool {
        if let Some(fleet) = &self.inner.fleet {
            match fleet
                .budget_try_retry(platform, api, &self.inner.budget_policy)
                .await
            {
                Ok(granted) => return granted,
                Err(e) => self.redis_warn("retry budget", &e),
            }
        }
        self.local_budget(platform, api, |b, now| b.try_retry(now))
    }

    /// Run `f` on this process's retry budget of (platform, api), made on first use.
    fn local_budget<R>(
        &self,
        platform: Platform,
        api: Api,
        f: impl FnOnce(&mut LocalRetryBudget, Instant) -> R,
    ) -> R {
        let now = self.inner.clock.now();
        let mut b = self
            .inner
            .local_budget
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let budget = b
            .entry((platform, api))
            .or_insert_with(|| LocalRetryBudget::new(self.inner.budget_policy, now));
        f(budget, now)
    }

    pub(super) fn redis_warn(&self, what: &str, e: &redis::RedisError) {
        let mut last = self
            .inner
            .last_redis_warn
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now = self.inner.clock.now();
        if last.is_none_or(|t| now.saturating_duration_since(t) > Duration::from_secs(10)) {
            *last = Some(now);
            tracing::warn!("link {what}: redis unavailable, using this process's state: {e}");
        }
    }
}
