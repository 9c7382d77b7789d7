//! What each flow can actually send: its offered rate, capped by the
//! sender's and the receiver's NIC shared max-min fairly (progressive
//! filling) among the flows that use them.
//!
//! So the eight flows of an 8→1 incast get an eighth of the receiver's NIC
//! each: together they weigh one link, however much each offers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Max-min fair rates of flows over host NICs.
///
/// `flows[i] = (src host, dst host, offered bps)`; `nic[h]` is host `h`'s
/// rate, used once for sending (resource `2h`) and once for receiving
/// (`2h + 1`). Returns each flow's rate, in bits per second. Integer
/// arithmetic (shares round down), so the result is exact and the same on
/// every machine.
pub(crate) fn max_min(flows: &[(u32, u32, u64)], nic: &[u64]) -> Vec<u64> {
    let nr = 2 * nic.len();
    let mut left: Vec<u64> = (0..nr).map(|r| nic[r / 2]).collect();
    let mut count = vec![0u32; nr];
    for &(s, d, _) in flows {
        count[2 * s as usize] += 1;
        count[2 * d as usize + 1] += 1;
    }
    // Flows of each resource, as a CSR.
    let mut start = vec![0u32; nr + 1];
    for r in 0..nr {
        start[r + 1] = start[r] + count[r];
    }
    let mut fill = start.clone();
    let mut of = vec![0u32; 2 * flows.len()];
    for (i, &(s, d, _)) in flows.iter().enumerate() {
        for r in [2 * s as usize, 2 * d as usize + 1] {
            of[fill[r] as usize] = i as u32;
            fill[r] += 1;
        }
    }
    let mut order: Vec<u32> = (0..flows.len() as u32).collect();
    order.sort_unstable_by_key(|&i| (flows[i as usize].2, i));
    let mut rate = vec![u64::MAX; flows.len()];
    let share = |left: &[u64], count: &[u32], r: usize| left[r] / u64::from(count[r].max(1));
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> =
        (0..nr).filter(|&r| count[r] > 0).map(|r| Reverse((share(&left, &count, r), r as u32))).collect();
    let mut next = 0;
    let freeze = |i: usize,
                  x: u64,
                  rate: &mut [u64],
                  left: &mut [u64],
                  count: &mut [u32],
                  heap: &mut BinaryHeap<_>| {
        rate[i] = x;
        let (s, d, _) = flows[i];
        for r in [2 * s as usize, 2 * d as usize + 1] {
            left[r] = left[r].saturating_sub(x);
            count[r] -= 1;
            if count[r] > 0 {
                heap.push(Reverse((share(left, count, r), r as u32)));
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
        // The tightest resource, skipping entries that are out of date.
        let tight = loop {
            match heap.peek() {
                Some(&Reverse((s, r))) if count[r as usize] > 0 && share(&left, &count, r as usize) == s => {
                    break Some((s, r as usize))
                }
                Some(_) => {
                    heap.pop();
                }
                None => break None,
            }
        };
        let f = order[next] as usize;
        match tight {
            Some((s, r)) if flows[f].2 > s => {
                heap.pop();
                for k in start[r]..start[r + 1] {
                    let i = of[k as usize] as usize;
                    if rate[i] == u64::MAX {
                        freeze(i, s, &mut rate, &mut left, &mut count, &mut heap);
                    }
                }
            }
            _ => freeze(f, flows[f].2, &mut rate, &mut left, &mut count, &mut heap),
        }
    }
    rate
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
    fn empty_input() {
        assert!(max_min(&[], &[G]).is_empty());
    }
}
