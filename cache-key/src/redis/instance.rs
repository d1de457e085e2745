//! The instance a connection to one server learned when it opened (its
//! run id, then its replication id), the name it gave itself there, and
//! the checks a read on it makes that both still hold: how a plain read of
//! counters (`InstanceCheck::PerConnection`) knows what it trusts.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use ::redis::{Cmd, RedisError, RedisResult, Value, cmd};

use super::resp::Fixed;
use crate::cache::BackendError;
use crate::generation::GenerationError;

/// The oldest Redis whose scripts are neither persisted nor replicated.
pub(crate) const FIRST_VERSION: u32 = 7;

/// `WAIT 0 0`, sent after a read of counters on one server: a primary
/// answers at once (it waits for no replica), a replica refuses it. A
/// primary demoted by hand (`REPLICAOF`) keeps its connections and its run
/// id while a full resync replaces its dataset with one that may predate a
/// bump it acknowledged: such a read is refused, never trusted. `WAIT`
/// refuses on a replica whether or not it takes writes, and writes nothing.
pub(crate) fn check_primary() -> &'static Fixed {
    static WAIT: LazyLock<Fixed> = LazyLock::new(|| Fixed::new(cmd("WAIT").arg(0).arg(0).take()));
    &WAIT
}

/// `CLIENT GETNAME`, sent after a plain read of counters: the name the
/// connection gave itself, unless a proxy moved it ([`Instance`]).
pub(crate) fn check_reached() -> &'static Fixed {
    static GETNAME: LazyLock<Fixed> =
        LazyLock::new(|| Fixed::new(cmd("CLIENT").arg("GETNAME").take()));
    &GETNAME
}

/// The instance a connection learned when it opened, named by its id: the
/// server's run id (a restart changes it), then its replication id
/// (`master_replid`: a promotion makes a new one, and a primary demoted
/// to a replica takes its new primary's), so that counters a full resync
/// brought from another primary are never its own, even on the same
/// process. And the name the connection gave itself there
/// (`CLIENT SETNAME`), which a read on a plain connection asks back
/// (`CLIENT GETNAME`): a TCP proxy or load balancer that moves the
/// connection to another server under its client opens a new server
/// connection, which has no such name.
#[derive(Debug)]
pub(crate) struct Instance {
    id: Box<str>,
    name: Box<str>,
    /// A read found the connection moved, or its server a primary again
    /// after it was a replica: its driver replaces it.
    moved: AtomicBool,
    /// A read found the server a replica (its `WAIT` refused).
    demoted: AtomicBool,
}

impl Instance {
    fn new(id: String) -> Self {
        Instance {
            name: format!("cache-key:{id}").into(),
            id: id.into(),
            moved: AtomicBool::new(false),
            demoted: AtomicBool::new(false),
        }
    }

    /// The instance id: the run id, then the replication id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Whether a read found the connection no longer reaching this instance.
    pub(crate) fn is_moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }

    /// Judges `CLIENT GETNAME`'s reply: an error, and the connection marked
    /// moved, unless it is the name given when the connection learned this
    /// instance.
    pub(crate) fn still_reached(&self, reply: RedisResult<Value>) -> Result<(), GenerationError> {
        let named = match reply.map_err(refused)? {
            Value::BulkString(name) => name == self.name.as_bytes(),
            Value::SimpleString(name) => *name == *self.name,
            _ => false,
        };
        if named {
            return Ok(());
        }
        self.moved.store(true, Ordering::Relaxed);
        Err(self.replaced("moved to another server under it"))
    }

    /// Judges [`check_primary`]'s reply: an error while the server is a
    /// replica, and once it is a primary again (its dataset may come from
    /// another primary now, and its replication id changed), the connection
    /// marked moved, so that the next one learns the instance it is now.
    pub(crate) fn still_primary(&self, reply: RedisResult<Value>) -> Result<(), GenerationError> {
        if let Err(error) = reply {
            self.demoted.store(true, Ordering::Relaxed);
            return Err(refused(error));
        }
        if self.demoted.load(Ordering::Relaxed) {
            self.moved.store(true, Ordering::Relaxed);
            return Err(self.replaced("a replica since, and a primary again"));
        }
        Ok(())
    }

    /// `CLIENT SETNAME`, sent when the connection learns this instance.
    fn set_name(&self) -> Cmd {
        cmd("CLIENT").arg("SETNAME").arg(&*self.name).take()
    }

    fn replaced(&self, why: &str) -> GenerationError {
        GenerationError::store(BackendError::protocol(format!(
            "the connection no longer reaches the instance {} it learned when it opened ({why}): \
             its counters are not trusted, and it is replaced",
            self.id
        )))
    }
}

/// The instance `connection` is open to, learned once per connection from
/// `INFO server replication`, and the connection named after it; an error
/// for a server older than Redis 7 (see [`OldServer`]).
pub(crate) fn learn_instance(
    connection: &mut impl ::redis::ConnectionLike,
) -> RedisResult<Arc<Instance>> {
    let info: String = info().query(connection)?;
    let instance = Instance::new(instance_in(&info)?);
    let () = instance.set_name().query(connection)?;
    Ok(Arc::new(instance))
}

/// [`learn_instance`] on an async connection.
#[cfg(feature = "redis-async")]
pub(crate) async fn learn_instance_async(
    connection: &mut impl ::redis::aio::ConnectionLike,
) -> RedisResult<Arc<Instance>> {
    let info: String = info().query_async(connection).await?;
    let instance = Instance::new(instance_in(&info)?);
    let () = instance.set_name().query_async(connection).await?;
    Ok(Arc::new(instance))
}

/// `INFO server replication`: the run id and version, the replication id.
fn info() -> Cmd {
    cmd("INFO").arg("server").arg("replication").take()
}

/// The instance id in an `INFO server replication` text (the run id, then
/// the replication id), if the server is Redis 7 or newer.
fn instance_in(info: &str) -> RedisResult<String> {
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .filter(|value| !value.is_empty())
    };
    let unreadable = || {
        RedisError::from((
            ::redis::ErrorKind::Parse,
            "INFO server replication names no run id, replication id and version",
        ))
    };
    let run_id = field("run_id:").ok_or_else(unreadable)?;
    let replid = field("master_replid:").ok_or_else(unreadable)?;
    let major = field("redis_version:")
        .and_then(|version| version.split('.').next())
        .and_then(|major| major.parse::<u32>().ok())
        .ok_or_else(unreadable)?;
    if major < FIRST_VERSION {
        return Err(RedisError::from((
            ::redis::ErrorKind::Client,
            "Redis is older than 7",
            OldServer { version: major }.to_string(),
        )));
    }
    Ok(format!("{run_id}{replid}"))
}

/// A server too old to tie counters to its instance.
#[derive(Debug)]
pub(crate) struct OldServer {
    pub(crate) version: u32,
}

impl fmt::Display for OldServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Redis {} is older than {FIRST_VERSION}: its scripts are saved and replicated, \
             so generation counters could not tell a restarted or promoted server from the \
             one that wrote them",
            self.version
        )
    }
}

/// A server's error reply.
fn refused(error: RedisError) -> GenerationError {
    GenerationError::store(BackendError::refused(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_without_its_name_is_moved_and_trusts_nothing() {
        let name = |name: &str| Ok(Value::BulkString(name.as_bytes().to_vec()));
        let instance = Instance::new("aa".into());
        assert!(instance.still_reached(name("cache-key:aa")).is_ok());
        assert!(!instance.is_moved());
        // A connection a proxy opened to another server has no name.
        assert!(instance.still_reached(Ok(Value::Nil)).is_err());
        assert!(instance.is_moved());
        let other = Instance::new("aa".into());
        assert!(other.still_reached(name("cache-key:bb")).is_err());
    }

    #[test]
    fn a_connection_whose_server_was_a_replica_trusts_nothing_and_is_replaced_once_primary() {
        let instance = Instance::new("aa".into());
        assert!(instance.still_primary(Ok(Value::Int(0))).is_ok());
        let refused = || RedisError::from((::redis::ErrorKind::Client, "WAIT cannot be used"));
        assert!(instance.still_primary(Err(refused())).is_err());
        assert!(!instance.is_moved(), "kept while a replica");
        assert!(instance.still_primary(Ok(Value::Int(0))).is_err());
        assert!(instance.is_moved(), "a primary again: learned again");
    }
}
