//! The load profile of a phase plan: per link used by two jobs or more,
//! its utilisation in every slot of the common period. A link one job
//! uses alone needs no profile: that job's own utilisation there is all
//! it ever carries.

use std::collections::BTreeMap;

use super::grid::Grid;
use super::PhaseJob;

/// One job on the grid.
#[derive(Debug)]
struct Slotted {
    period: u64,
    /// Communication slots per period (the whole period: always on).
    comm: u64,
    /// Its phase, in slots, within its period.
    base: u64,
    shiftable: bool,
    /// `(shared link, utilisation)` while it communicates.
    shared: Vec<(usize, f64)>,
    /// Its highest utilisation on links no other job uses.
    own_peak: f64,
}

#[derive(Debug)]
pub(super) struct Profile {
    slots: u64,
    jobs: Vec<Slotted>,
    /// `shared link * slots + slot`: utilisation.
    load: Vec<f64>,
    /// Scratch: a window's maxima over one link.
    window: Vec<f64>,
    /// Scratch for [`Profile::window_max`]: three rows of up to twice the slots.
    scratch: Vec<f64>,
}

impl Profile {
    pub fn new(jobs: &[PhaseJob], capacity_bps: &[u64], g: &Grid) -> Self {
        let cap = |l: usize| capacity_bps.get(l).copied().filter(|&c| c > 0);
        let mut users: BTreeMap<usize, usize> = BTreeMap::new();
        for j in jobs {
            let mut seen: Vec<usize> =
                j.loads.iter().map(|&(l, _)| l).filter(|&l| cap(l).is_some()).collect();
            seen.sort_unstable();
            seen.dedup();
            for l in seen {
                *users.entry(l).or_default() += 1;
            }
        }
        let dense: BTreeMap<usize, usize> =
            users.iter().filter(|(_, &n)| n > 1).enumerate().map(|(i, (&l, _))| (l, i)).collect();
        let slotted = jobs
            .iter()
            .zip(&g.periods)
            .map(|(j, &period)| {
                let mut per_link: BTreeMap<usize, f64> = BTreeMap::new();
                for &(l, r) in &j.loads {
                    if let Some(c) = cap(l) {
                        *per_link.entry(l).or_default() += r as f64 / c as f64;
                    }
                }
                let mut shared = Vec::new();
                let mut own_peak = 0.0f64;
                for (l, u) in per_link {
                    match dense.get(&l) {
                        Some(&d) => shared.push((d, u)),
                        None => own_peak = own_peak.max(u),
                    }
                }
                // A phase between two slot edges covers the slot it starts in.
                let comm = (j.phase_ns % g.slot_ns + j.comm_ns).div_ceil(g.slot_ns).clamp(1, period);
                let base = (j.phase_ns / g.slot_ns) % period;
                Slotted { period, comm, base, shiftable: j.shiftable, shared, own_peak }
            })
            .collect();
        Profile {
            slots: g.slots,
            jobs: slotted,
            load: vec![0.0; dense.len() * g.slots as usize],
            window: vec![0.0; g.slots as usize],
            scratch: vec![0.0; 6 * g.slots as usize],
        }
    }

    pub fn clear(&mut self) {
        self.load.iter_mut().for_each(|x| *x = 0.0);
    }

    /// Every job at its offset.
    pub fn fill(&mut self, offsets: &[u64]) {
        self.clear();
        for (j, &o) in offsets.iter().enumerate() {
            self.add(j, o, 1.0);
        }
    }

    /// The first slot of each of job `j`'s communication phases in the
    /// common period, at offset `o`.
    fn starts(&self, j: usize, o: u64) -> impl Iterator<Item = u64> + '_ {
        let s = &self.jobs[j];
        let first = (s.base + o) % s.period;
        (0..self.slots / s.period).map(move |k| first + k * s.period)
    }

    /// Adds (`sign` 1) or removes (-1) job `j` at offset `o`.
    pub fn add(&mut self, j: usize, o: u64, sign: f64) {
        let n = self.slots as usize;
        let spans = self.spans(j, o);
        let s = &self.jobs[j];
        for &(d, u) in &s.shared {
            let row = &mut self.load[d * n..(d + 1) * n];
            for &(a, b) in &spans {
                row[a..b].iter_mut().for_each(|x| *x += sign * u);
            }
        }
    }

    /// The slot ranges job `j` communicates in at offset `o`, each
    /// within `0..slots` (a phase over the end of the common period is
    /// two).
    fn spans(&self, j: usize, o: u64) -> Vec<(usize, usize)> {
        let n = self.slots as usize;
        let comm = self.jobs[j].comm as usize;
        let mut out = Vec::new();
        for t0 in self.starts(j, o) {
            let (a, b) = (t0 as usize, t0 as usize + comm);
            if b <= n {
                out.push((a, b));
            } else {
                out.push((a, n));
                out.push((0, b - n));
            }
        }
        out
    }

    /// The highest utilisation job `j` meets at offset `o` (itself
    /// counted if it is in the profile; not counted otherwise).
    pub fn seen(&self, j: usize, o: u64) -> f64 {
        let n = self.slots as usize;
        let spans = self.spans(j, o);
        let s = &self.jobs[j];
        let mut worst = s.own_peak;
        for &(d, _) in &s.shared {
            let row = &self.load[d * n..(d + 1) * n];
            for &(a, b) in &spans {
                worst = row[a..b].iter().copied().fold(worst, f64::max);
            }
        }
        worst
    }

    /// Job `j`'s stretch at offset `o`, with every job in the profile.
    pub fn stretch(&self, j: usize, o: u64) -> f64 {
        self.seen(j, o).max(1.0)
    }

    /// The best offset for job `j` (not in the profile) and what it would
    /// meet there, at least 1 (see [`pick`]). A fixed job has only offset 0.
    pub fn best(&mut self, j: usize) -> (u64, f64) {
        let (period, comm, base, shiftable) = {
            let s = &self.jobs[j];
            (s.period as usize, s.comm as usize, s.base as usize, s.shiftable)
        };
        let choices = if shiftable { period } else { 1 };
        // Per offset, the highest load over its windows, over the links.
        let mut worst = vec![self.jobs[j].own_peak; choices];
        let mut folded = vec![0.0f64; period];
        for k in 0..self.jobs[j].shared.len() {
            let (d, u) = self.jobs[j].shared[k];
            self.window_max(d, comm);
            // A phase starting at slot r of the period starts at r, r +
            // period, ... in the common period: its highest window.
            folded.copy_from_slice(&self.window[..period]);
            for chunk in self.window[period..].chunks_exact(period) {
                for (f, &w) in folded.iter_mut().zip(chunk) {
                    *f = if w > *f { w } else { *f };
                }
            }
            for (o, w) in worst.iter_mut().enumerate() {
                let m = folded[(base + o) % period] + u;
                if m > *w {
                    *w = m;
                }
            }
        }
        pick(&worst)
    }

    /// `window[t]` = the highest load of shared link `d` over slots
    /// `t .. t + len` (wrapping), by blocks of `len` (van Herk / Gil and
    /// Werman: a running maximum from each block's start and one to each
    /// block's end; a window spans the end of one block and the start of
    /// the next). Three passes, no branches that depend on the data.
    fn window_max(&mut self, d: usize, len: usize) {
        let n = self.slots as usize;
        let len = len.clamp(1, n);
        let total = n + len - 1;
        let (ext, rest) = self.scratch.split_at_mut(total);
        let (from_start, rest) = rest.split_at_mut(total);
        let to_end = &mut rest[..total];
        let row = &self.load[d * n..(d + 1) * n];
        for (i, e) in ext.iter_mut().enumerate() {
            *e = row[if i < n { i } else { i - n }];
        }
        for b in (0..total).step_by(len) {
            let end = (b + len).min(total);
            let mut m = f64::NEG_INFINITY;
            for i in b..end {
                m = if ext[i] > m { ext[i] } else { m };
                from_start[i] = m;
            }
            let mut m = f64::NEG_INFINITY;
            for i in (b..end).rev() {
                m = if ext[i] > m { ext[i] } else { m };
                to_end[i] = m;
            }
        }
        for (t, w) in self.window.iter_mut().enumerate() {
            let (a, b) = (to_end[t], from_start[t + len - 1]);
            *w = if a > b { a } else { b };
        }
    }

    /// The highest utilisation over every link and slot.
    pub fn peak(&self) -> f64 {
        let shared = self.load.iter().copied().fold(0.0f64, f64::max);
        self.jobs.iter().map(|s| s.own_peak).fold(shared, f64::max)
    }
}

/// The offset to take, given what each would meet: the least cost (at
/// least 1: under capacity nothing slows), 0 if 0 is among the least (no
/// delay where none helps), else the middle of the first run of offsets
/// with the least cost. The middle leaves the most room on both sides,
/// for communication that runs longer than planned (headers, a compute
/// phase that varies) before the phases touch.
fn pick(worst: &[f64]) -> (u64, f64) {
    let cost = |o: usize| worst[o].max(1.0);
    let least = (0..worst.len()).map(cost).fold(f64::INFINITY, f64::min);
    let is_least = |o: usize| cost(o) <= least + super::EPS;
    if worst.is_empty() || is_least(0) {
        return (0, worst.first().map_or(1.0, |_| cost(0)));
    }
    let first = (0..worst.len()).find(|&o| is_least(o)).unwrap_or(0);
    let last = (first..worst.len()).take_while(|&o| is_least(o)).last().unwrap_or(first);
    let mid = first + (last - first) / 2;
    (mid as u64, cost(mid))
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn zero_when_it_is_among_the_least_else_the_middle_of_the_first_run() {
        assert_eq!(pick(&[0.5, 0.2, 0.9]), (0, 1.0));
        assert_eq!(pick(&[2.0, 2.0, 1.0, 1.0, 1.0, 2.0, 1.0]), (3, 1.0));
        assert_eq!(pick(&[2.0, 1.5, 3.0]), (1, 1.5));
    }
}
