//! When a batch of new flows may be placed by the exact colouring, and the
//! routes it gives: equal rates (within 0.1%), two tiers, every source leaf's group the
//! same set of spines with one link each, every spine one link down to
//! each destination, all those links of one capacity and equally loaded.

use std::collections::HashMap;

use crate::colour::equitable;
use crate::flow::FlowId;
use crate::net::{DirLink, NONE};
use crate::planner::Planner;
use crate::search::Route;

/// What every link of the batch must look like.
struct Shape<'a> {
    spines: &'a [u32],
    colour_of: &'a [u32],
    cap: u64,
    util: f64,
}

impl Planner {
    fn same(&self, shape: &Shape<'_>, dl: DirLink) -> bool {
        let net = &self.net;
        net.cap[dl as usize] == shape.cap && self.loads().util(net, dl, 0) == shape.util && net.dl_up(dl)
    }

    /// `a`'s uplink of each colour toward `d`: one per spine, all alike.
    fn uplinks(&self, shape: &Shape<'_>, a: u32, d: u32) -> Option<Vec<DirLink>> {
        let ms = self.net.members(d, a);
        if ms.len() != shape.spines.len() {
            return None;
        }
        let mut by_colour = vec![NONE; shape.spines.len()];
        for m in ms {
            let c = shape.colour_of[m.peer as usize];
            if c == NONE || by_colour[c as usize] != NONE || !self.same(shape, m.dl) {
                return None;
            }
            by_colour[c as usize] = m.dl;
        }
        Some(by_colour)
    }

    /// Spine `s`'s one downlink to leaf `b` (destination `d`).
    fn downlink(&self, shape: &Shape<'_>, s: u32, d: u32, b: u32) -> Option<DirLink> {
        match self.net.members(d, s) {
            [m] if m.peer == b && self.same(shape, m.dl) => Some(m.dl),
            _ => None,
        }
    }

    /// Routes for `batch` (in its order) from an equitable colouring, or
    /// None if the batch does not qualify.
    pub(crate) fn exact_routes(&self, batch: &[FlowId]) -> Option<Vec<Route>> {
        let &first = batch.first()?;
        let rate = self.flows.rate[first as usize];
        let net = &self.net;
        let (a0, d0) = (self.src_leaf(first), self.dest(first));
        if d0 == NONE {
            return None;
        }
        let m0 = net.members(d0, a0);
        let dl0 = m0.first()?.dl;
        let (cap, util) = (net.cap[dl0 as usize], self.loads().util(net, dl0, 0));
        let mut spines: Vec<u32> = m0.iter().map(|m| m.peer).collect();
        spines.sort_unstable();
        spines.dedup();
        if spines.len() != m0.len() || spines.len() < 2 {
            return None;
        }
        let mut colour_of = vec![NONE; net.n];
        for (c, &s) in spines.iter().enumerate() {
            colour_of[s as usize] = c as u32;
        }
        let shape = Shape { spines: &spines, colour_of: &colour_of, cap, util };
        // Per (source leaf, destination): the uplink of each colour; per
        // (spine, destination): its one downlink.
        let mut up: HashMap<(u32, u32), Vec<DirLink>> = HashMap::new();
        let mut down: HashMap<(u32, u32), DirLink> = HashMap::new();
        let (mut leaves, mut index) = (Vec::new(), vec![NONE; net.n]);
        let mut edges = Vec::with_capacity(batch.len());
        for &f in batch {
            // Equal within 0.1%: integer max-min shares differ by a few bits per second.
            if self.flows.rate[f as usize].abs_diff(rate) > rate / 1000 {
                return None;
            }
            let (a, d) = (self.src_leaf(f), self.dest(f));
            let b = net.dests.get(d as usize).copied()? as u32;
            if let std::collections::hash_map::Entry::Vacant(e) = up.entry((a, d)) {
                e.insert(self.uplinks(&shape, a, d)?);
                for &s in &spines {
                    if let std::collections::hash_map::Entry::Vacant(e) = down.entry((s, d)) {
                        e.insert(self.downlink(&shape, s, d, b)?);
                    }
                }
            }
            for leaf in [a, b] {
                if index[leaf as usize] == NONE {
                    index[leaf as usize] = leaves.len() as u32;
                    leaves.push(leaf);
                }
            }
            edges.push((index[a as usize], index[b as usize]));
        }
        let colours = equitable(&edges, leaves.len(), leaves.len(), spines.len());
        let routes = batch
            .iter()
            .zip(colours)
            .map(|(&f, c)| {
                let (a, d) = (self.src_leaf(f), self.dest(f));
                let first = up.get(&(a, d)).map_or(NONE, |v| v[c as usize]);
                let second = down.get(&(spines[c as usize], d)).copied().unwrap_or(NONE);
                let mut r = Route::default();
                r.dl[0] = first;
                r.dl[1] = second;
                r.len = 2;
                r.mask = 1;
                r
            })
            .collect::<Vec<_>>();
        routes.iter().all(|r| r.links().iter().all(|&dl| dl != NONE)).then_some(routes)
    }
}
