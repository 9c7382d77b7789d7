//! A set of small integers (flow ids, positions), a bit each: kept
//! between decisions in the planner's buffers and asked at random, where
//! 100,000 bits stay in L1 and the per-flow values they stand for would
//! not.

/// A bit per index below the length it was reset to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    /// Every bit cleared, room for indices below `n` (the memory is kept).
    pub fn reset(&mut self, n: usize) {
        self.0.clear();
        self.0.resize(n.div_ceil(64), 0);
    }

    /// Sets bit `i`; an index past the length is ignored.
    #[inline]
    pub fn set(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i >> 6) {
            *w |= 1 << (i & 63);
        }
    }

    /// Bit `i`; false past the length.
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        self.0.get(i >> 6).is_some_and(|w| w >> (i & 63) & 1 != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::Bits;

    #[test]
    fn bits_set_and_read_back_and_reset_clears_them() {
        let mut b = Bits::default();
        b.reset(130);
        for i in [0, 63, 64, 129] {
            assert!(!b.get(i));
            b.set(i);
            assert!(b.get(i), "bit {i}");
        }
        assert!(!b.get(1) && !b.get(65) && !b.get(128));
        b.set(10_000);
        assert!(!b.get(10_000), "past the length: ignored, read as clear");
        b.reset(130);
        assert!(!b.get(0) && !b.get(129), "reset clears");
    }
}
