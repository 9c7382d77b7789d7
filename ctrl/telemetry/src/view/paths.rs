//! Per-path latency: the last value and an EWMA of the total and of every
//! hop, for at most `max_paths` paths; the least recently updated path is
//! evicted to make room. A path's length is bounded by the INT stack the
//! decoder accepts (at most 42 hops plus the sink), so the table's memory
//! is bounded by `max_paths` × that.

use std::collections::BTreeMap;

use crate::heat::PortKey;
use crate::view::types::{HopLatency, PathLatency};

#[derive(Debug, Clone)]
pub(crate) struct PathTable {
    max_paths: usize,
    /// Weight of the newest value in the EWMAs.
    weight: f64,
    paths: BTreeMap<Vec<PortKey>, (PathLatency, u64)>,
    /// Update tick → path, oldest first: the eviction order. Ticks, not
    /// times, because injected times may repeat or go backwards.
    order: BTreeMap<u64, Vec<PortKey>>,
    tick: u64,
    pub(crate) evicted: u64,
}

impl PathTable {
    pub(crate) fn new(max_paths: usize, weight: f64) -> Self {
        let weight = if weight.is_finite() { weight.clamp(0.0, 1.0) } else { 0.125 };
        PathTable { max_paths, weight, paths: BTreeMap::new(), order: BTreeMap::new(), tick: 0, evicted: 0 }
    }

    pub(crate) fn len(&self) -> usize {
        self.paths.len()
    }

    /// Records one report's hop latencies along `path`.
    pub(crate) fn update(&mut self, now_ns: u64, path: Vec<PortKey>, latencies: &[u32]) {
        if self.max_paths == 0 || path.len() != latencies.len() {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        let total: u64 = latencies.iter().map(|&l| u64::from(l)).sum();
        let w = self.weight;
        if let Some((entry, old_tick)) = self.paths.get_mut(&path) {
            self.order.remove(old_tick);
            *old_tick = tick;
            for (hop, &l) in entry.hops.iter_mut().zip(latencies) {
                hop.last = l;
                hop.ewma += w * (f64::from(l) - hop.ewma);
            }
            entry.last_total = total;
            entry.ewma_total += w * (total as f64 - entry.ewma_total);
            entry.reports += 1;
            entry.last_update_ns = now_ns;
            self.order.insert(tick, path);
            return;
        }
        while self.paths.len() >= self.max_paths {
            let Some((_, oldest)) = self.order.pop_first() else { break };
            self.paths.remove(&oldest);
            self.evicted += 1;
        }
        let hops = path
            .iter()
            .zip(latencies)
            .map(|(&port, &l)| HopLatency { port, last: l, ewma: f64::from(l) })
            .collect();
        let entry = PathLatency {
            path: path.clone(),
            hops,
            last_total: total,
            ewma_total: total as f64,
            reports: 1,
            last_update_ns: now_ns,
        };
        self.paths.insert(path.clone(), (entry, tick));
        self.order.insert(tick, path);
    }

    pub(crate) fn get(&self, path: &[PortKey]) -> Option<&PathLatency> {
        self.paths.get(path).map(|(p, _)| p)
    }

    /// Every path, in path order (deterministic for recordings).
    pub(crate) fn all(&self) -> Vec<PathLatency> {
        self.paths.values().map(|(p, _)| p.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(switch: usize, port: u16) -> PortKey {
        PortKey { switch, port }
    }

    #[test]
    fn ewma_moves_by_the_weight_and_last_is_kept() {
        let mut t = PathTable::new(4, 0.5);
        let p = vec![key(0, 1), key(1, 2)];
        t.update(10, p.clone(), &[10, 20]);
        t.update(20, p.clone(), &[30, 40]);
        let e = t.get(&p).unwrap();
        assert_eq!((e.last_total, e.reports, e.last_update_ns), (70, 2, 20));
        assert!((e.ewma_total - 50.0).abs() < 1e-9);
        assert!((e.hops[0].ewma - 20.0).abs() < 1e-9);
        assert_eq!(e.hops[1].last, 40);
    }

    #[test]
    fn least_recently_updated_path_is_evicted() {
        let mut t = PathTable::new(2, 0.125);
        let a = vec![key(0, 1)];
        let b = vec![key(0, 2)];
        let c = vec![key(0, 3)];
        t.update(1, a.clone(), &[1]);
        t.update(2, b.clone(), &[1]);
        t.update(3, a.clone(), &[1]);
        t.update(4, c.clone(), &[1]);
        assert!(t.get(&a).is_some() && t.get(&c).is_some() && t.get(&b).is_none());
        assert_eq!((t.len(), t.evicted, t.order.len()), (2, 1, 2));
    }

    #[test]
    fn mismatched_lengths_and_zero_capacity_are_ignored() {
        let mut t = PathTable::new(0, f64::NAN);
        t.update(1, vec![key(0, 1)], &[1]);
        assert_eq!(t.len(), 0);
        let mut t = PathTable::new(2, 0.1);
        t.update(1, vec![key(0, 1)], &[1, 2]);
        assert_eq!(t.len(), 0);
    }
}
