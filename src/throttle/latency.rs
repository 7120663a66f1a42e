//! Measured call latency of one gate (how long permits are held), for deriving concurrency as
//! rate x p95 from what the platform actually does rather than from the configured guess.

/// The last `cap` latencies in ms; p95 over them.
#[derive(Debug, Clone)]
pub(crate) struct LatencyWindow {
    samples: Vec<u32>,
    next: usize,
    cap: usize,
}

impl LatencyWindow {
    pub(crate) fn new(cap: usize) -> LatencyWindow {
        LatencyWindow {
            samples: Vec::with_capacity(cap.max(1)),
            next: 0,
            cap: cap.max(1),
        }
    }

    pub(crate) fn record(&mut self, ms: u32) {
        if self.samples.len() < self.cap {
            self.samples.push(ms);
        } else {
            self.samples[self.next] = ms;
        }
        self.next = (self.next + 1) % self.cap;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }

    /// 95th percentile (nearest rank) of the window; None until `min_samples` are in.
    pub(crate) fn p95(&self, min_samples: usize) -> Option<u32> {
        if self.samples.len() < min_samples.max(1) {
            return None;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let rank = ((sorted.len() as f64) * 0.95).ceil() as usize;
        sorted.get(rank.saturating_sub(1)).copied()
    }
}

/// In-flight calls needed to sustain `rate` calls/s at `p95_ms` latency (at least 1).
pub(crate) fn concurrency_for(rate: f64, p95_ms: u64) -> u32 {
    ((rate * p95_ms as f64 / 1000.0).ceil() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p95_is_nearest_rank_over_the_last_samples() {
        let mut w = LatencyWindow::new(100);
        assert_eq!(w.p95(1), None);
        for ms in 1..=100 {
            w.record(ms);
        }
        assert_eq!(w.p95(20), Some(95));
        // Older samples roll out: 100 new ones of 10 ms.
        for _ in 0..100 {
            w.record(10);
        }
        assert_eq!(w.p95(20), Some(10));
        assert_eq!(w.len(), 100);
    }

    #[test]
    fn too_few_samples_say_nothing() {
        let mut w = LatencyWindow::new(10);
        w.record(5);
        assert_eq!(w.p95(20), None);
    }

    #[test]
    fn concurrency_is_rate_times_p95() {
        // 10 slots x 300 ms = 33 calls/s at most; 80/s needs 24.
        assert_eq!(concurrency_for(80.0, 300), 24);
        assert_eq!(concurrency_for(0.5, 10), 1);
    }
}
