//! DCQCN reaction point (the sender's rate limiter), after Zhu et al.,
//! "Congestion Control for Large-Scale RDMA Deployments" (SIGCOMM 2015).
//!
//! Timers are evaluated lazily: whenever the sender looks at its rate, the
//! periods elapsed since the last look are applied in one go, so a queue
//! pair costs no events while it is idle.

use crate::scenario::config::{Clamp, Dcqcn};

/// Most timer periods applied at once; beyond that the rate is back at
/// line rate anyway.
const MAX_CATCH_UP: u64 = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct RateState {
    /// Current and target rate, bits per second.
    rc: f64,
    rt: f64,
    alpha: f64,
    line: f64,
    last_alpha_ps: u64,
    last_timer_ps: u64,
    timer_stage: u32,
    byte_stage: u32,
    bytes: u64,
}

impl RateState {
    pub fn new(line_bps: u64) -> Self {
        let line = line_bps as f64;
        RateState {
            rc: line,
            rt: line,
            alpha: 1.0,
            line,
            last_alpha_ps: 0,
            last_timer_ps: 0,
            timer_stage: 0,
            byte_stage: 0,
            bytes: 0,
        }
    }

    /// The sending rate now, bits per second.
    pub fn rate(&self) -> f64 {
        self.rc
    }

    /// The rate it never exceeds: the line rate it was made with, bits
    /// per second.
    pub fn line(&self) -> f64 {
        self.line
    }

    /// True while the rate is below line rate.
    pub fn limited(&self) -> bool {
        self.rc < self.line
    }

    /// A CNP arrived: cut the rate by alpha/2 and raise alpha.
    pub fn on_cnp(&mut self, p: &Dcqcn, now: u64) {
        self.advance(p, now);
        if p.clamp == Clamp::Always || self.timer_stage > 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.line * p.min_rate);
        self.alpha = (1.0 - p.g) * self.alpha + p.g;
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes = 0;
        self.last_timer_ps = now;
        self.last_alpha_ps = now;
    }

    /// Applies the alpha-decay and rate-increase timers up to `now`.
    pub fn advance(&mut self, p: &Dcqcn, now: u64) {
        let period = p.timer_ps.max(1);
        let k = now.saturating_sub(self.last_alpha_ps) / period;
        if k > 0 {
            self.alpha *= (1.0 - p.g).powi(k.min(1 << 20) as i32);
            self.last_alpha_ps += k * period;
        }
        if !self.limited() {
            self.last_timer_ps = now;
            return;
        }
        let m = (now.saturating_sub(self.last_timer_ps) / period).min(MAX_CATCH_UP);
        for _ in 0..m {
            self.timer_stage += 1;
            self.increase(p);
        }
        if m > 0 {
            self.last_timer_ps = now;
        }
    }

    /// Counts bytes sent; every `byte_counter` bytes is an increase event.
    pub fn on_sent(&mut self, p: &Dcqcn, bytes: u64) {
        if !self.limited() {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= p.byte_counter {
            self.bytes -= p.byte_counter;
            self.byte_stage += 1;
            self.increase(p);
        }
    }

    fn increase(&mut self, p: &Dcqcn) {
        let (t, b) = (self.timer_stage, self.byte_stage);
        if t.min(b) >= p.fast_recovery {
            let i = f64::from(t.min(b) - p.fast_recovery + 1);
            self.rt += p.rhai * self.line * i;
        } else if t.max(b) >= p.fast_recovery {
            self.rt += p.rai * self.line;
        }
        self.rt = self.rt.min(self.line);
        self.rc = ((self.rt + self.rc) / 2.0).min(self.line);
        if self.line - self.rc < self.line * 1e-6 {
            self.rc = self.line;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_cnp_and_recovers_to_line_rate() {
        let p = Dcqcn::default();
        let mut r = RateState::new(100_000_000_000);
        r.on_cnp(&p, 0);
        assert!((r.rate() - 50e9).abs() < 1e6, "first cut halves the rate (alpha = 1): {}", r.rate());
        r.on_cnp(&p, 1_000);
        assert!(r.rate() < 26e9);
        let low = r.rate();
        r.advance(&p, 5 * p.timer_ps);
        assert!(r.rate() > low, "fast recovery raises the rate");
        r.advance(&p, 1_000 * p.timer_ps);
        assert_eq!(r.rate(), 100e9, "eventually back at line rate");
        assert!(!r.limited());
    }

    /// Two cuts within one timer period: the paper's rule lowers the
    /// target at each, the after-timer rule keeps the first cut's, and
    /// clamps again once the timer has raised the rate.
    #[test]
    fn cuts_in_a_row_lower_the_target_only_when_clamping_always() {
        let line = 100_000_000_000u64;
        let run = |clamp: Clamp| {
            let p = Dcqcn { clamp, ..Dcqcn::default() };
            let mut r = RateState::new(line);
            r.on_cnp(&p, 0);
            r.on_cnp(&p, p.timer_ps / 2);
            let after_two = r.rt;
            // Fast recovery ends at the target.
            r.advance(&p, p.timer_ps / 2 + 5 * p.timer_ps);
            (p, r, after_two)
        };
        let (_, always, rt) = run(Clamp::Always);
        assert!((rt - 50e9).abs() < 1e6, "the second cut set the target to 50G: {rt}");
        assert!(always.rate() < 51e9, "recovers toward 50G: {}", always.rate());
        let (p, mut after, rt) = run(Clamp::AfterTimer);
        assert_eq!(rt, 100e9, "the target stays at the rate before the first cut");
        assert!(after.rate() > 95e9, "recovers toward line rate: {}", after.rate());
        // The timer has raised the rate since: the next cut clamps.
        let now = p.timer_ps / 2 + 5 * p.timer_ps;
        let before = after.rate();
        after.on_cnp(&p, now);
        assert_eq!(after.rt, before, "a cut after a timer increase sets the target to the rate it cut");
    }
}
