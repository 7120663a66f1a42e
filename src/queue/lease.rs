//! When a worker must treat its claims as gone (docs/design.md, "Leases").
//!
//! Another worker takes an in-flight entry over once it has been idle for `claim_idle` on
//! the Redis server's clock; each heartbeat resets that idle time. The reset happens after
//! the heartbeat was *sent*, so the local time elapsed since the send of the last heartbeat
//! that succeeded is an upper bound of the entry's idle time. The lease is given up halfway
//! between the next heartbeat's due time and `claim_idle`: late enough that a heartbeat that
//! is merely slow does not trip it, early enough that the worker stops calling for the task
//! before the fleet can give it to another worker. Pure: the caller supplies instants.

use std::time::{Duration, Instant};

/// The lease of a worker's in-flight entries, measured from successful heartbeats.
#[derive(Debug, Clone)]
pub(crate) struct LeaseWatch {
    lost_after: Duration,
    last_ok_sent: Option<Instant>,
}

impl LeaseWatch {
    pub(crate) fn new(claim_idle: Duration, heartbeat: Duration) -> LeaseWatch {
        LeaseWatch {
            lost_after: (claim_idle + heartbeat) / 2,
            last_ok_sent: None,
        }
    }

    /// A heartbeat sent at `sent_at` succeeded.
    pub(crate) fn renewed(&mut self, sent_at: Instant) {
        self.last_ok_sent = Some(self.last_ok_sent.map_or(sent_at, |t| t.max(sent_at)));
    }

    /// Whether the claim on an entry fetched at `fetched_at` (the fetch counts as its first
    /// refresh) may already be someone else's at `now`.
    pub(crate) fn expired(&self, fetched_at: Instant, now: Instant) -> bool {
        let since = self.last_ok_sent.map_or(fetched_at, |t| t.max(fetched_at));
        now.saturating_duration_since(since) >= self.lost_after
    }

    /// How long after its last refresh a claim is given up.
    pub(crate) fn lost_after(&self) -> Duration {
        self.lost_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HB: Duration = Duration::from_secs(10);
    const CLAIM: Duration = Duration::from_secs(30);
    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn held_while_heartbeats_succeed() {
        let t0 = Instant::now();
        let mut l = LeaseWatch::new(CLAIM, HB);
        for i in 1..10u32 {
            let now = t0 + HB * i;
            assert!(!l.expired(t0, now), "heartbeat {i}");
            l.renewed(now);
        }
    }

    #[test]
    fn lost_before_the_fleet_can_reclaim() {
        let t0 = Instant::now();
        let l = LeaseWatch::new(CLAIM, HB);
        assert_eq!(l.lost_after(), s(20));
        // Past the next heartbeat's due time, before the fleet may reclaim.
        assert!(l.lost_after() > HB && l.lost_after() < CLAIM);
        assert!(!l.expired(t0, t0 + s(19)));
        assert!(l.expired(t0, t0 + s(20)));
        assert!(l.lost_after() < CLAIM);
    }

    #[test]
    fn a_late_answer_counts_from_its_send_time() {
        let t0 = Instant::now();
        let mut l = LeaseWatch::new(CLAIM, HB);
        l.renewed(t0 + s(10));
        assert!(l.expired(t0, t0 + s(30)));
        // An older send never moves the lease back.
        l.renewed(t0 + s(5));
        assert!(!l.expired(t0, t0 + s(29)));
    }

    #[test]
    fn a_fresh_fetch_has_its_own_lease() {
        let t0 = Instant::now();
        let mut l = LeaseWatch::new(CLAIM, HB);
        l.renewed(t0);
        // Heartbeats failed since t0, but this entry was fetched at t0 + 20 s.
        assert!(l.expired(t0, t0 + s(26)));
        assert!(!l.expired(t0 + s(20), t0 + s(26)));
        assert!(l.expired(t0 + s(20), t0 + s(40)));
    }

    #[test]
    fn lease_sits_between_the_next_heartbeat_and_the_claim() {
        let l = LeaseWatch::new(s(2), s(1));
        assert_eq!(l.lost_after(), Duration::from_millis(1500));
        let l = LeaseWatch::new(s(8), s(2));
        assert_eq!(l.lost_after(), s(5));
    }
}
