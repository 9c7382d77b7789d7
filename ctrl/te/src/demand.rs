//! What each flow can actually send: its offered rate, capped by the
//! sender's and the receiver's NIC shared max-min fairly (progressive
//! filling) among the flows that use them.
//!
//! So the eight flows of an 8→1 incast get an eighth of the receiver's NIC
//! each: together they weigh one link, however much each offers.

use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};

use crate::bits::Bits;

/// Each NIC direction as a resource (`2h` sending, `2h + 1` receiving):
/// its capacity, how many flows use it, and those flows as a CSR
/// (`of[start[r]..start[r + 1]]`).
#[cfg(test)]
type Resources = (Vec<u64>, Vec<u32>, Vec<u32>, Vec<u32>);

#[cfg(test)]
fn resources(flows: &[(u32, u32, u64)], nic: &[u64]) -> Resources {
    let mut b = Bufs::default();
    fill_resources(flows, nic, &mut b);
    (b.left, b.count, b.start, b.of.iter().map(|e| e.0).collect())
}

/// The buffers of [`max_min`], kept by the caller between calls so that
/// a planner deciding again reuses their memory (with 100,000 flows some
/// 5 MB, which fresh would be zeroed by the kernel page by page).
#[derive(Debug, Default)]
pub(crate) struct Bufs {
    left: Vec<u64>,
    count: Vec<u32>,
    start: Vec<u32>,
    fill: Vec<u32>,
    /// Per resource's flow: the flow and its other resource.
    of: Vec<(u32, u32)>,
    /// Per flow, one bit: its rate is set.
    frozen: Bits,
    packed: Vec<u64>,
    /// The radix sort's second buffer, and its counts.
    spare: Vec<u64>,
    counts: Vec<[u32; WIDTH]>,
    pairs: Vec<(u64, u32)>,
    order: Vec<u32>,
    heap: Vec<Reverse<u128>>,
}

/// Fills `b`'s resources for `flows` over `nic`: each NIC direction
/// (`2h` sending, `2h + 1` receiving) with its capacity (`left`), how
/// many flows use it (`count`), and those flows as a CSR
/// (`of[start[r]..start[r + 1]]`), each with its other resource.
fn fill_resources(flows: &[(u32, u32, u64)], nic: &[u64], b: &mut Bufs) {
    let nr = 2 * nic.len();
    b.left.clear();
    b.left.extend((0..nr).map(|r| nic[r / 2]));
    b.count.clear();
    b.count.resize(nr, 0);
    for &(s, d, _) in flows {
        b.count[2 * s as usize] += 1;
        b.count[2 * d as usize + 1] += 1;
    }
    b.start.clear();
    b.start.resize(nr + 1, 0);
    for r in 0..nr {
        b.start[r + 1] = b.start[r] + b.count[r];
    }
    b.fill.clear();
    b.fill.extend_from_slice(&b.start);
    // Every entry is written below (a buffer kept from the last call
    // need not be cleared).
    b.of.resize(2 * flows.len(), (0, 0));
    for (i, &(s, d, _)) in flows.iter().enumerate() {
        let (rs, rd) = (2 * s, 2 * d + 1);
        for (r, other) in [(rs, rd), (rd, rs)] {
            b.of[b.fill[r as usize] as usize] = (i as u32, other);
            b.fill[r as usize] += 1;
        }
    }
}

/// Max-min fair rates of flows over host NICs.
///
/// `flows[i] = (src host, dst host, offered bps)`; `nic[h]` is host `h`'s
/// rate, used once for sending (resource `2h`) and once for receiving
/// (`2h + 1`). Returns each flow's rate, in bits per second. Integer
/// arithmetic (shares round down), so the result is exact and the same on
/// every machine.
#[cfg(test)]
pub(crate) fn max_min(flows: &[(u32, u32, u64)], nic: &[u64]) -> Vec<u64> {
    let mut rate = Vec::new();
    max_min_into(flows, nic, &mut Bufs::default(), &mut rate);
    rate
}

/// [`max_min`] into `rate` (cleared first), with the buffers `b`.
pub(crate) fn max_min_into(flows: &[(u32, u32, u64)], nic: &[u64], b: &mut Bufs, rate: &mut Vec<u64>) {
    fill_resources(flows, nic, b);
    by_offer(flows, b);
    let Bufs { left, count, start, of, order, heap: keep, frozen, .. } = b;
    let nr = left.len();
    // Every flow is frozen, so written, before the loop ends.
    rate.resize(flows.len(), u64::MAX);
    // Which flows are frozen, a bit each: the loops below ask it of
    // flows at random, and 100,000 bits stay in L1 where the rates
    // would not.
    frozen.reset(flows.len());
    // Resources by fair share, lazily: a freeze only ever raises the
    // shares of the resources it uses (it takes at most the smallest
    // share), so a key in the heap is never above its resource's share.
    // The top is brought up to date when it is looked at, and once it
    // is, it is the smallest share (ties: lowest resource), as if every
    // key were kept exact. A freeze then writes no heap at all.
    let mut keys = std::mem::take(keep);
    keys.clear();
    keys.extend(
        (0..nr).filter(|&r| count[r] > 0).map(|r| Reverse(key(left[r] / u64::from(count[r]), r as u32))),
    );
    let mut heap = BinaryHeap::from(keys);
    let mut next = 0;
    loop {
        while next < order.len() && frozen.get(order[next] as usize) {
            next += 1;
        }
        if next == order.len() {
            break;
        }
        let f = order[next] as usize;
        let tightest = loop {
            let Some(mut top) = heap.peek_mut() else { break None };
            let Reverse(packed) = *top;
            let (key, r) = ((packed >> 32) as u64, packed as u32);
            let c = count[r as usize];
            if c == 0 {
                PeekMut::pop(top);
                continue;
            }
            let share = left[r as usize] / u64::from(c);
            if share == key {
                break Some((share, r as usize));
            }
            *top = Reverse(self::key(share, r));
        };
        // Sets flow `i`'s rate to `x`, taken from its resources `a` and `b`.
        let mut freeze = |i: usize, x: u64, (a, b): (usize, usize), frozen: &mut Bits| {
            rate[i] = x;
            frozen.set(i);
            for r in [a, b] {
                left[r] = left[r].saturating_sub(x);
                count[r] -= 1;
            }
        };
        match tightest {
            // The tightest resource's share is below this flow's offer:
            // every unfrozen flow of it gets the share.
            Some((share, r)) if flows[f].2 > share => {
                for &(i, other) in &of[start[r] as usize..start[r + 1] as usize] {
                    if !frozen.get(i as usize) {
                        freeze(i as usize, share, (r, other as usize), frozen);
                    }
                }
            }
            _ => {
                let (s, d, x) = flows[f];
                freeze(f, x, (2 * s as usize, 2 * d as usize + 1), frozen);
            }
        }
    }
    *keep = heap.into_vec();
}

/// A resource's heap key, (share, resource) in one integer: it orders as
/// the pair does (the resource below 2^32), in one comparison where the
/// pair took two and a branch, at every level of every sift.
#[inline]
fn key(share: u64, r: u32) -> u128 {
    u128::from(share) << 32 | u128::from(r)
}

/// Flow indices by offer, then index, into `b.order`: sorted with the
/// keys beside the indices (a sort through the index reads `flows` at
/// random), packed into one u64 where the offers leave room for the index
/// (half the bytes to move), else as pairs. Packed, they are in index
/// order already, so a stable sort by the offer alone gives (offer,
/// index): a radix sort ([`radix_by_high`]), some 4 passes over the
/// keys where a comparison sort makes some 17 (100,000 flows).
fn by_offer(flows: &[(u32, u32, u64)], b: &mut Bufs) {
    let bits = u64::BITS - (flows.len() as u64).leading_zeros();
    let top = flows.iter().map(|f| f.2).max().unwrap_or(0);
    b.order.clear();
    if bits < u64::BITS && top.leading_zeros() >= bits {
        b.packed.clear();
        b.packed.extend(flows.iter().enumerate().map(|(i, f)| f.2 << bits | i as u64));
        radix_by_high(&mut b.packed, bits, (&mut b.spare, &mut b.counts));
        let mask = (1u64 << bits) - 1;
        b.order.extend(b.packed.iter().map(|&k| (k & mask) as u32));
        return;
    }
    b.pairs.clear();
    b.pairs.extend(flows.iter().enumerate().map(|(i, f)| (f.2, i as u32)));
    b.pairs.sort_unstable();
    b.order.extend(b.pairs.iter().map(|k| k.1));
}

/// Digits of the radix sort: 2,048 counts of 4 bytes each stay in L1.
const DIGIT: u32 = 11;
const WIDTH: usize = 1 << DIGIT;

/// Sorts `keys` stably by their bits from `low` up (least significant
/// digit first), with `spare` and `counts` as buffers: keys equal there
/// keep their order. A digit every key shares is skipped (it would move
/// nothing).
fn radix_by_high(keys: &mut Vec<u64>, low: u32, (spare, counts): (&mut Vec<u64>, &mut Vec<[u32; WIDTH]>)) {
    let top = keys.iter().fold(0, |a, &k| a | k) >> low;
    let passes = (u64::BITS - top.leading_zeros()).div_ceil(DIGIT);
    let digit = |k: u64, shift: u32| (k >> shift) as usize & (WIDTH - 1);
    counts.clear();
    counts.resize(passes as usize, [0; WIDTH]);
    for (p, c) in (0..passes).zip(counts.iter_mut()) {
        let shift = low + DIGIT * p;
        for &k in keys.iter() {
            c[digit(k, shift)] += 1;
        }
    }
    // Each pass writes every key (a buffer kept from the last call need
    // not be cleared).
    spare.resize(keys.len(), 0);
    let n = keys.len();
    let (mut from, mut to) = (&mut keys[..], &mut spare[..]);
    let mut swapped = false;
    for (p, c) in (0..passes).zip(counts.iter_mut()) {
        if c.iter().any(|&x| x as usize == n) {
            continue;
        }
        // Counts into starts.
        let mut sum = 0;
        for x in c.iter_mut() {
            (*x, sum) = (sum, sum + *x);
        }
        let shift = low + DIGIT * p;
        for &k in from.iter() {
            let at = &mut c[digit(k, shift)];
            to[*at as usize] = k;
            *at += 1;
        }
        (from, to) = (to, from);
        swapped = !swapped;
    }
    if swapped {
        std::mem::swap(keys, spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    #[test]
    fn incast_shares_the_receiver() {
        let nic = vec![100 * G; 9];
        let flows: Vec<_> = (1..9).map(|s| (s, 0, u64::MAX)).collect();
        let r = max_min(&flows, &nic);
        assert_eq!(r, vec![100 * G / 8; 8]);
    }

    #[test]
    fn small_flows_keep_their_rate_and_the_rest_share_what_is_left() {
        let nic = vec![100 * G; 4];
        // Host 0 sends to 1 (10G offered), 2 and 3 (unbounded).
        let flows = vec![(0, 1, 10 * G), (0, 2, u64::MAX), (0, 3, u64::MAX)];
        assert_eq!(max_min(&flows, &nic), vec![10 * G, 45 * G, 45 * G]);
    }

    #[test]
    fn a_flow_limited_elsewhere_leaves_its_share_to_others() {
        // 0→2 and 1→2 share receiver 2; 1 also sends to 3, 4 and 5.
        let nic = vec![100 * G; 6];
        let flows =
            vec![(0, 2, u64::MAX), (1, 2, u64::MAX), (1, 3, u64::MAX), (1, 4, u64::MAX), (1, 5, u64::MAX)];
        let r = max_min(&flows, &nic);
        assert_eq!(r[1..], [25 * G; 4]);
        assert_eq!(r[0], 75 * G, "receiver 2 gives 0→2 what 1→2 cannot use");
        assert!(r.iter().sum::<u64>() <= 200 * G);
    }

    #[test]
    fn by_offer_packed_or_not_is_offer_then_index() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        // Buffers kept from call to call: what a larger call left in
        // them must not matter.
        let mut b = Bufs::default();
        let cases =
            [(0usize, 0), (1, 0), (1000, 0), (1000, 1), (70_000, 0), (5, 2), (3000, 2), (20_000, 3), (9, 3)];
        for (n, kind) in cases {
            let flows: Vec<(u32, u32, u64)> = (0..n)
                .map(|_| {
                    let x = next();
                    let offer = match kind {
                        1 if x.is_multiple_of(7) => u64::MAX - x % 3,
                        // Offers over many digits, and all equal.
                        2 => x >> (20 + x % 40),
                        3 => 7 * G,
                        _ => x % 50 * G,
                    };
                    (0, 1, offer)
                })
                .collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (flows[i as usize].2, i));
            by_offer(&flows, &mut b);
            assert_eq!(b.order, want, "n {n} kind {kind}");
        }
    }

    #[test]
    fn empty_input() {
        assert!(max_min(&[], &[G]).is_empty());
    }

    /// The progressive filling as it was written first, with every share
    /// in the heap kept exact: the lazy heap must give the same rates.
    fn eager(flows: &[(u32, u32, u64)], nic: &[u64]) -> Vec<u64> {
        let (mut left, mut count, start, of) = resources(flows, nic);
        let nr = left.len();
        // By offer, then index: sorted with the keys beside the indices (a
        // sort through the index reads `flows` at random).
        let mut keyed: Vec<(u64, u32)> = flows.iter().enumerate().map(|(i, f)| (f.2, i as u32)).collect();
        keyed.sort_unstable();
        let order: Vec<u32> = keyed.into_iter().map(|k| k.1).collect();
        let mut rate = vec![u64::MAX; flows.len()];
        let mut heap =
            Shares::new((0..nr).filter(|&r| count[r] > 0).map(|r| (left[r] / u64::from(count[r]), r as u32)));
        let mut next = 0;
        let mut freeze = |i: usize, x: u64, rate: &mut [u64], heap: &mut Shares| {
            rate[i] = x;
            let (s, d, _) = flows[i];
            for r in [2 * s as usize, 2 * d as usize + 1] {
                left[r] = left[r].saturating_sub(x);
                count[r] -= 1;
                match count[r] {
                    0 => heap.remove(r as u32),
                    c => heap.update(r as u32, left[r] / u64::from(c)),
                }
            }
        };
        loop {
            while next < order.len() && rate[order[next] as usize] != u64::MAX {
                next += 1;
            }
            if next == order.len() {
                break;
            }
            let f = order[next] as usize;
            match heap.min() {
                // The tightest resource's share is below this flow's offer:
                // every unfrozen flow of it gets the share.
                Some((share, r)) if flows[f].2 > share => {
                    let r = r as usize;
                    for k in start[r]..start[r + 1] {
                        let i = of[k as usize] as usize;
                        if rate[i] == u64::MAX {
                            freeze(i, share, &mut rate, &mut heap);
                        }
                    }
                }
                _ => freeze(f, flows[f].2, &mut rate, &mut heap),
            }
        }
        rate
    }

    /// A min-heap of resources by fair share, indexed so that a share can be
    /// changed in place (a few thousand entries: it stays in cache).
    struct Shares {
        heap: Vec<(u64, u32)>,
        /// Position of each resource in `heap`, or `u32::MAX`.
        pos: Vec<u32>,
    }

    impl Shares {
        fn new(items: impl Iterator<Item = (u64, u32)>) -> Self {
            let heap: Vec<(u64, u32)> = items.collect();
            let top = heap.iter().map(|x| x.1 as usize + 1).max().unwrap_or(0);
            let mut h = Shares { pos: vec![u32::MAX; top], heap };
            for (i, x) in h.heap.iter().enumerate() {
                h.pos[x.1 as usize] = i as u32;
            }
            for i in (0..h.heap.len() / 2).rev() {
                h.down(i);
            }
            h
        }

        fn min(&self) -> Option<(u64, u32)> {
            self.heap.first().copied()
        }

        fn update(&mut self, r: u32, share: u64) {
            let Some(&p) = self.pos.get(r as usize).filter(|&&p| p != u32::MAX) else { return };
            let p = p as usize;
            let old = self.heap[p].0;
            self.heap[p].0 = share;
            if share < old {
                self.up(p);
            } else {
                self.down(p);
            }
        }

        fn remove(&mut self, r: u32) {
            let Some(&p) = self.pos.get(r as usize).filter(|&&p| p != u32::MAX) else { return };
            let (p, last) = (p as usize, self.heap.len() - 1);
            self.swap(p, last);
            self.heap.pop();
            self.pos[r as usize] = u32::MAX;
            if p < self.heap.len() {
                self.down(p);
                self.up(p);
            }
        }

        fn swap(&mut self, a: usize, b: usize) {
            self.heap.swap(a, b);
            self.pos[self.heap[a].1 as usize] = a as u32;
            self.pos[self.heap[b].1 as usize] = b as u32;
        }

        fn up(&mut self, mut i: usize) {
            while i > 0 {
                let parent = (i - 1) / 2;
                if self.heap[parent] <= self.heap[i] {
                    break;
                }
                self.swap(i, parent);
                i = parent;
            }
        }

        fn down(&mut self, mut i: usize) {
            loop {
                let (l, r) = (2 * i + 1, 2 * i + 2);
                let mut m = i;
                if l < self.heap.len() && self.heap[l] < self.heap[m] {
                    m = l;
                }
                if r < self.heap.len() && self.heap[r] < self.heap[m] {
                    m = r;
                }
                if m == i {
                    break;
                }
                self.swap(i, m);
                i = m;
            }
        }
    }

    #[test]
    fn the_lazy_heap_gives_what_exact_shares_give() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        // Buffers kept from call to call, as the planner keeps them:
        // what a larger call left in them must not leak into the next.
        let (mut bufs, mut kept) = (Bufs::default(), Vec::new());
        for round in 0..300 {
            let hosts = 2 + (next() % 40) as usize;
            let nic: Vec<u64> =
                (0..hosts).map(|_| [100 * G, 400 * G, 7 + next() % 1000][(next() % 3) as usize]).collect();
            let n = (next() % 200) as usize;
            let flows: Vec<(u32, u32, u64)> = (0..n)
                .map(|_| {
                    let s = (next() % hosts as u64) as u32;
                    let d = (next() % hosts as u64) as u32;
                    let offer = match next() % 4 {
                        0 => u64::MAX,
                        1 => next() % 1000,
                        _ => (next() % 100 + 1) * G,
                    };
                    (s, d, offer)
                })
                .collect();
            let want = eager(&flows, &nic);
            assert_eq!(max_min(&flows, &nic), want, "round {round}");
            max_min_into(&flows, &nic, &mut bufs, &mut kept);
            assert_eq!(kept, want, "round {round}, buffers reused");
        }
    }
}
