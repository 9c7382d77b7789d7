//! Retry delays: exponential with a cap, spread by jitter the caller
//! draws, so that switches (and controllers) that failed together do not
//! retry together. Pure: no clock and no random source of its own, so
//! tests give the draws and check the delays.

use std::time::Duration;

/// Exponential backoff: each delay doubles the last, up to `max`; each
/// one handed out is spread over `[base / 2, base]` by a draw in `[0, 1)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        let max = max.max(initial);
        Backoff { initial, max, next: initial }
    }

    /// The delay before the next attempt, for the jitter draw `unit`
    /// (`[0, 1)`; outside is clamped); the one after doubles, up to the cap.
    pub fn delay(&mut self, unit: f64) -> Duration {
        let base = self.next;
        self.next = base.saturating_mul(2).min(self.max);
        let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
        base.mul_f64(0.5 + 0.5 * unit)
    }

    /// The base of the next delay (before jitter).
    pub fn next_base(&self) -> Duration {
        self.next
    }

    /// Success: the next failure waits the initial delay again.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }

    /// A connection that stayed up for `lived` ended: one that lived as
    /// long as the cap was healthy (the next attempt is quick again); one
    /// that dropped sooner is part of the same trouble and keeps backing off.
    pub fn ended_after(&mut self, lived: Duration) {
        if lived >= self.max {
            self.reset();
        }
    }
}

/// A jitter source: SplitMix64 from a seed. Give each switch's task its
/// own seed (its device id, say, mixed with the start time); tests give
/// a fixed one.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new(seed: u64) -> Self {
        Jitter(seed)
    }

    /// A seed for `device_id` that differs from one process to the next.
    pub fn seed_for(device_id: u64) -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos() & u128::from(u64::MAX)).unwrap_or(0));
        nanos ^ device_id.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The next draw, uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // The top 53 bits: every value exactly representable.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_double_up_to_the_cap_within_their_jitter_band() {
        let mut b = Backoff::new(50 * MS, 400 * MS);
        let top: Vec<Duration> = (0..6).map(|_| b.delay(1.0)).collect();
        assert_eq!(top, [50, 100, 200, 400, 400, 400].map(|m| m * MS));
        b.reset();
        let bottom: Vec<Duration> = (0..5).map(|_| b.delay(0.0)).collect();
        assert_eq!(bottom, [25, 50, 100, 200, 200].map(|m| m * MS));
        b.reset();
        assert_eq!(b.delay(0.5), Duration::from_micros(37_500));
        assert_eq!(b.delay(f64::NAN), 50 * MS, "a bad draw is the band's bottom");
    }

    #[test]
    fn only_a_connection_that_lived_past_the_cap_resets_it() {
        let mut b = Backoff::new(50 * MS, 400 * MS);
        b.delay(1.0);
        b.delay(1.0);
        b.ended_after(399 * MS);
        assert_eq!(b.next_base(), 200 * MS, "a drop soon after connecting keeps backing off");
        b.ended_after(400 * MS);
        assert_eq!(b.next_base(), 50 * MS);
    }

    #[test]
    fn jitter_is_uniform_enough_and_seeded() {
        let mut j = Jitter::new(7);
        let draws: Vec<f64> = (0..10_000).map(|_| j.unit()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let low = draws.iter().filter(|u| **u < 0.5).count();
        assert!((4_700..5_300).contains(&low), "{low} of 10000 below 0.5");
        let again: Vec<f64> = (0..3)
            .map({
                let mut j = Jitter::new(7);
                move |_| j.unit()
            })
            .collect();
        assert_eq!(again, draws[..3]);
    }
}
