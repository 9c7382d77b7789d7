//! What every instance of a sharded fabric must agree on: the topology and
//! the program. Each instance's member key holds its digests of both; an
//! instance that joins compares its own with every live member's and is
//! refused, naming what differs and whose it differs from, before it
//! touches a switch. (Desired state from a planner with another topology
//! or program would name the wrong ports and tables.)

use etcd_client::{Client, GetOptions};
use metaroce_pipeline::Pipeline;
use metaroce_topo::Topology;
use serde::{Deserialize, Serialize};

use crate::ha::elector::RPC_TIMEOUT;
use crate::ha::HaError;

/// An instance's digests, as its member key holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    pub name: String,
    /// FNV-1a of the topology as the controller loaded it (JSON).
    pub topology: String,
    pub switches: usize,
    /// The pipeline cookie: P4Info and device config.
    pub program: String,
}

/// Why an instance was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused: this instance's {what} differs from instance {other:?}'s ({detail}); every instance of a sharded fabric runs the same topology file and program")]
pub struct Mismatch {
    pub what: &'static str,
    pub other: String,
    pub detail: String,
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

impl Contract {
    pub fn of(topo: &Topology, pipeline: &Pipeline, name: &str) -> Self {
        let json = serde_json::to_vec(topo).unwrap_or_default();
        let program = pipeline.program_cookie();
        Contract {
            name: name.to_string(),
            topology: format!("{:016x}", fnv(&json)),
            switches: topo.switches.len(),
            program: format!("{program:016x}"),
        }
    }

    /// The first difference from `other`, if any.
    pub fn differs(&self, other: &Contract) -> Option<Mismatch> {
        if self.topology != other.topology {
            return Some(Mismatch {
                what: "topology",
                other: other.name.clone(),
                detail: format!(
                    "digest {} with {} switches here, {} with {} switches there",
                    self.topology, self.switches, other.topology, other.switches
                ),
            });
        }
        if self.program != other.program {
            return Some(Mismatch {
                what: "program (P4Info or device config)",
                other: other.name.clone(),
                detail: format!("pipeline cookie {} here, {} there", self.program, other.program),
            });
        }
        None
    }
}

/// Compares `ours` with every live member's contract. A member key that
/// does not parse is skipped with a warning; one of our own name is a
/// previous run of ours whose lease has not lapsed yet.
pub async fn check(client: &mut Client, fabric: &str, ours: &Contract) -> Result<(), super::ShardError> {
    let prefix = super::members_prefix(fabric);
    let get = client.get(prefix.clone(), Some(GetOptions::new().with_prefix()));
    let r = match tokio::time::timeout(RPC_TIMEOUT, get).await {
        Err(_) => return Err(HaError::Timeout { op: "shard members", after: RPC_TIMEOUT }.into()),
        Ok(Err(source)) => return Err(HaError::Etcd { op: "shard members", source }.into()),
        Ok(Ok(r)) => r,
    };
    for kv in r.kvs() {
        let theirs: Contract = match serde_json::from_slice(kv.value()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(kv.key()), error = %e, "shard member key is not a contract; skipped");
                continue;
            }
        };
        if theirs.name == ours.name {
            continue;
        }
        if let Some(m) = ours.differs(&theirs) {
            return Err(m.into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(topology: &str, program: &str) -> Contract {
        Contract { name: "x".into(), topology: topology.into(), switches: 4, program: program.into() }
    }

    #[test]
    fn shard_a_different_topology_or_program_is_named() {
        assert_eq!(c("t1", "p1").differs(&c("t1", "p1")), None);
        let m = c("t1", "p1").differs(&c("t2", "p1")).unwrap();
        assert_eq!(m.what, "topology");
        assert!(m.to_string().contains("t1") && m.to_string().contains("t2"), "{m}");
        let m = c("t1", "p1").differs(&c("t1", "p2")).unwrap();
        assert!(m.to_string().contains("program"), "{m}");
    }

    #[test]
    fn shard_the_topology_digest_follows_the_file() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/mininet-2x2.yaml"
        ))
        .unwrap();
        let a = metaroce_topo::load_str(&text, "a").unwrap();
        let b = metaroce_topo::load_str(&text.replacen("50001", "50009", 1), "b").unwrap();
        let p = |t: &Topology| format!("{:016x}", fnv(&serde_json::to_vec(t).unwrap()));
        assert_eq!(p(&a), p(&a.clone()));
        assert_ne!(p(&a), p(&b));
    }
}
