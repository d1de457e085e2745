//! [`Pool`]: what the protocol needs of a driver's pool of connections, and
//! what both drivers' pools are made of: the cluster client with its
//! subscribers, and the `Pool` impl.

use std::sync::Arc;

use ::redis::cluster::ClusterClient;
use ::redis::{Client, IntoConnectionInfo, RedisResult};

use super::timeouts::Timeouts;

/// How a pool knows which Redis process answers it, which the counters'
/// reads rest on (a counter is trusted only when the process that answers
/// wrote it; see [the module](super#counters-that-never-go-back)).
///
/// On a Redis Cluster every read checks it inside the counters' script,
/// whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstanceCheck {
    /// Each connection to a server learns the server's instance id once,
    /// when it opens (its run id, then its replication id), and names
    /// itself after it (`CLIENT SETNAME`); a read then fetches the counters
    /// with a plain `MGET` beside the entry's `GET`, and trusts those
    /// stamped with that id once the same pipeline showed that the
    /// connection still reaches that process (`CLIENT GETNAME`: a TCP proxy
    /// or load balancer that moved it to another server under it opened a
    /// connection without that name) and that the process is still a
    /// primary (`WAIT 0 0`, which a replica refuses: a primary demoted by
    /// hand, `REPLICAOF` without `CLIENT KILL`, keeps its connections and
    /// its run id while a resync replaces its data). Otherwise the read is
    /// an error (its call goes to the origin, per the
    /// [`FailurePolicy`](super::FailurePolicy)), and a connection that was
    /// moved, or whose server was a replica and is a primary again, is
    /// replaced by one that learns the instance it reaches now. A restarted
    /// server closes its connections, and the next one learns the new id.
    /// Not caught: a primary demoted, resynced and promoted again between
    /// two reads of one connection. The default.
    #[default]
    PerConnection,
    /// Every read checks it, in the counters' script (`EVALSHA`), which
    /// only the process that loaded it has: for a connection that may reach
    /// another process without closing and without losing its name, behind
    /// a command proxy (twemproxy, Envoy). On a server the read is followed
    /// by `WAIT 0 0` too, as above. Costs the server a script call per read.
    PerRead,
}

/// The pools a [`RedisGenerations`](super::RedisGenerations) and a [`RedisCache`](super::RedisCache)
/// run on: [`RedisPool`](super::RedisPool) and `AsyncRedisPool`. Sealed.
pub trait Pool: sealed::Sealed + Clone {
    #[doc(hidden)]
    fn __is_cluster(&self) -> bool;
    /// Whether its connections to a server know their server's instance id.
    #[doc(hidden)]
    fn __knows_instances(&self) -> bool;
    /// Where a subscription (tracked counters) connects.
    #[doc(hidden)]
    fn __subscribers(&self) -> &[::redis::Client];
}

pub(super) mod sealed {
    pub trait Sealed {}
}

/// A cluster client for the nodes `urls` name, bounded by `timeouts`, and a
/// client per node for subscriptions (tracked counters).
pub(crate) fn cluster_client<T: IntoConnectionInfo>(
    urls: impl IntoIterator<Item = T>,
    timeouts: Timeouts,
) -> RedisResult<(ClusterClient, Arc<[Client]>)> {
    let infos = urls
        .into_iter()
        .map(IntoConnectionInfo::into_connection_info)
        .collect::<RedisResult<Vec<_>>>()?;
    let subscribers = infos
        .iter()
        .cloned()
        .map(Client::open)
        .collect::<RedisResult<Arc<[Client]>>>()?;
    // The crate retries a redirect, a reconnect, `TRYAGAIN` or `CLUSTERDOWN`
    // (16 times by default, waiting up to seconds): eight tries, waiting an
    // eighth of the call's bound at most, keep a call near its bound.
    let retry_wait = u64::try_from(timeouts.call().as_millis() / 8).unwrap_or(u64::MAX);
    let client = ClusterClient::builder(infos)
        .connection_timeout(timeouts.connect())
        .response_timeout(timeouts.call())
        .retries(8)
        .min_retry_wait(1)
        .max_retry_wait(retry_wait.max(1))
        .build()?;
    Ok((client, subscribers))
}

/// `Pool` for a driver's pool type, which has a `topology()`, a
/// `subscribers: Arc<[Client]>` and an `instance_check: InstanceCheck`
/// field.
macro_rules! impl_pool {
    ($pool:ty) => {
        impl $crate::redis::pool::sealed::Sealed for $pool {}

        impl $crate::redis::pool::Pool for $pool {
            fn __is_cluster(&self) -> bool {
                self.topology() == $crate::redis::counters::Topology::Cluster
            }

            fn __knows_instances(&self) -> bool {
                !self.__is_cluster()
                    && self.instance_check == $crate::redis::pool::InstanceCheck::PerConnection
            }

            fn __subscribers(&self) -> &[::redis::Client] {
                &self.subscribers
            }
        }
    };
}

pub(crate) use impl_pool;
