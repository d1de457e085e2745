//! [`LoadLock`]: a lease in Redis around origin calls, so that processes
//! sharing a Redis load a cold key once between them; and its commands.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::redis::{Cmd, cmd};

use super::batch::Batch;
use super::entry::{Entry, px};

/// An optional lock in Redis around origin calls, so that processes
/// sharing a Redis load a cold key once between them (off by default; see
/// [`RedisCache::with_lock`](super::RedisCache::with_lock)).
///
/// The process that misses first takes the lock with `SET <key>#lock
/// <token> NX PX <lease>`, sent together with a second read of the entry
/// (another owner may have stored it just before releasing), asks the
/// origin, then stores the answer and releases the lock in one round trip,
/// with a script that deletes the lock only if it still holds its own
/// token (a lock that outlived its lease and was taken by another process is
/// never released by the first). An origin that panics, or a future dropped
/// while it holds the lock, releases it too. The others poll the entry
/// every `poll`: an answer found there is served (counted as coalesced); a
/// lock freed without an answer (the origin failed) is taken by the next
/// poller. After `wait` without an answer a process **asks the origin
/// anyway** (counted as a load): the lock bounds how long a request waits,
/// it never turns a slow origin into an error.
///
/// An origin slower than `lease` lets another process load too; the lease
/// should exceed the origin's slowest expected answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLock {
    lease: Duration,
    wait: Duration,
    poll: Duration,
}

impl LoadLock {
    /// A lock held at most `lease` (then Redis drops it), waited on at most
    /// `wait`, polled every 10 ms.
    pub fn new(lease: Duration, wait: Duration) -> Self {
        LoadLock {
            lease,
            wait,
            poll: Duration::from_millis(10),
        }
    }

    /// How often a waiting process looks for the answer (at least 1 ms).
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// How long the lock is held at most.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How long a process waits for another's answer at most.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// How often a waiting process looks for the answer.
    pub fn poll(&self) -> Duration {
        self.poll
    }
}

/// Deletes the lock `KEYS[1]` only if it holds this owner's token `ARGV[1]`.
const RELEASE_SCRIPT: &str = "\
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// A lock this caller holds on one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lease {
    name: String,
    token: String,
}

impl Lease {
    /// A lease on `entry`'s lock, with a token no other owner has: this
    /// process, the time and a counter. Its name is the key and `#lock`:
    /// never a key, since every key part escapes `#`, and in the key's
    /// cluster slot when the key has a hash tag.
    pub(crate) fn on(entry: &Entry) -> Lease {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Lease {
            name: format!("{}#lock", entry.key()),
            token: format!("{}-{nanos}-{n}", std::process::id()),
        }
    }

    /// `SET <key>#lock token NX PX lease`; a nil reply means another owner
    /// holds the lock.
    pub(crate) fn take(&self, lease: Duration) -> Cmd {
        cmd("SET")
            .arg(&self.name)
            .arg(&self.token)
            .arg("NX")
            .arg("PX")
            .arg(px(lease))
            .take()
    }

    /// A batch of the release alone.
    pub(crate) fn release_batch(&self) -> Batch {
        let mut batch = Batch::default();
        batch.push(self.release());
        batch
    }

    /// The release script's call for this lease.
    pub(crate) fn release(&self) -> Cmd {
        cmd("EVAL")
            .arg(RELEASE_SCRIPT)
            .arg(1)
            .arg(&self.name)
            .arg(&self.token)
            .take()
    }
}
