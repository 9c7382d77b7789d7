//! NIC flow-control counters from the kernel over netlink, in safe code.
//!
//! Two requests, both built and parsed byte by byte here on top of
//! `netlink-sys`'s safe socket:
//! - ethtool netlink `ETHTOOL_MSG_PAUSE_GET` with `ETHTOOL_FLAG_STATS`: the
//!   IEEE 802.3x pause frame counters (`tx_pause_frames`, `rx_pause_frames`);
//! - DCB netlink `DCB_CMD_IEEE_GET`: `struct ieee_pfc`, whose `requests[8]`
//!   and `indications[8]` are the PFC frames sent and received per priority.
//!
//! What this does not read: the driver-private strings of `ethtool -S`
//! (for example mlx5's `rx_prio3_pause`). The kernel offers those only
//! through the `SIOCETHTOOL` ioctl (`ETHTOOL_GSTRINGS`/`ETHTOOL_GSTATS`),
//! which takes raw pointers; no safe wrapper exists and the workspace
//! forbids `unsafe`, so per-priority PFC comes from DCB netlink instead, and
//! the rest of the netdev counters from `/sys/class/net/<dev>/statistics`.

use std::collections::BTreeMap;

use netlink_sys::{protocols, Socket};

use crate::error::NetlinkError;

const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLA_F_NESTED: u16 = 0x8000;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

const ETHTOOL_MSG_PAUSE_GET: u8 = 21;
const ETHTOOL_A_PAUSE_HEADER: u16 = 1;
const ETHTOOL_A_PAUSE_STATS: u16 = 5;
const ETHTOOL_A_PAUSE_STAT_TX_FRAMES: u16 = 2;
const ETHTOOL_A_PAUSE_STAT_RX_FRAMES: u16 = 3;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_STATS: u32 = 1 << 2;

const RTM_GETDCB: u16 = 78;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_PFC: u16 = 2;
/// `struct ieee_pfc`: u8 cap, u8 en, u8 mbc, pad, u16 delay, pad to 8,
/// then `u64 requests[8]` at 8 and `u64 indications[8]` at 72.
const IEEE_PFC_LEN: usize = 136;

/// Reads of a reply before giving up (2 ms apart: half a second).
const RECV_TRIES: usize = 250;

const EOPNOTSUPP: i32 = 95;
const ENODEV: i32 = 19;

/// Counters named as the exporter shows them, e.g. `tx_pause_frames` or
/// `tx_pfc_prio3`.
pub type Stats = BTreeMap<String, u64>;

/// Where the exporter gets ethtool/DCB counters. The kernel in production;
/// tests give their own.
pub trait NicStats: Send + Sync + std::fmt::Debug {
    /// Pause frame counters of `netdev`; `Ok(None)` when the driver has none.
    fn pause(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError>;
    /// PFC frames per priority of `netdev`; `Ok(None)` when the driver has no DCB.
    fn pfc(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError>;
}

/// Reads nothing: for a `--sysfs-root` other than the live `/sys`, where
/// the live kernel's counters would belong to other devices.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNicStats;

impl NicStats for NoNicStats {
    fn pause(&self, _: &str) -> Result<Option<Stats>, NetlinkError> {
        Ok(None)
    }
    fn pfc(&self, _: &str) -> Result<Option<Stats>, NetlinkError> {
        Ok(None)
    }
}

/// The running kernel, asked over netlink on every call (a socket per
/// request keeps it simple; a poll is a few requests per second).
#[derive(Debug, Default, Clone, Copy)]
pub struct KernelNicStats;

impl NicStats for KernelNicStats {
    fn pause(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError> {
        let family = match genl_family("ethtool") {
            Ok(id) => id,
            // ENOENT: a kernel before 5.6 has no ethtool netlink family.
            Err(NetlinkError::Kernel { errno: 2, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let header = nested(
            ETHTOOL_A_PAUSE_HEADER,
            &[
                attr_str(ETHTOOL_A_HEADER_DEV_NAME, netdev),
                attr(ETHTOOL_A_HEADER_FLAGS, &ETHTOOL_FLAG_STATS.to_ne_bytes()),
            ]
            .concat(),
        );
        let payload = [genl_header(ETHTOOL_MSG_PAUSE_GET, 1).as_slice(), &header].concat();
        let reply = match request(protocols::NETLINK_GENERIC, family, &payload, "ethtool pause") {
            Ok(r) => r,
            Err(NetlinkError::Kernel { errno, .. }) if errno == EOPNOTSUPP || errno == ENODEV => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        parse_pause_reply(reply.get(4..).unwrap_or_default())
    }

    fn pfc(&self, netdev: &str) -> Result<Option<Stats>, NetlinkError> {
        let payload = [[0u8, DCB_CMD_IEEE_GET, 0, 0].as_slice(), &attr_str(DCB_ATTR_IFNAME, netdev)].concat();
        match request(protocols::NETLINK_ROUTE, RTM_GETDCB, &payload, "DCB IEEE") {
            Ok(reply) => parse_dcb_reply(reply.get(4..).unwrap_or_default()),
            Err(NetlinkError::Kernel { errno, .. }) if errno == EOPNOTSUPP || errno == ENODEV => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The pause counters in an `ETHTOOL_MSG_PAUSE_GET` reply's attributes.
pub fn parse_pause_reply(attrs: &[u8]) -> Result<Option<Stats>, NetlinkError> {
    let mut out = Stats::new();
    for (kind, value) in Attrs(attrs) {
        if kind != ETHTOOL_A_PAUSE_STATS {
            continue;
        }
        for (stat, v) in Attrs(value) {
            let name = match stat {
                ETHTOOL_A_PAUSE_STAT_TX_FRAMES => "tx_pause_frames",
                ETHTOOL_A_PAUSE_STAT_RX_FRAMES => "rx_pause_frames",
                _ => continue,
            };
            out.insert(name.to_string(), u64_of(v).ok_or(NetlinkError::Malformed { what: "pause stat" })?);
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The per-priority PFC counters in a `DCB_CMD_IEEE_GET` reply (after the
/// 4-byte `dcbmsg`).
pub fn parse_dcb_reply(attrs: &[u8]) -> Result<Option<Stats>, NetlinkError> {
    for (kind, value) in Attrs(attrs) {
        if kind != DCB_ATTR_IEEE {
            continue;
        }
        for (ieee, v) in Attrs(value) {
            if ieee == DCB_ATTR_IEEE_PFC {
                return parse_ieee_pfc(v).map(Some);
            }
        }
    }
    Ok(None)
}

/// Decodes `struct ieee_pfc` (see [`IEEE_PFC_LEN`]).
pub fn parse_ieee_pfc(raw: &[u8]) -> Result<Stats, NetlinkError> {
    if raw.len() < IEEE_PFC_LEN {
        return Err(NetlinkError::Malformed { what: "struct ieee_pfc" });
    }
    let mut out = Stats::new();
    for prio in 0..8 {
        let at = |base: usize| u64_of(raw.get(base + prio * 8..base + prio * 8 + 8).unwrap_or_default());
        out.insert(format!("tx_pfc_prio{prio}"), at(8).unwrap_or_default());
        out.insert(format!("rx_pfc_prio{prio}"), at(72).unwrap_or_default());
    }
    Ok(out)
}

/// Resolves a generic netlink family id by name.
fn genl_family(name: &str) -> Result<u16, NetlinkError> {
    let payload =
        [genl_header(CTRL_CMD_GETFAMILY, 1).as_slice(), &attr_str(CTRL_ATTR_FAMILY_NAME, name)].concat();
    let reply = request(protocols::NETLINK_GENERIC, GENL_ID_CTRL, &payload, "genl family")?;
    Attrs(reply.get(4..).unwrap_or_default())
        .find(|(k, _)| *k == CTRL_ATTR_FAMILY_ID)
        .and_then(|(_, v)| Some(u16::from_ne_bytes(v.get(..2)?.try_into().ok()?)))
        .ok_or(NetlinkError::Malformed { what: "genl family reply" })
}

/// Sends one request and returns the payload of its reply (after the
/// 16-byte `nlmsghdr`); a kernel error becomes [`NetlinkError::Kernel`].
fn request(
    protocol: isize,
    msg_type: u16,
    payload: &[u8],
    what: &'static str,
) -> Result<Vec<u8>, NetlinkError> {
    let mut socket = Socket::new(protocol).map_err(|source| NetlinkError::Socket { what, source })?;
    socket.bind_auto().map_err(|source| NetlinkError::Socket { what, source })?;
    let seq = 1u32;
    let len = u32::try_from(16 + payload.len()).map_err(|_| NetlinkError::Malformed { what })?;
    let mut msg = Vec::with_capacity(16 + payload.len());
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&msg_type.to_ne_bytes());
    msg.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    msg.extend_from_slice(&seq.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(payload);
    socket.send(&msg, 0).map_err(|source| NetlinkError::Socket { what, source })?;
    // A `doit` reply is queued before `send` returns. Non-blocking reads
    // with a bounded wait keep a request the kernel drops from hanging a poll.
    socket.set_non_blocking(true).map_err(|source| NetlinkError::Socket { what, source })?;
    for _ in 0..RECV_TRIES {
        let buf = match socket.recv_from_full() {
            Ok((buf, _)) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            Err(source) => return Err(NetlinkError::Socket { what, source }),
        };
        let mut rest = buf.as_slice();
        while rest.len() >= 16 {
            let mlen = u32_of(&rest[..4]).unwrap_or_default() as usize;
            let kind = u16::from_ne_bytes([rest[4], rest[5]]);
            let mseq = u32_of(&rest[8..12]).unwrap_or_default();
            let body = rest.get(16..mlen.max(16)).ok_or(NetlinkError::Malformed { what })?;
            if mseq == seq {
                return match kind {
                    NLMSG_ERROR => {
                        let code = body.get(..4).and_then(|b| b.try_into().ok()).map(i32::from_ne_bytes);
                        Err(NetlinkError::Kernel { what, errno: code.unwrap_or(-1).saturating_neg() })
                    }
                    NLMSG_DONE => Err(NetlinkError::Malformed { what }),
                    _ => Ok(body.to_vec()),
                };
            }
            rest = rest.get(align(mlen.max(16))..).unwrap_or_default();
        }
    }
    Err(NetlinkError::Malformed { what })
}

fn genl_header(cmd: u8, version: u8) -> [u8; 4] {
    [cmd, version, 0, 0]
}

fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One attribute, padded to 4 bytes.
pub fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = u16::try_from(4 + value.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(align(4 + value.len()));
    out.extend_from_slice(&len.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(align(out.len()), 0);
    out
}

fn attr_str(kind: u16, s: &str) -> Vec<u8> {
    attr(kind, &[s.as_bytes(), &[0]].concat())
}

/// A nested attribute holding already-encoded attributes.
pub fn nested(kind: u16, inner: &[u8]) -> Vec<u8> {
    attr(kind | NLA_F_NESTED, inner)
}

fn u32_of(b: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

fn u64_of(b: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(..8)?.try_into().ok()?))
}

/// Iterates `(type, payload)` over a run of attributes; stops at the first
/// malformed one rather than reading past it.
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let len = usize::from(u16::from_ne_bytes([*self.0.first()?, *self.0.get(1)?]));
        let kind = u16::from_ne_bytes([*self.0.get(2)?, *self.0.get(3)?]) & NLA_TYPE_MASK;
        let value = self.0.get(4..len)?;
        self.0 = self.0.get(align(len)..).unwrap_or_default();
        Some((kind, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_reply_decodes_the_stats_nest() {
        let stats = [
            attr(1, &[0; 4]), // pad attribute, ignored
            attr(ETHTOOL_A_PAUSE_STAT_TX_FRAMES, &7u64.to_ne_bytes()),
            attr(ETHTOOL_A_PAUSE_STAT_RX_FRAMES, &9u64.to_ne_bytes()),
        ]
        .concat();
        let reply = [attr(3, &[1]), nested(ETHTOOL_A_PAUSE_STATS, &stats)].concat();
        let got = parse_pause_reply(&reply).ok().flatten().unwrap_or_default();
        assert_eq!(got.get("tx_pause_frames"), Some(&7));
        assert_eq!(got.get("rx_pause_frames"), Some(&9));
        assert_eq!(parse_pause_reply(&attr(3, &[1])).ok().flatten(), None, "no stats nest, no counters");
    }

    #[test]
    fn dcb_reply_decodes_ieee_pfc() {
        let mut pfc = vec![0u8; IEEE_PFC_LEN];
        pfc[8 + 3 * 8..8 + 4 * 8].copy_from_slice(&42u64.to_ne_bytes());
        pfc[72 + 3 * 8..72 + 4 * 8].copy_from_slice(&5u64.to_ne_bytes());
        let reply = [attr(DCB_ATTR_IFNAME, b"eth0\0"), nested(DCB_ATTR_IEEE, &attr(DCB_ATTR_IEEE_PFC, &pfc))]
            .concat();
        let got = parse_dcb_reply(&reply).ok().flatten().unwrap_or_default();
        assert_eq!(got.get("tx_pfc_prio3"), Some(&42));
        assert_eq!(got.get("rx_pfc_prio3"), Some(&5));
        assert_eq!(got.get("tx_pfc_prio0"), Some(&0));
        assert!(parse_ieee_pfc(&pfc[..100]).is_err(), "a short struct is an error, not zeros");
    }

    #[test]
    fn truncated_attributes_stop_the_walk() {
        let mut a = attr(5, &[1, 2, 3, 4]);
        a.truncate(6);
        assert_eq!(Attrs(&a).count(), 0);
    }
}
