//! The served switches: one in-process P4Runtime server per switch of the
//! topology, listening on the port its YAML `p4rt` address names, so that
//! the controller binary connects to the simulated fabric exactly as it
//! connects to BMv2 or to hardware.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use metaroce_p4rt::server::{PipelineCheck, Switch, SwitchOptions};
use metaroce_p4rt::P4Info;
use metaroce_topo::Topology;
use tokio::sync::watch;

use super::ServeError;

/// One switch of the fabric, served.
#[derive(Debug, Clone)]
pub struct ServedSwitch {
    pub name: String,
    pub device_id: u64,
    /// Where its P4Runtime server listens.
    pub addr: SocketAddr,
    pub switch: Switch,
}

/// What a served switch accepts: exactly the program it serves (which
/// [`check_program`] has passed), as BMv2 runs only the JSON it loaded.
/// Another build is refused at push time, saying which file to push.
pub fn serves(info: &P4Info) -> PipelineCheck {
    let served = info.raw().clone();
    PipelineCheck(Arc::new(move |pushed: &P4Info| {
        if *pushed.raw() == served {
            return Ok(());
        }
        check_program(pushed)?;
        Err(ProgramError::OtherBuild.into())
    }))
}

/// Why the twin cannot run a program.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// It does not meet our pipeline contract (a name, a width).
    #[error(transparent)]
    Contract(#[from] metaroce_pipeline::PipelineError),
    /// The twin does not find a table, register, counter or digest it uses.
    #[error(transparent)]
    Twin(#[from] crate::twin::TwinError),
    /// A served switch runs only the program it serves.
    #[error(
        "it is another build of the program than the one served: push the P4Info given to \
         `sim serve --p4info` (the controller's --p4info must be the same file)"
    )]
    OtherBuild,
}

/// Whether the twin can run `info`: our pipeline contract, and every
/// table, register, counter and digest the twin itself resolves.
pub fn check_program(info: &P4Info) -> Result<(), ProgramError> {
    let p = metaroce_pipeline::Pipeline::new(info.clone(), Vec::new())?;
    crate::twin::Twin::new(&p, Switch::new(SwitchOptions::default()))?;
    Ok(())
}

/// The port of a `host:port` address.
fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok())
}

/// Binds every switch of `topo` on `ip` at the port of its `p4rt`
/// address. Servers stop when `shutdown` turns true.
pub async fn bind_all(
    topo: &Topology,
    ip: IpAddr,
    check: &PipelineCheck,
    shutdown: &watch::Receiver<bool>,
) -> Result<Vec<ServedSwitch>, ServeError> {
    let mut seen: std::collections::HashMap<u16, &str> = std::collections::HashMap::new();
    for sw in &topo.switches {
        let port = port_of(&sw.p4rt)
            .ok_or_else(|| ServeError::Address { switch: sw.name.clone(), addr: sw.p4rt.clone() })?;
        if let Some(first) = seen.insert(port, &sw.name) {
            return Err(ServeError::SharedPort { first: first.to_owned(), second: sw.name.clone(), port });
        }
    }
    let mut out = Vec::with_capacity(topo.switches.len());
    for sw in &topo.switches {
        let port = port_of(&sw.p4rt)
            .ok_or_else(|| ServeError::Address { switch: sw.name.clone(), addr: sw.p4rt.clone() })?;
        let opts = SwitchOptions {
            device_id: sw.device_id,
            registers_via_p4runtime: true,
            accepts: Some(check.clone()),
            ..SwitchOptions::default()
        };
        let switch = Switch::new(opts);
        let mut stop = shutdown.clone();
        let (addr, _task) = switch
            .bind(SocketAddr::new(ip, port), async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await
            .map_err(|source| ServeError::Bind {
                switch: sw.name.clone(),
                addr: SocketAddr::new(ip, port),
                source,
            })?;
        tracing::info!(switch = %sw.name, device_id = sw.device_id, %addr, "serving P4Runtime");
        out.push(ServedSwitch { name: sw.name.clone(), device_id: sw.device_id, addr, switch });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_the_yaml_address() {
        assert_eq!(port_of("127.0.0.1:50001"), Some(50001));
        assert_eq!(port_of("leaf1.lab:9559"), Some(9559));
        assert_eq!(port_of("leaf1.lab"), None);
        assert_eq!(port_of("h:99999"), None);
    }
}
