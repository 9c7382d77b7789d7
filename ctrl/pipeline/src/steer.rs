//! Steer entries checked against the route they steer. The data plane
//! takes a steer entry's next hop as it is (BMv2 accepts any id; a switch
//! knows no routes), so the controller must refuse one that leaves the
//! route's group, or whose port is not its next hop's: `port_down` is
//! checked on the entry's port, and a wrong one would let a steered flow
//! out on a failed link. [`check_steer`] takes the group's members as the
//! caller knows them; [`check_steer_in`] follows them through a switch's
//! entries (desired or installed).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::entry::{Entry, Key, RouteTarget};

/// Why a steer entry is refused; every variant names the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SteerError {
    #[error("{entry}: not a steer entry")]
    NotSteer { entry: String },
    #[error(
        "{entry}: {dst} is not routed to a next-hop group on this switch, so there is no path to choose; \
         steer where the route has a group, or drop the entry"
    )]
    NoGroupRoute { entry: String, dst: Ipv4Addr },
    #[error(
        "{entry}: next hop {nhop_id} is not a member of the route's group (members {members:?}); \
         steer only to a member"
    )]
    NotAMember { entry: String, nhop_id: u16, members: Vec<u16> },
    #[error(
        "{entry}: port {port} is not next hop {nhop_id}'s port {nhop_port}; give the next hop's own port"
    )]
    PortMismatch { entry: String, nhop_id: u16, port: u16, nhop_port: u16 },
}

/// A steer entry in words, for messages.
pub fn describe(entry: &Entry) -> String {
    match entry {
        Entry::SteerFlow { flow, nhop_id, port } => {
            format!("steer_flow {flow} to next hop {nhop_id} (port {port})")
        }
        Entry::SteerPair { src, dst, nhop_id, port } => {
            format!("steer_pair {src} -> {dst} to next hop {nhop_id} (port {port})")
        }
        other => format!("{:?}", other.key()),
    }
}

/// The destination and `(next hop, port)` of a steer entry.
fn steer_target(entry: &Entry) -> Result<(Ipv4Addr, u16, u16), SteerError> {
    match *entry {
        Entry::SteerFlow { flow, nhop_id, port } => Ok((flow.dst, nhop_id, port)),
        Entry::SteerPair { dst, nhop_id, port, .. } => Ok((dst, nhop_id, port)),
        _ => Err(SteerError::NotSteer { entry: describe(entry) }),
    }
}

/// Checks `entry` against the `(next hop id, port)` members of the group
/// its destination is routed to.
pub fn check_steer(entry: &Entry, members: &[(u16, u16)]) -> Result<(), SteerError> {
    let (_, nhop_id, port) = steer_target(entry)?;
    match members.iter().find(|(n, _)| *n == nhop_id) {
        None => Err(SteerError::NotAMember {
            entry: describe(entry),
            nhop_id,
            members: members.iter().map(|(n, _)| *n).collect(),
        }),
        Some(&(_, nhop_port)) if nhop_port != port => {
            Err(SteerError::PortMismatch { entry: describe(entry), nhop_id, port, nhop_port })
        }
        Some(_) => Ok(()),
    }
}

/// Checks `entry` against the group that `state` (one switch's entries)
/// routes its destination to, by longest prefix.
pub fn check_steer_in(state: &BTreeMap<Key, Entry>, entry: &Entry) -> Result<(), SteerError> {
    let (dst, _, _) = steer_target(entry)?;
    let members =
        route_members(state, dst).ok_or(SteerError::NoGroupRoute { entry: describe(entry), dst })?;
    check_steer(entry, &members)
}

/// The `(next hop id, port)` members of the group that the longest route
/// to `dst` in `state` points at, in member order; `None` when that route
/// is missing, goes straight to a next hop, or a link of its chain
/// (`nhop_group` entry, selector group, member, next hop) is missing.
pub fn route_members(state: &BTreeMap<Key, Entry>, dst: Ipv4Addr) -> Option<Vec<(u16, u16)>> {
    let dst = u32::from(dst);
    let route = state
        .values()
        .filter_map(|e| match e {
            Entry::Route { prefix, len, target } if *len <= 32 => {
                let mask = if *len == 0 { 0 } else { u32::MAX << (32 - u32::from(*len)) };
                (u32::from(*prefix) & mask == dst & mask).then_some((*len, *target))
            }
            _ => None,
        })
        .max_by_key(|(len, _)| *len)?;
    let RouteTarget::Group(e) = route.1 else { return None };
    let Some(Entry::GroupEntry { group, .. }) = state.get(&Key::GroupEntry(e)) else { return None };
    let Some(Entry::Group { members, .. }) = state.get(&Key::Group(*group)) else { return None };
    members
        .iter()
        .map(|&(m, _)| {
            let Some(Entry::Member { nhop, .. }) = state.get(&Key::Member(m)) else { return None };
            let Some(Entry::Nhop { port, .. }) = state.get(&Key::Nhop(*nhop)) else { return None };
            Some((*nhop, *port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::FlowKey;

    fn state() -> BTreeMap<Key, Entry> {
        let nhop = |id, port| Entry::Nhop { id, port, src_mac: [0; 6], dst_mac: [0; 6] };
        let entries = [
            nhop(2, 1),
            nhop(3, 2),
            nhop(4, 3),
            Entry::Member { id: 2, nhop: 2 },
            Entry::Member { id: 3, nhop: 3 },
            Entry::Group { id: 10, members: vec![(2, 1), (3, 1)] },
            Entry::GroupEntry { id: 1, group: 10 },
            Entry::Route { prefix: Ipv4Addr::new(10, 0, 2, 0), len: 24, target: RouteTarget::Group(1) },
            Entry::Route { prefix: Ipv4Addr::new(10, 0, 2, 9), len: 32, target: RouteTarget::Nhop(4) },
        ];
        entries.into_iter().map(|e| (e.key(), e)).collect()
    }

    fn flow(dst: [u8; 4], nhop_id: u16, port: u16) -> Entry {
        let flow =
            FlowKey { src: Ipv4Addr::new(10, 0, 1, 1), dst: Ipv4Addr::from(dst), sport: 49152, qp: 0x11 };
        Entry::SteerFlow { flow, nhop_id, port }
    }

    #[test]
    fn a_member_of_the_routes_group_is_accepted() {
        assert_eq!(check_steer_in(&state(), &flow([10, 0, 2, 1], 3, 2)), Ok(()));
        let pair = Entry::SteerPair {
            src: Ipv4Addr::new(10, 0, 1, 1),
            dst: Ipv4Addr::new(10, 0, 2, 7),
            nhop_id: 2,
            port: 1,
        };
        assert_eq!(check_steer_in(&state(), &pair), Ok(()));
    }

    #[test]
    fn a_next_hop_outside_the_group_is_refused_with_the_entry_named() {
        let e = flow([10, 0, 2, 1], 4, 3);
        let err = check_steer_in(&state(), &e).unwrap_err();
        assert_eq!(err, SteerError::NotAMember { entry: describe(&e), nhop_id: 4, members: vec![2, 3] });
        let msg = err.to_string();
        assert!(msg.contains("10.0.1.1:49152 -> 10.0.2.1") && msg.contains("next hop 4"), "{msg}");
    }

    #[test]
    fn a_port_other_than_the_next_hops_is_refused() {
        let err = check_steer_in(&state(), &flow([10, 0, 2, 1], 3, 1)).unwrap_err();
        assert!(matches!(err, SteerError::PortMismatch { nhop_id: 3, port: 1, nhop_port: 2, .. }), "{err}");
    }

    #[test]
    fn a_destination_without_a_group_route_is_refused() {
        // The /32 goes straight to a next hop; 10.0.3.1 has no route.
        for dst in [[10, 0, 2, 9], [10, 0, 3, 1]] {
            let err = check_steer_in(&state(), &flow(dst, 3, 2)).unwrap_err();
            assert!(matches!(err, SteerError::NoGroupRoute { .. }), "{err}");
        }
        let err = check_steer(&Entry::PortDown { port: 1 }, &[]).unwrap_err();
        assert!(matches!(err, SteerError::NotSteer { .. }));
    }
}
