//! The time grid of a phase plan: a slot length and each job's period in
//! slots, such that the periods have a common multiple (the hyperperiod)
//! short enough to plan over and the rounding of each period to whole
//! slots drifts less than half a slot over it.

/// A grid that fits every period, or why none does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grid {
    pub slot_ns: u64,
    /// Each job's period, in slots.
    pub periods: Vec<u64>,
    /// The least common multiple of `periods`, in slots.
    pub slots: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Finds the finest grid (from `finest` slots per shortest period down to
/// 16: coarser slots would waste most of a short communication phase) whose hyperperiod has at most `max_slots` slots and on which every
/// period is exact within half a slot over the whole hyperperiod. `None`
/// when no grid does: the periods have no useful common multiple.
pub(crate) fn grid(periods_ns: &[u64], finest: u64, max_slots: u64) -> Option<Grid> {
    let shortest = periods_ns.iter().copied().min()?.max(1);
    let mut per = finest.max(16);
    while per >= 16 {
        if let Some(g) = try_grid(periods_ns, (shortest / per).max(1), max_slots) {
            return Some(g);
        }
        per /= 2;
    }
    None
}

fn try_grid(periods_ns: &[u64], slot_ns: u64, max_slots: u64) -> Option<Grid> {
    let periods: Vec<u64> = periods_ns.iter().map(|&p| ((p + slot_ns / 2) / slot_ns).max(1)).collect();
    let mut slots = 1u64;
    for &p in &periods {
        slots = (slots / gcd(slots, p)).checked_mul(p)?;
        if slots > max_slots {
            return None;
        }
    }
    // Over one hyperperiod a job runs slots / p iterations; the rounding
    // of its period adds up over them and must stay under half a slot.
    for (&p_ns, &p) in periods_ns.iter().zip(&periods) {
        let err = (p * slot_ns).abs_diff(p_ns);
        if u128::from(err) * u128::from(slots / p) * 2 > u128::from(slot_ns) {
            return None;
        }
    }
    Some(Grid { slot_ns, periods, slots })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_periods_make_one_period() {
        let g = grid(&[1_000_000, 1_000_000], 64, 4096).unwrap();
        assert_eq!(g.slots, 64);
        assert_eq!(g.periods, vec![64, 64]);
    }

    #[test]
    fn harmonic_periods_make_the_longest() {
        let g = grid(&[1_000_000, 2_000_000, 4_000_000], 64, 4096).unwrap();
        assert_eq!(g.slots, 256);
    }

    #[test]
    fn unrelated_periods_have_no_grid() {
        // 1 ms and 1.37 ms: a common multiple of 100 ms, drift on coarser grids.
        assert_eq!(grid(&[1_000_000, 1_370_001], 64, 1024), None);
        // 1 ms and 997 ms: periods of very different length.
        assert_eq!(grid(&[1_000_000, 997_000_000], 64, 1024), None);
    }
}
