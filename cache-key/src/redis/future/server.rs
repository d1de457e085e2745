//! [`Server`]: the async pool's connections to one server, each carrying
//! one call at a time, opened when a call finds none idle (up to the
//! pool's `max_size`) and kept, and the instance (see
//! `instance::Instance`) each is open to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ::redis::{ConnectionInfo, RedisResult};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::redis::future::resp::AsyncRespConnection;
use crate::redis::instance::{Instance, learn_instance_async};

/// One server's connections, shared by the pool's clones.
pub(super) struct Server {
    info: ConnectionInfo,
    /// How long opening a connection may take.
    connect: Duration,
    /// Whether a connection learns its server's instance id when it opens
    /// ([`InstanceCheck::PerConnection`](crate::redis::InstanceCheck)).
    learn_instance: bool,
    max_size: u32,
    /// One permit per connection a call may hold: a call holds one from
    /// before it takes a connection until it gives it back.
    permits: Semaphore,
    /// The connections no call holds, the latest given back last.
    idle: Mutex<Vec<Open>>,
    /// How many connections were ever opened: each one's number.
    opened: AtomicU64,
    /// Connections numbered below this are dropped when next taken: one
    /// was found closed by the server, so the others likely were too.
    forgotten: AtomicU64,
}

/// An open connection, the process it is open to, and its number.
pub(super) struct Open {
    connection: AsyncRespConnection,
    instance: Option<Arc<Instance>>,
    number: u64,
}

/// Why no connection was taken.
pub(super) enum Untaken {
    /// Every one the pool may hold was busy until the deadline.
    Busy(u32),
    /// Opening one failed.
    Failed(::redis::RedisError),
}

impl Server {
    pub(super) fn new(
        info: ConnectionInfo,
        connect: Duration,
        learn_instance: bool,
        max_size: u32,
    ) -> Self {
        Server {
            info,
            connect,
            learn_instance,
            max_size,
            permits: Semaphore::new(max_size as usize),
            idle: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
            forgotten: AtomicU64::new(0),
        }
    }

    pub(super) fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Open>> {
        // Every change is one push or pop: a panic never leaves it half-made.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection for one call, by `deadline`: an idle one, or one opened
    /// now (its instance learned). Dropped before [`Taken::give_back`], it
    /// closes (a call cut short leaves replies unread); either way its
    /// permit returns.
    pub(super) async fn take(&self, deadline: Instant) -> Result<Taken<'_>, Untaken> {
        let permit = match self.permits.try_acquire() {
            Ok(permit) => permit,
            Err(_) => {
                match tokio::time::timeout_at(deadline.into(), self.permits.acquire()).await {
                    Ok(Ok(permit)) => permit,
                    // The semaphore is never closed.
                    Ok(Err(_)) | Err(_) => return Err(Untaken::Busy(self.max_size)),
                }
            }
        };
        let idle = self.reusable();
        let open = match idle {
            Some(open) => open,
            None => self.open().await.map_err(Untaken::Failed)?,
        };
        Ok(Taken {
            server: self,
            open: Some(open),
            _permit: permit,
        })
    }

    /// The latest idle connection still worth using; older ones found
    /// forgotten or moved to another server are dropped.
    fn reusable(&self) -> Option<Open> {
        let forgotten = self.forgotten.load(Ordering::Relaxed);
        let mut idle = self.idle();
        while let Some(open) = idle.pop() {
            let moved = (open.instance.as_ref()).is_some_and(|instance| instance.is_moved());
            if open.number >= forgotten && !moved {
                return Some(open);
            }
        }
        None
    }

    async fn open(&self) -> RedisResult<Open> {
        let opening = async {
            let mut connection = AsyncRespConnection::open(&self.info).await?;
            // Learned on this connection, which stays with that process: a
            // restart closes it.
            let instance = match self.learn_instance {
                true => Some(learn_instance_async(&mut connection).await?),
                false => None,
            };
            Ok(Open {
                connection,
                instance,
                number: self.opened.fetch_add(1, Ordering::Relaxed),
            })
        };
        match tokio::time::timeout(self.connect, opening).await {
            Ok(open) => open,
            Err(_) => Err(::redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection did not open within the connect timeout",
            ))),
        }
    }

    /// Drops, as they are next taken, every connection opened until now.
    pub(super) fn forget_open_connections(&self) {
        let opened = self.opened.load(Ordering::Relaxed);
        self.forgotten.fetch_max(opened, Ordering::Relaxed);
    }
}

/// A connection a call holds, and its permit.
pub(super) struct Taken<'s> {
    server: &'s Server,
    /// `None` once given back.
    open: Option<Open>,
    _permit: SemaphorePermit<'s>,
}

impl Taken<'_> {
    pub(super) fn connection(&mut self) -> &mut AsyncRespConnection {
        &mut self
            .open
            .as_mut()
            .expect("held until given back")
            .connection
    }

    /// The instance the connection learned when it opened.
    pub(super) fn instance(&self) -> Option<Arc<Instance>> {
        self.open.as_ref().and_then(|open| open.instance.clone())
    }

    /// The call read every reply it sent for: the connection is idle again.
    pub(super) fn give_back(mut self) {
        if let Some(open) = self.open.take() {
            self.server.idle().push(open);
        }
    }
}
