//! [`Server`]: the async pool's connection to one server, multiplexed
//! (every task pipelines on it, [`MuxConnection`]), opened when first
//! needed and again after it failed, and the instance (see
//! `instance::Instance`) it is open to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ::redis::{ConnectionInfo, RedisError, RedisResult};
use tokio::runtime::Handle;

use crate::redis::future::mux::MuxConnection;
use crate::redis::future::resp::AsyncRespConnection;
use crate::redis::instance::{Instance, learn_instance_async};

/// One server's connection, shared by the pool's clones.
pub(super) struct Server {
    info: ConnectionInfo,
    /// How long opening a connection may take.
    connect: Duration,
    /// Where the connection's tasks run.
    runtime: Handle,
    /// Whether a connection learns its server's instance id when it opens
    /// ([`InstanceCheck::PerConnection`](crate::redis::InstanceCheck)).
    learn_instance: bool,
    open: Mutex<Option<Open>>,
    /// Held while a connection is being opened, so that one is.
    opening: tokio::sync::Mutex<()>,
    opened: AtomicU64,
}

/// The connection open now, the process it is open to, and which opening
/// it is (so that a failure forgets only the connection it met).
#[derive(Clone)]
pub(super) struct Open {
    pub(super) connection: MuxConnection,
    pub(super) instance: Option<Arc<Instance>>,
    id: u64,
}

impl Server {
    pub(super) fn new(
        info: ConnectionInfo,
        connect: Duration,
        runtime: Handle,
        learn_instance: bool,
    ) -> Self {
        Server {
            info,
            connect,
            runtime,
            learn_instance,
            open: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            opened: AtomicU64::new(0),
        }
    }

    pub(super) fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    fn current(&self) -> MutexGuard<'_, Option<Open>> {
        // Every change is one assignment: a panic never leaves it half-made.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection open now, opened (and its instance learned) if there
    /// is none. Cancel-safe: a call dropped while it opens one leaves none
    /// half-made (the next call opens another).
    pub(super) async fn open(&self) -> RedisResult<Open> {
        if let Some(open) = self.usable() {
            return Ok(open);
        }
        let _opening = self.opening.lock().await;
        if let Some(open) = self.usable() {
            return Ok(open);
        }
        let opened = tokio::time::timeout(self.connect, self.handshaken()).await;
        let (connection, instance) = opened.map_err(|_| {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection did not open within the connect timeout",
            ))
        })??;
        let open = Open {
            connection: MuxConnection::new(connection, &self.runtime),
            instance,
            id: self.opened.fetch_add(1, Ordering::Relaxed),
        };
        *self.current() = Some(open.clone());
        Ok(open)
    }

    /// A new connection, and the instance it learned (when it learns one):
    /// learned on this connection, which stays with that process (a restart
    /// closes it).
    async fn handshaken(&self) -> RedisResult<(AsyncRespConnection, Option<Arc<Instance>>)> {
        let mut connection = AsyncRespConnection::open(&self.info).await?;
        let instance = match self.learn_instance {
            true => Some(learn_instance_async(&mut connection).await?),
            false => None,
        };
        Ok((connection, instance))
    }

    /// The connection open now, unless it failed or a read found it moved
    /// to another server under it (then forgotten: the caller opens
    /// another).
    fn usable(&self) -> Option<Open> {
        let mut current = self.current();
        let open = current.as_ref()?;
        let moved = (open.instance.as_ref()).is_some_and(|instance| instance.is_moved());
        if moved || open.connection.is_failed() {
            *current = None;
        }
        current.clone()
    }

    /// `open` failed: the next call opens another connection, unless one
    /// was opened since.
    pub(super) fn forget(&self, open: &Open) {
        let mut current = self.current();
        if current.as_ref().is_some_and(|now| now.id == open.id) {
            *current = None;
        }
    }
}
