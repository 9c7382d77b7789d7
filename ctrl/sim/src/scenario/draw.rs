//! The random parts of a workload, drawn from the scenario's seed: the
//! rank order of `placement: shuffled`, permutations without `shift`, and
//! the flows of Poisson jobs. They are drawn again whenever the seed
//! changes, so `--seed` and `sim sweep --seeds` redraw everything (the
//! forwarders draw their hashes, flowlets and spray orders from the same
//! seed at run time).

use std::borrow::Cow;

use metaroce_topo::Topology;

use crate::engine::flows::MAX_FLOWS;
use crate::rng::{mix64, Rng};
use crate::scenario::config::{Job, Pattern, PoissonFlow, Scenario};

impl Scenario {
    /// Sets the seed and redraws every job's random parts with it.
    pub fn reseed(&mut self, topo: &Topology, seed: u64) {
        self.seed = seed;
        for job in &mut self.jobs {
            draw(job, topo, seed);
        }
        self.drawn_seed = seed;
    }

    /// The scenario with its jobs drawn for `seed`: itself when they
    /// are, else a copy redrawn (for callers that set `seed` directly).
    pub fn drawn(&self, topo: &Topology) -> Cow<'_, Scenario> {
        if self.drawn_seed == self.seed {
            return Cow::Borrowed(self);
        }
        let mut sc = self.clone();
        sc.reseed(topo, self.seed);
        Cow::Owned(sc)
    }
}

/// The random stream of job `index` under `seed`.
fn job_rng(seed: u64, index: usize) -> Rng {
    Rng::new(seed ^ (index as u64).wrapping_mul(0x51_7CC1_B727_220A))
}

/// Draws the random parts of `job` for `seed` (the shuffle first, then
/// the permutation or the flows, all from the job's own stream).
pub(crate) fn draw(job: &mut Job, topo: &Topology, seed: u64) {
    let mut rng = job_rng(seed, job.draw.index);
    job.ranks.clone_from(&job.draw.hosts);
    if job.draw.shuffled {
        rng.shuffle(&mut job.ranks);
    }
    let n = job.ranks.len();
    match &mut job.pattern {
        Pattern::Permutation { perm } if job.draw.random_perm => *perm = derangement(n, &mut rng),
        Pattern::Poisson { load_ppm, sizes, duration_ps, flows } => {
            let load = f64::from(*load_ppm) / 1e6;
            let mean_bits = sizes.mean() * 8.0;
            flows.clear();
            for (src, &h) in job.ranks.iter().enumerate() {
                if n < 2 {
                    break;
                }
                let mut r = Rng::new(mix64(rng.next_u64() ^ src as u64));
                // Mean gap between a sender's flow starts, in picoseconds.
                let gap_ps = mean_bits / (load * topo.hosts[h].nic_rate.bps() as f64) * 1e12;
                let mut t = 0.0f64;
                loop {
                    t += -(1.0 - r.unit()).ln() * gap_ps;
                    if t >= *duration_ps as f64 || flows.len() > MAX_FLOWS {
                        break;
                    }
                    let mut dst = r.below(n as u64 - 1) as usize;
                    if dst >= src {
                        dst += 1;
                    }
                    let bytes = sizes.sample(r.unit());
                    flows.push(PoissonFlow {
                        src: src as u32,
                        dst: dst as u32,
                        bytes,
                        at_ps: job.start_ps + t as u64,
                    });
                }
            }
            flows.sort_by_key(|f| (f.at_ps, f.src));
        }
        _ => {}
    }
}

/// A random permutation with no fixed point (Sattolo's algorithm gives a
/// single cycle, which has none).
pub(crate) fn derangement(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64) as usize;
        p.swap(i, j);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derangements_have_no_fixed_point() {
        let mut rng = Rng::new(3);
        for n in 2..40 {
            let p = derangement(n, &mut rng);
            assert!(p.iter().enumerate().all(|(i, &j)| i != j));
            let mut s = p.clone();
            s.sort_unstable();
            assert_eq!(s, (0..n).collect::<Vec<_>>());
        }
    }
}
