//! Which target a P4Info was compiled for, and that target's units: what
//! a number in a table entry, a register or a digest means. The controller
//! converts the topology's units (time in ns, queue depths in packets or
//! bytes) with these, so a threshold in the YAML means the same queue on
//! BMv2 and on Tofino (`p4src/README.md`, Units).

use metaroce_p4rt::P4Info;

/// The architecture the program was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// v1model on BMv2 (`simple_switch_grpc`).
    Bmv2,
    /// TNA on Tofino (bf-p4c), driven through the SDE's P4Runtime server.
    Tofino,
}

/// Bytes a Tofino queue cell holds.
pub const TOFINO_CELL_BYTES: u64 = 80;
/// Bytes of the packet a BMv2 queue slot stands for when a depth is given
/// in bytes, and of the packet a depth in packets stands for on Tofino.
pub const MTU_PACKET_BYTES: u64 = 1500;

/// How the target counts queue depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueUnit {
    /// One unit per packet, whatever its size (BMv2).
    Packets,
    /// Fixed-size buffer cells (Tofino: 80 bytes); a packet takes
    /// ceil(size / cell) of them.
    Cells { bytes: u64 },
}

/// The target's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Units {
    /// Nanoseconds per timestamp unit: 1000 on BMv2 (µs), 1 on Tofino (ns).
    pub time_unit_ns: u64,
    pub queue: QueueUnit,
    /// Widest value the program's time registers and comparisons hold:
    /// BMv2 keeps 48 bits, Tofino's stateful ALUs 32 (4.29 s in ns).
    pub time_bits: u32,
}

/// A P4Info for an architecture the controller does not drive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the P4Info is for architecture {0:?}; this controller runs v1model (BMv2) or tna (Tofino)")]
pub struct UnknownArch(pub String);

impl Target {
    /// The target of a P4Info, from its `pkg_info.arch`: `v1model` (or
    /// none, as in hand-made P4Infos) is BMv2; `tna` or `t2na` Tofino.
    pub fn of(info: &P4Info) -> Result<Target, UnknownArch> {
        let arch = info.raw().pkg_info.as_ref().map(|p| p.arch.to_ascii_lowercase()).unwrap_or_default();
        match arch.as_str() {
            "" | "v1model" => Ok(Target::Bmv2),
            "tna" | "t2na" => Ok(Target::Tofino),
            other => Err(UnknownArch(other.to_owned())),
        }
    }

    pub fn units(self) -> Units {
        match self {
            Target::Bmv2 => Units { time_unit_ns: 1000, queue: QueueUnit::Packets, time_bits: 48 },
            Target::Tofino => {
                Units { time_unit_ns: 1, queue: QueueUnit::Cells { bytes: TOFINO_CELL_BYTES }, time_bits: 32 }
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Target::Bmv2 => "bmv2",
            Target::Tofino => "tofino",
        }
    }
}

impl Units {
    /// A duration in target time units, rounded up and saturated to what
    /// the target's registers hold.
    pub fn time(&self, ns: u64) -> u64 {
        let units = ns.div_ceil(self.time_unit_ns.max(1));
        units.min(self.time_max())
    }

    /// Largest time value the target holds.
    pub fn time_max(&self) -> u64 {
        if self.time_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.time_bits) - 1
        }
    }

    /// A queue depth in packets, in target units (MTU-sized packets on
    /// Tofino: a depth in packets is that many full frames of buffer).
    pub fn queue_packets(&self, packets: u64) -> u64 {
        match self.queue {
            QueueUnit::Packets => packets,
            QueueUnit::Cells { bytes } => packets.saturating_mul(MTU_PACKET_BYTES.div_ceil(bytes.max(1))),
        }
    }

    /// A queue depth in bytes, in target units (rounded up; BMv2 counts
    /// one MTU-sized packet per unit).
    pub fn queue_bytes(&self, bytes: u64) -> u64 {
        match self.queue {
            QueueUnit::Packets => bytes.div_ceil(MTU_PACKET_BYTES),
            QueueUnit::Cells { bytes: cell } => bytes.div_ceil(cell.max(1)),
        }
    }

    /// Bytes one queue unit stands for (to show depths in bytes).
    pub fn bytes_per_queue_unit(&self) -> u64 {
        match self.queue {
            QueueUnit::Packets => MTU_PACKET_BYTES,
            QueueUnit::Cells { bytes } => bytes,
        }
    }
}
