//! [`Load`]: a `get_or_load`, as steps a driver carries out (send a batch,
//! call the origin, wait on another caller's flight, sleep) with no I/O of
//! its own.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::{Cmd, RedisError, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::batch::{Batch, Replies};
use super::entry::{Entry, Found};
use super::flight::{Landing, Leader, Role, Waited, Waiter};
use super::lock::Lease;
use super::read::{Exchange, KeyedRead, Read};
use super::state::CacheState;
use crate::cache::{CacheError, CachedQuery, Recorder};

/// What the driver does next for a [`Load`].
pub(crate) enum Step<'c, V, E> {
    /// Send the batch, then [`Load::receive`] the replies.
    Send(Batch),
    /// Call the origin, then [`Load::origin`] its answer; with a soft
    /// timeout, a driver that can give the call up calls
    /// [`Load::origin_timed_out`] past it.
    Origin {
        #[cfg_attr(not(feature = "redis-async"), allow(dead_code))]
        soft_timeout: Option<Duration>,
    },
    /// Wait, then [`Load::resume`].
    Pause(Pause<'c>),
    Done(Result<V, CacheError<E>>),
}

/// What a load waits for: another caller's flight, or a while (polling a
/// lock another process holds).
pub(crate) enum Pause<'c> {
    Flight(Waiter<'c>),
    For(Duration),
}

/// What a [`Pause`] ended with.
pub(crate) enum Resumed<'c> {
    Flight(Waited<'c>),
    Slept,
}

impl<'c> Pause<'c> {
    /// Waits, blocking the thread.
    pub(crate) fn block(self) -> Resumed<'c> {
        match self {
            Pause::Flight(waiter) => Resumed::Flight(waiter.wait()),
            Pause::For(pause) => {
                std::thread::sleep(pause);
                Resumed::Slept
            }
        }
    }

    /// Waits, as a future (on tokio's timer).
    #[cfg(feature = "redis-async")]
    pub(crate) async fn wait(self) -> Resumed<'c> {
        match self {
            Pause::Flight(waiter) => Resumed::Flight(waiter.landed().await),
            Pause::For(pause) => {
                tokio::time::sleep(pause).await;
                Resumed::Slept
            }
        }
    }
}

/// How a driver releases a lease that a load abandoned (its origin
/// panicked, its future was dropped) without doing I/O of its own.
pub(crate) trait ReleaseLease {
    fn release(&self, lease: Lease);
}

/// A load in progress on `pool`; dropped while holding its lock, it has the
/// pool release it.
pub(crate) struct Running<'c, 'q, Q: CachedQuery + ?Sized, E, P: ReleaseLease> {
    pub(crate) load: Load<'c, 'q, Q, E>,
    pub(crate) pool: &'c P,
}

impl<'c, 'q, Q, E, P> Running<'c, 'q, Q, E, P>
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
    E: Send + Sync + 'static,
    P: ReleaseLease,
{
    pub(crate) fn new(state: &'c CacheState, query: &'q Q, pool: &'c P, purpose: Purpose) -> Self {
        Running {
            load: Load::new(state, query, purpose),
            pool,
        }
    }
}

impl<Q: CachedQuery + ?Sized, E, P: ReleaseLease> Drop for Running<'_, '_, Q, E, P> {
    fn drop(&mut self) {
        if let Some(lease) = self.load.lease.take() {
            self.pool.release(lease);
        }
    }
}

/// What a [`Load`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// `get_or_load`.
    Load,
    /// `get_or_refresh`: a load that notes whether its hit was in its eager
    /// refresh window ([`Load::refresh_due`]).
    Refreshable,
    /// An eager refresh: a value still in its window is loaded again, and
    /// the read counts no hit or miss.
    Refresh,
}

// A load moves through its phases once: boxing the first one would cost an
// allocation on every call to save a few moves.
#[allow(clippy::large_enum_variant)]
enum Phase<'q, 'l, Q: CachedQuery + ?Sized> {
    Read(KeyedRead<'q, 'l, Q>),
    /// A miss: join the key's flight.
    Join(Entry),
    Waiting(Entry),
    /// Leading a flight taken over: read the entry again first.
    Reread(Entry),
    /// Take the load lock and read the entry again, in one batch.
    Lock(Entry, Instant),
    /// Another process holds the lock: wait, then try again.
    Poll(Entry, Instant),
    Polled(Entry, Instant),
    Origin(Entry),
    /// Store the answer (and release the lease), then land it.
    Store(Cmd, Landing),
    Storing(Landing),
    /// Release the lease, the result already known.
    Release,
    Releasing,
    Done,
}

/// One `get_or_load` of `query`, by a cache whose shared parts are `state`.
pub(crate) struct Load<'c, 'q, Q: CachedQuery + ?Sized, E> {
    state: &'c CacheState,
    stats: Recorder<'c>,
    phase: Phase<'q, 'c, Q>,
    leader: Option<Leader<'c>>,
    lease: Option<Lease>,
    /// A value past its freshness (with a fail-safe): served if the origin
    /// fails.
    fallback: Option<Q::Value>,
    result: Option<Result<Q::Value, CacheError<E>>>,
    purpose: Purpose,
    /// The answer was a hit in its eager refresh window
    /// ([`Purpose::Refreshable`]).
    due: bool,
    _origin: PhantomData<fn() -> E>,
}

impl<'c, 'q, Q, E> Load<'c, 'q, Q, E>
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
    E: Send + Sync + 'static,
{
    /// A load of `query` from its read through Redis: the drivers look for a
    /// tracked hit in process first.
    pub(crate) fn new(state: &'c CacheState, query: &'q Q, purpose: Purpose) -> Self {
        let refresh = purpose == Purpose::Refresh;
        let (phase, result) = match state.keyed_read(query) {
            Ok(read) => (Phase::Read(read.naming_entry(refresh)), None),
            Err(error) => (Phase::Done, Some(Err(error.into()))),
        };
        Load {
            state,
            stats: state.stats.of::<Q>(),
            phase,
            leader: None,
            lease: None,
            fallback: None,
            result,
            purpose,
            due: false,
            _origin: PhantomData,
        }
    }

    /// Whether the load ended in a hit in its eager refresh window.
    pub(crate) fn refresh_due(&self) -> bool {
        self.due
    }

    /// What to do next.
    pub(crate) fn step(&mut self) -> Step<'c, Q::Value, E> {
        loop {
            let mut batch = Batch::default();
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Read(mut read) => {
                    read.send(&mut batch);
                    self.phase = Phase::Read(read);
                }
                Phase::Join(entry) => match self.state.flights.join(entry.key()) {
                    Role::Lead(leader) => {
                        self.leader = Some(leader);
                        self.phase = self.after_miss(entry);
                        continue;
                    }
                    Role::Wait(waiter) => {
                        self.phase = Phase::Waiting(entry);
                        return Step::Pause(Pause::Flight(waiter));
                    }
                },
                Phase::Reread(entry) => {
                    batch.push(entry.get());
                    self.phase = Phase::Reread(entry);
                }
                Phase::Lock(entry, deadline) => {
                    let lease = Lease::on(&entry);
                    let lock = self.state.lock.expect("a lock phase has a lock");
                    batch.push(lease.take(lock.lease()));
                    batch.push(entry.get());
                    self.lease = Some(lease);
                    self.phase = Phase::Lock(entry, deadline);
                }
                Phase::Poll(entry, deadline) => {
                    let lock = self.state.lock.expect("a poll phase has a lock");
                    let left = deadline.saturating_duration_since(Instant::now());
                    self.phase = Phase::Polled(entry, deadline);
                    return Step::Pause(Pause::For(lock.poll_interval().min(left)));
                }
                Phase::Origin(entry) => {
                    self.stats.load();
                    self.phase = Phase::Origin(entry);
                    let soft_timeout = self.fallback.as_ref().and(
                        self.state
                            .fail_safe
                            .and_then(|fail_safe| fail_safe.soft_timeout_of()),
                    );
                    return Step::Origin { soft_timeout };
                }
                Phase::Store(set, landing) => {
                    batch.push(set);
                    if let Some(lease) = &self.lease {
                        batch.push(lease.release());
                    }
                    self.phase = Phase::Storing(landing);
                }
                Phase::Release => match &self.lease {
                    Some(lease) => {
                        batch.push(lease.release());
                        self.phase = Phase::Releasing;
                    }
                    None => continue,
                },
                Phase::Done => {
                    let result = self.result.take().expect("a load ends with a result");
                    return Step::Done(result);
                }
                Phase::Waiting(_) | Phase::Polled(..) | Phase::Storing(_) | Phase::Releasing => {
                    unreachable!("a load in flight is resumed by `receive` or `landed`")
                }
            }
            return Step::Send(batch);
        }
    }

    /// After a miss as the flight's leader: the lock, if the cache has one.
    fn after_miss(&self, entry: Entry) -> Phase<'q, 'c, Q> {
        match self.state.lock {
            Some(lock) => Phase::Lock(entry, Instant::now() + lock.wait()),
            None => Phase::Origin(entry),
        }
    }

    /// Judges the replies to the last [`Step::Send`] (or the driver's own
    /// failure to send it).
    pub(crate) fn receive(&mut self, replies: Result<Replies, RedisError>) {
        let stats = self.stats;
        self.phase = match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Read(mut read) => match read.receive(replies) {
                None => Phase::Read(read),
                Some(Ok(Read {
                    found: Found::Value(stored),
                    local,
                    entry,
                })) if stored.is_fresh() => {
                    let due = self.purpose != Purpose::Load
                        && self.state.refresh_due::<Q>(stored.fresh_until);
                    match self.purpose {
                        Purpose::Refresh if due => {
                            Phase::Join(entry.expect("a refresh's read names its entry"))
                        }
                        // Reloaded since the hit that asked for it.
                        Purpose::Refresh => self.finish(Ok(stored.value)),
                        Purpose::Load | Purpose::Refreshable => {
                            stats.hit(local);
                            self.due = due;
                            self.finish(Ok(stored.value))
                        }
                    }
                }
                Some(Ok(Read { found, entry, .. })) => {
                    let entry = entry.expect("a read without a fresh value names its entry");
                    match found {
                        // Past its freshness: reloaded, but at hand should
                        // the origin fail.
                        Found::Value(stored) => self.fallback = self.state.fallback(stored),
                        Found::Rejected(reason) => stats.reject(reason),
                        Found::Absent => {}
                    }
                    if self.purpose != Purpose::Refresh {
                        stats.miss();
                    }
                    Phase::Join(entry)
                }
                Some(Err(error)) => {
                    stats.error(&error);
                    self.finish(Err(infallible(error)))
                }
            },
            Phase::Reread(entry) => match self.judge_one(&entry, replies, 0) {
                Ok(Some(value)) => self.coalesced(value),
                Ok(None) => self.after_miss(entry),
                Err(error) => self.finish(Err(error)),
            },
            Phase::Lock(entry, deadline) => self.locked(entry, deadline, replies),
            Phase::Storing(landing) => {
                if failed(&replies) {
                    // The answer is still returned: counted, not raised.
                    stats.error(&"the answer's SET failed");
                }
                self.lease = None;
                // Landed once stored, so that a caller arriving meanwhile
                // finds the flight and not yet an empty key.
                self.land(landing);
                Phase::Done
            }
            Phase::Releasing => {
                if failed(&replies) {
                    // Left to the lease's expiry.
                    stats.error(&"the load lock's release failed");
                }
                self.lease = None;
                Phase::Done
            }
            phase => phase,
        };
    }

    /// The replies to `SET lock NX` and the entry's `GET`.
    fn locked(
        &mut self,
        entry: Entry,
        deadline: Instant,
        replies: Result<Replies, RedisError>,
    ) -> Phase<'q, 'c, Q> {
        let taken = match &replies {
            Ok(replies) => match &replies[0] {
                Ok(Value::Nil) => false,
                Ok(_) => true,
                Err(error) => {
                    self.lease = None;
                    self.stats.error(error);
                    return self.finish(Err(backend_of(error.clone())));
                }
            },
            Err(_) => false,
        };
        if !taken {
            self.lease = None;
        }
        match self.judge_one(&entry, replies, 1) {
            Ok(Some(value)) => {
                let phase = self.coalesced(value);
                // Found with the lock taken: release it before returning.
                if self.lease.is_some() {
                    Phase::Release
                } else {
                    phase
                }
            }
            Ok(None) if taken => Phase::Origin(entry),
            Ok(None) if Instant::now() >= deadline => Phase::Origin(entry),
            Ok(None) => Phase::Poll(entry, deadline),
            Err(error) => {
                if self.lease.is_some() {
                    self.result = Some(Err(error));
                    Phase::Release
                } else {
                    self.finish(Err(error))
                }
            }
        }
    }

    /// The entry in reply `at`: a value, or `None` (absent or rejected,
    /// counted); an error when the batch or that reply failed.
    fn judge_one(
        &self,
        entry: &Entry,
        replies: Result<Replies, RedisError>,
        at: usize,
    ) -> Result<Option<Q::Value>, CacheError<E>> {
        let stats = self.stats;
        let judged = replies.and_then(|mut replies| {
            entry.judge(std::mem::replace(&mut replies[at], Ok(Value::Nil)))
        });
        match judged {
            Ok(Found::Value(stored)) if stored.is_fresh() => Ok(Some(stored.value)),
            Ok(Found::Value(_) | Found::Absent) => Ok(None),
            Ok(Found::Rejected(reason)) => {
                stats.reject(reason);
                Ok(None)
            }
            Err(error) => {
                stats.error(&error);
                Err(backend_of(error))
            }
        }
    }

    /// The origin's answer.
    pub(crate) fn origin(&mut self, answer: Result<Q::Value, E>) {
        let Phase::Origin(entry) = std::mem::replace(&mut self.phase, Phase::Done) else {
            unreachable!("the origin is asked in the origin phase")
        };
        let stats = self.stats;
        self.phase = match answer {
            Ok(value) => {
                let landing = Landing::Value(Arc::new(value.clone()));
                let set = entry.set(&value, self.state.lifetime::<Q>());
                let phase = match set {
                    Ok((set, fresh_until)) => {
                        self.state.keep_local::<Q>(&entry, &value, fresh_until);
                        Phase::Store(set, landing)
                    }
                    Err(error) => {
                        // Served, never stored: counted as an error.
                        stats.error(&error);
                        self.land(landing);
                        Phase::Release
                    }
                };
                self.result = Some(Ok(value));
                phase
            }
            Err(error) => {
                stats.error(&"the origin failed");
                match self.fallback.take() {
                    Some(stale) => self.serve_stale(stale),
                    None => {
                        let error = Arc::new(error);
                        self.land(Landing::Error(error.clone()));
                        self.result = Some(Err(CacheError::Origin(error)));
                        Phase::Release
                    }
                }
            }
        };
    }

    /// The origin was slower than the fail-safe's soft timeout: the stale
    /// value at hand is served instead.
    #[cfg(feature = "redis-async")]
    pub(crate) fn origin_timed_out(&mut self) {
        let Phase::Origin(_) = std::mem::replace(&mut self.phase, Phase::Done) else {
            unreachable!("the origin is asked in the origin phase")
        };
        let stale = self
            .fallback
            .take()
            .expect("a soft timeout is given only with a stale value at hand");
        self.phase = self.serve_stale(stale);
    }

    /// Serves (and hands the waiters) a value past its freshness, never
    /// stored again.
    fn serve_stale(&mut self, stale: Q::Value) -> Phase<'q, 'c, Q> {
        self.stats.stale();
        self.land(Landing::Value(Arc::new(stale.clone())));
        self.result = Some(Ok(stale));
        Phase::Release
    }

    /// What the [`Pause`] this load asked for ended with.
    pub(crate) fn resume(&mut self, resumed: Resumed<'c>) {
        let waited = match (std::mem::replace(&mut self.phase, Phase::Done), resumed) {
            (Phase::Polled(entry, deadline), Resumed::Slept) => {
                self.phase = Phase::Lock(entry, deadline);
                return;
            }
            (Phase::Waiting(entry), Resumed::Flight(waited)) => (entry, waited),
            _ => unreachable!("a load resumes from the pause it asked for"),
        };
        self.landed(waited.0, waited.1);
    }

    /// What the flight this load waited on ended with.
    fn landed(&mut self, entry: Entry, waited: Waited<'c>) {
        let stats = self.stats;
        self.phase = match waited {
            Waited::Lead(leader) => {
                self.leader = Some(leader);
                Phase::Reread(entry)
            }
            Waited::Landed(Landing::Value(value)) => match value.downcast_ref::<Q::Value>() {
                Some(value) => self.coalesced(value.clone()),
                // Another query type under this key (see `registry::check`).
                None => Phase::Origin(entry),
            },
            Waited::Landed(Landing::Error(error)) => match error.downcast::<E>() {
                Ok(error) => {
                    stats.coalesced();
                    stats.error(&"the origin failed");
                    self.finish(Err(CacheError::Origin(error)))
                }
                // A caller of this key with another error type: load alone.
                Err(_) => Phase::Origin(entry),
            },
        };
    }

    fn coalesced(&mut self, value: Q::Value) -> Phase<'q, 'c, Q> {
        self.stats.coalesced();
        self.land(Landing::Value(Arc::new(value.clone())));
        self.finish(Ok(value))
    }

    fn land(&mut self, landing: Landing) {
        if let Some(leader) = self.leader.take() {
            leader.land(landing);
        }
    }

    fn finish(&mut self, result: Result<Q::Value, CacheError<E>>) -> Phase<'q, 'c, Q> {
        self.result = Some(result);
        Phase::Done
    }
}

/// Whether a batch, or any command in it, failed.
fn failed(replies: &Result<Replies, RedisError>) -> bool {
    replies
        .as_ref()
        .map_or(true, |replies| replies.iter().any(Result::is_err))
}

fn backend_of<E>(error: RedisError) -> CacheError<E> {
    CacheError::Backend(Box::new(error))
}

/// A cache error without an origin, as one with origin error `E`.
pub(crate) fn infallible<E>(error: CacheError<Infallible>) -> CacheError<E> {
    match error {
        CacheError::Generation(e) => CacheError::Generation(e),
        CacheError::Backend(e) => CacheError::Backend(e),
        CacheError::Unstorable(e) => CacheError::Unstorable(e),
        CacheError::Origin(never) => match *never {},
    }
}
