//! The election service behind a small trait: etcd in production, a fake
//! in the tests (so the decisions are tested without etcd, in virtual time).

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, LeaseKeepAliveStream, LeaseKeeper};

use super::HaError;

/// Deadline of every short etcd call (not of a campaign, which waits).
pub const RPC_TIMEOUT: Duration = Duration::from_secs(2);

/// A lease the service granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    /// The time to live the service chose (it may round ours up).
    pub ttl: Duration,
}

/// An election won: the proof of it that later writes can be fenced on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// The creation revision of our campaign key; it grows with every
    /// new leader.
    pub revision: i64,
    /// Our campaign key: it exists, with `revision`, exactly while we lead.
    pub key: Vec<u8>,
}

/// The election operations the HA task uses.
pub trait Elector: Clone + Send + Sync + 'static {
    /// Grants a lease of (at least) `ttl`.
    fn grant(&mut self, ttl: Duration) -> impl Future<Output = Result<Lease, HaError>> + Send;
    /// Renews a lease once: `Ok(false)` when it no longer exists.
    fn keep_alive(&mut self, lease: i64) -> impl Future<Output = Result<bool, HaError>> + Send;
    /// Campaigns with `lease` and waits until elected.
    fn campaign(
        self,
        lease: i64,
        value: String,
    ) -> impl Future<Output = Result<Leadership, HaError>> + Send + 'static;
    /// The current leader's value (its name), if there is one.
    fn leader(&mut self) -> impl Future<Output = Result<Option<String>, HaError>> + Send;
    /// Revokes a lease: its campaign key goes at once, so a standby need
    /// not wait for the lease to lapse.
    fn revoke(&mut self, lease: i64) -> impl Future<Output = Result<(), HaError>> + Send;
}

/// etcd's election API over the `etcd-client` crate.
pub struct EtcdElector {
    client: Client,
    key: String,
    /// The keep-alive stream of the lease being renewed.
    keeper: Option<(i64, LeaseKeeper, LeaseKeepAliveStream)>,
}

impl std::fmt::Debug for EtcdElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdElector").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Clone for EtcdElector {
    /// A clone shares the connection; it opens its own keep-alive stream.
    fn clone(&self) -> Self {
        EtcdElector { client: self.client.clone(), key: self.key.clone(), keeper: None }
    }
}

async fn within<T>(
    op: &'static str,
    fut: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, HaError> {
    match tokio::time::timeout(RPC_TIMEOUT, fut).await {
        Err(_) => Err(HaError::Timeout { op, after: RPC_TIMEOUT }),
        Ok(Err(source)) => Err(HaError::Etcd { op, source }),
        Ok(Ok(v)) => Ok(v),
    }
}

impl EtcdElector {
    /// The connection, for the job store beside the election.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Connects and checks that etcd answers.
    pub async fn connect(endpoints: &[String], key: &str) -> Result<Self, HaError> {
        let joined = endpoints.join(",");
        // No request timeout on the connection: a campaign waits as long
        // as it takes. Short calls have their own deadline ([`within`]).
        let opts = ConnectOptions::new()
            .with_connect_timeout(RPC_TIMEOUT)
            .with_keep_alive(Duration::from_millis(500), Duration::from_secs(1));
        let connect = Client::connect(endpoints, Some(opts));
        let mut client = match tokio::time::timeout(RPC_TIMEOUT, connect).await {
            Err(_) => return Err(HaError::Silent { endpoints: joined, after: RPC_TIMEOUT }),
            Ok(Err(source)) => return Err(HaError::Unreachable { endpoints: joined, source }),
            Ok(Ok(c)) => c,
        };
        match tokio::time::timeout(RPC_TIMEOUT, client.status()).await {
            Err(_) => Err(HaError::Silent { endpoints: joined, after: RPC_TIMEOUT }),
            Ok(Err(source)) => Err(HaError::Unreachable { endpoints: joined, source }),
            Ok(Ok(_)) => Ok(EtcdElector { client, key: key.to_string(), keeper: None }),
        }
    }
}

impl Elector for EtcdElector {
    async fn grant(&mut self, ttl: Duration) -> Result<Lease, HaError> {
        let secs = i64::try_from(ttl.as_millis().div_ceil(1000)).unwrap_or(i64::MAX).max(1);
        let r = within("lease grant", self.client.lease_grant(secs, None)).await?;
        if !r.error().is_empty() {
            return Err(HaError::Answer { op: "lease grant", what: r.error().to_string() });
        }
        let granted = Duration::from_secs(r.ttl().max(0).unsigned_abs());
        Ok(Lease { id: r.id(), ttl: granted })
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, HaError> {
        if self.keeper.as_ref().is_none_or(|k| k.0 != lease) {
            let (keeper, stream) = within("lease keep-alive", self.client.lease_keep_alive(lease)).await?;
            self.keeper = Some((lease, keeper, stream));
        }
        let Some((_, keeper, stream)) = self.keeper.as_mut() else { return Ok(false) };
        let renewed = async {
            keeper.keep_alive().await?;
            stream.message().await
        };
        match within("lease keep-alive", renewed).await {
            Ok(Some(r)) => Ok(r.ttl() > 0),
            Ok(None) => {
                self.keeper = None;
                Err(HaError::Answer { op: "lease keep-alive", what: "the stream ended".into() })
            }
            Err(e) => {
                self.keeper = None;
                Err(e)
            }
        }
    }

    fn campaign(
        self,
        lease: i64,
        value: String,
    ) -> impl Future<Output = Result<Leadership, HaError>> + Send + 'static {
        let (mut client, key) = (self.client, self.key);
        async move {
            let mut r = client
                .campaign(key, value, lease)
                .await
                .map_err(|source| HaError::Etcd { op: "campaign", source })?;
            let leader = r.take_leader().ok_or_else(|| HaError::Answer {
                op: "campaign",
                what: "no leader key in the answer".into(),
            })?;
            Ok(Leadership { revision: leader.rev(), key: leader.key().to_vec() })
        }
    }

    async fn leader(&mut self) -> Result<Option<String>, HaError> {
        match within("leader", self.client.leader(self.key.clone())).await {
            Ok(r) => Ok(r.kv().map(|kv| String::from_utf8_lossy(kv.value()).into_owned())),
            // etcd answers "election: no leader" as an error.
            Err(HaError::Etcd { source: etcd_client::Error::GRpcStatus(s), .. })
                if s.message().contains("no leader") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), HaError> {
        self.keeper = None;
        within("lease revoke", self.client.lease_revoke(lease)).await.map(|_| ())
    }
}
