//! [`Server`]: the async pool's connection to one server: multiplexed (every
//! task pipelines on it), opened when first needed and again after it
//! failed, and the instance (see `instance::Instance`) it is open to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ::redis::aio::MultiplexedConnection;
use ::redis::{AsyncConnectionConfig, Client, RedisResult};

use crate::redis::instance::{Instance, learn_instance_async};

/// One server's connection, shared by the pool's clones.
pub(super) struct Server {
    client: Client,
    config: AsyncConnectionConfig,
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
    pub(super) connection: MultiplexedConnection,
    pub(super) instance: Option<Arc<Instance>>,
    id: u64,
}

impl Server {
    pub(super) fn new(client: Client, config: AsyncConnectionConfig, learn_instance: bool) -> Self {
        Server {
            client,
            config,
            learn_instance,
            open: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
            opened: AtomicU64::new(0),
        }
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    fn current(&self) -> MutexGuard<'_, Option<Open>> {
        // Every change is one assignment: a panic never leaves it half-made.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection open now, opened (and its instance learned) if there
    /// is none.
    pub(super) async fn open(&self) -> RedisResult<Open> {
        if let Some(open) = self.usable() {
            return Ok(open);
        }
        let _opening = self.opening.lock().await;
        if let Some(open) = self.usable() {
            return Ok(open);
        }
        let mut connection = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        // Learned on this connection, which stays with that process: a
        // restart closes it.
        let instance = match self.learn_instance {
            true => Some(learn_instance_async(&mut connection).await?),
            false => None,
        };
        let open = Open {
            connection,
            instance,
            id: self.opened.fetch_add(1, Ordering::Relaxed),
        };
        *self.current() = Some(open.clone());
        Ok(open)
    }

    /// The connection open now, unless a read found it moved to another
    /// server under it (then forgotten: the caller opens another).
    fn usable(&self) -> Option<Open> {
        let mut current = self.current();
        if (current.as_ref()?.instance.as_ref()).is_some_and(|instance| instance.is_moved()) {
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
