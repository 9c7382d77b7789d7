//! Register access with a BMv2 fallback: P4Runtime first, and when the
//! server answers UNIMPLEMENTED (BMv2's PI does) the Thrift runtime.

use super::{Session, SessionError};
use crate::codec;
use crate::p4info::{P4Info, P4InfoError};
use crate::proto::p4::v1 as p4;
use crate::thrift::{ThriftClient, ThriftConfig};
use std::net::{IpAddr, SocketAddr};

impl Session {
    /// Enables the Thrift fallback for registers.
    pub fn with_thrift(mut self, cfg: ThriftConfig) -> Self {
        self.thrift = Some(cfg);
        self
    }

    pub(super) fn unimplemented(e: &SessionError) -> bool {
        match e {
            SessionError::Rpc { status, .. } => status.code() == tonic::Code::Unimplemented,
            SessionError::Write { failure, .. } => failure.only(tonic::Code::Unimplemented),
            _ => false,
        }
    }

    /// The Thrift endpoint: the one given, else BMv2's default port 9090
    /// on the P4Runtime server's host when that is an IP address.
    fn thrift_config(&self) -> Option<ThriftConfig> {
        self.thrift.clone().or_else(|| default_thrift(&self.config().addr))
    }

    pub(super) async fn thrift(&self) -> Result<Option<ThriftClient>, SessionError> {
        let Some(cfg) = self.thrift_config() else { return Ok(None) };
        let device_id = self.device_id();
        ThriftClient::connect(cfg)
            .await
            .map(Some)
            .map_err(|source| SessionError::Thrift { device_id, source })
    }

    /// Reads a register cell (or every cell with `index` `None`) as
    /// `(index, value)` pairs.
    pub async fn read_register(
        &self,
        info: &P4Info,
        register: &str,
        index: Option<i64>,
    ) -> Result<Vec<(i64, u128)>, SessionError> {
        let (_, w, name) = super::register_batch::resolve(info, register)?;
        let entry = info.register_entry(register, index, None)?;
        match self.read(vec![entry.into()]).await {
            Ok(entities) => Ok(entities
                .into_iter()
                .filter_map(|e| match e.entity? {
                    p4::entity::Entity::RegisterEntry(r) => {
                        let v = match r.data?.data? {
                            p4::p4_data::Data::Bitstring(b) => codec::decode_u128(&b, w).ok()?,
                            _ => return None,
                        };
                        Some((r.index?.index, v))
                    }
                    _ => None,
                })
                .collect()),
            Err(e) if Self::unimplemented(&e) => {
                let Some(mut t) = self.thrift().await? else { return Err(e) };
                tracing::debug!(device_id = self.device_id(), register = %name, "register read over Thrift");
                let device_id = self.device_id();
                let thrift = |source| SessionError::Thrift { device_id, source };
                match index {
                    Some(i) => {
                        let v = t
                            .register_read(&name, i32::try_from(i).unwrap_or(i32::MAX))
                            .await
                            .map_err(thrift)?;
                        Ok(vec![(i, v as u64 as u128)])
                    }
                    None => {
                        let all = t.register_read_all(&name).await.map_err(thrift)?;
                        Ok(all.into_iter().enumerate().map(|(i, v)| (i as i64, v as u64 as u128)).collect())
                    }
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Writes a register cell (or every cell with `index` `None`).
    pub async fn write_register(
        &self,
        info: &P4Info,
        register: &str,
        index: Option<i64>,
        value: u128,
    ) -> Result<(), SessionError> {
        let entry = info.register_entry(register, index, Some(value.into()))?;
        match self.write(vec![crate::entity::modify(entry)]).await {
            Err(e) if Self::unimplemented(&e) => {
                let Some(mut t) = self.thrift().await? else { return Err(e) };
                let name = crate::p4info::name_of(info.register(register)?);
                let device_id = self.device_id();
                let thrift = |source| SessionError::Thrift { device_id, source };
                // BMv2 registers hold at most 64 bits; Thrift carries them as i64.
                let v = u64::try_from(value).map_err(|_| P4InfoError::Usage {
                    object: name.clone(),
                    message: format!("value {value} does not fit BMv2's 64-bit register API"),
                })? as i64;
                let indexes: Vec<i64> = match index {
                    Some(i) => vec![i],
                    None => (0..i64::from(info.register(register)?.size)).collect(),
                };
                for i in indexes {
                    t.register_write(&name, i32::try_from(i).unwrap_or(i32::MAX), v).await.map_err(thrift)?;
                }
                Ok(())
            }
            other => other,
        }
    }
}

/// BMv2's Thrift default, port 9090, on the host of `http://host:port`.
pub(crate) fn default_thrift(addr: &str) -> Option<ThriftConfig> {
    let hostport = addr.split("://").last()?.split('/').next()?;
    let host = match hostport.rsplit_once(':') {
        Some((h, _)) => h,
        None => hostport,
    };
    let ip: IpAddr = host.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    Some(ThriftConfig::new(SocketAddr::new(ip, 9090)))
}

#[cfg(test)]
mod tests {
    use super::default_thrift;

    #[test]
    fn thrift_defaults_to_port_9090_on_the_grpc_host() {
        assert_eq!(default_thrift("http://10.1.0.1:9559").unwrap().addr, "10.1.0.1:9090".parse().unwrap());
        assert_eq!(default_thrift("http://[::1]:9559").unwrap().addr, "[::1]:9090".parse().unwrap());
        assert!(default_thrift("http://switch1:9559").is_none());
    }
}
