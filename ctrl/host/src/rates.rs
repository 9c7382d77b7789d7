//! Rates from successive counter readings, through wraps and resets.
//!
//! Kernel counters are 32 or 64 bits wide and nothing says which, so a
//! decrease is read as a wrap only when the old value sat in the top
//! quarter of a width (then the counter plausibly ran over); any other
//! decrease is a reset (driver reload, device re-plugged), and the counter
//! counts from zero again.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::sample::CounterKey;

/// How a counter moved between two readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Increase (or no change) by this much.
    Up(u64),
    /// Wrapped around 2^32; the increase is given.
    Wrapped32(u64),
    /// Wrapped around 2^64; the increase is given.
    Wrapped64(u64),
    /// Went back to a value that is not a wrap: counted from zero.
    Reset(u64),
}

impl Step {
    pub fn increase(self) -> u64 {
        match self {
            Step::Up(d) | Step::Wrapped32(d) | Step::Wrapped64(d) | Step::Reset(d) => d,
        }
    }
}

/// Classifies the move from `old` to `new`.
pub fn step(old: u64, new: u64) -> Step {
    const TOP32: u64 = 3 << 30;
    const TOP64: u64 = 3 << 62;
    if new >= old {
        Step::Up(new - old)
    } else if old <= u64::from(u32::MAX) && old >= TOP32 {
        Step::Wrapped32((u64::from(u32::MAX) - old) + new + 1)
    } else if old >= TOP64 {
        Step::Wrapped64(new.wrapping_sub(old))
    } else {
        Step::Reset(new)
    }
}

/// Per-counter rates, kept between polls.
#[derive(Debug, Default)]
pub struct Rates {
    last: Option<(Duration, BTreeMap<CounterKey, u64>)>,
    rates: BTreeMap<CounterKey, f64>,
}

/// What changed shape between two polls, for the log.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    pub wrapped: Vec<CounterKey>,
    pub reset: Vec<CounterKey>,
    /// Counters present before and gone now.
    pub vanished: Vec<CounterKey>,
}

impl Rates {
    /// Takes a new reading at monotonic time `at`; rates are per second
    /// over the interval since the previous reading. A counter seen for the
    /// first time has no rate until its second reading.
    pub fn update(&mut self, at: Duration, counters: &BTreeMap<CounterKey, u64>) -> Changes {
        let mut changes = Changes::default();
        let mut rates = BTreeMap::new();
        if let Some((then, prev)) = &self.last {
            let secs = at.saturating_sub(*then).as_secs_f64();
            for (key, &new) in counters {
                let Some(&old) = prev.get(key) else { continue };
                let s = step(old, new);
                match s {
                    Step::Wrapped32(_) | Step::Wrapped64(_) => changes.wrapped.push(key.clone()),
                    Step::Reset(_) => changes.reset.push(key.clone()),
                    Step::Up(_) => {}
                }
                if secs > 0.0 {
                    // Precision loss above 2^53 per interval is irrelevant for a rate.
                    #[allow(clippy::cast_precision_loss)]
                    rates.insert(key.clone(), s.increase() as f64 / secs);
                }
            }
            changes.vanished = prev.keys().filter(|k| !counters.contains_key(*k)).cloned().collect();
        }
        self.rates = rates;
        self.last = Some((at, counters.clone()));
        changes
    }

    pub fn get(&self, key: &CounterKey) -> Option<f64> {
        self.rates.get(key).copied()
    }

    pub fn all(&self) -> &BTreeMap<CounterKey, f64> {
        &self.rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Source;

    #[test]
    fn steps() {
        assert_eq!(step(5, 9), Step::Up(4));
        assert_eq!(step(u64::from(u32::MAX) - 1, 3), Step::Wrapped32(5));
        assert_eq!(step(u64::MAX - 9, 10), Step::Wrapped64(20));
        assert_eq!(step(1_000, 10), Step::Reset(10), "a small decrease is a reset, not a wrap");
        assert_eq!(step(1 << 40, 7), Step::Reset(7));
    }

    #[test]
    fn rates_over_wrap_and_vanishing() {
        let key = |n: &str| CounterKey {
            device: "d".into(),
            port: Some(1),
            source: Source::IbHwCounters,
            name: n.into(),
        };
        let mut r = Rates::default();
        let first: BTreeMap<_, _> = [(key("a"), u64::from(u32::MAX) - 99), (key("b"), 1)].into();
        assert_eq!(r.update(Duration::from_secs(10), &first), Changes::default());
        assert_eq!(r.get(&key("a")), None, "no rate from one reading");
        let second: BTreeMap<_, _> = [(key("a"), 100)].into();
        let c = r.update(Duration::from_secs(12), &second);
        assert_eq!(c.wrapped, vec![key("a")]);
        assert_eq!(c.vanished, vec![key("b")]);
        assert_eq!(r.get(&key("a")), Some(100.0), "200 counts over 2 s");
    }
}
