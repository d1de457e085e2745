//! [`Load`]: a `get_or_load`, as steps a driver carries out (send a batch,
//! call the origin, wait on another caller's flight, sleep) with no I/O of
//! its own.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::{Cmd, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::batch::Exchange;
use super::batch::{Batch, Sent};
use super::counters::keep_tags;
use super::entry::{Entry, Found, Stored};
use super::flight::{Landing, Leader, Role, Waited, Waiter};
use super::lock::{Lease, LoadLock};
use super::read::{KeyedRead, Missed, Read};
use super::state::{CacheState, EagerRefresh};
use super::tags::{ClockRead, TagCheck};
use crate::cache::value_tags;
use crate::cache::{BackendError, CacheError, CachedQuery, Recorder};
use crate::generation::{GenerationError, QueryCounters};
use crate::tag::{TagClock, TagStamp};

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
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Purpose {
    /// `get_or_load`.
    Load,
    /// `get_or_refresh`: a load that notes whether its hit was in its eager
    /// refresh window ([`Load::refresh_due`]).
    Refreshable(EagerRefresh),
    /// An eager refresh: a value still in its window is loaded again, and
    /// the read counts no hit or miss.
    Refresh(EagerRefresh),
}

impl Purpose {
    fn is_refresh(self) -> bool {
        matches!(self, Purpose::Refresh(_))
    }
}

// A load moves through its phases once: boxing the first one would cost an
// allocation on every call to save a few moves.
#[allow(clippy::large_enum_variant)]
enum Phase<'q, 'l, Q: CachedQuery + ?Sized, E> {
    Read(KeyedRead<'q, 'l, Q>),
    /// A miss: join the key's flight.
    Join(Target),
    /// Waiting on another caller's flight: [`Load::resume`] follows.
    Waiting(Target),
    /// Leading a flight taken over: read the entry again first.
    Reread(Entry),
    /// Take the load lock and read the entry again, in one batch.
    Lock(Entry, Locking),
    /// Another process holds the lock: wait, then try again.
    Poll(Entry, Locking),
    /// Sleeping before the next try: [`Load::resume`] follows.
    Polled(Entry, Locking),
    /// Read the tag clock before the origin (an answer tagged from its
    /// value, stored).
    Clock(Target, ClockRead),
    Origin(Target),
    /// Store the answer (its `SET`, and what keeps its tag counters as
    /// long), release the lease, then land it.
    Store(Vec<Cmd>, Q::Value, Tagged),
    Storing(Q::Value, Tagged),
    /// Another caller's answer with tags, held while their counters are
    /// read.
    Check(Box<Checking<Q::Value>>),
    /// Release the lease, the result already known.
    Release(Answer<Q::Value, E>),
    Releasing(Answer<Q::Value, E>),
    Done(Answer<Q::Value, E>),
    /// Handed to the driver with [`Step::Done`], or moved out for a moment.
    Over,
}

type Answer<V, E> = Result<V, CacheError<E>>;

/// An answer's tags and when its fill began, if it has tags.
type Tagged = Option<Arc<TagStamp>>;

/// What a flight lands: the answer, with its tags, which each waiter
/// checks before serving it (the fill may have begun before a bump that
/// returned before the waiter's read); for an answer that skipped a check
/// (never stored, so keyed at generation 0; or tagged from its value with
/// no tag clock read), when its origin call began, on this process's
/// invalidation clock: a waiter that began after a later bump loads again.
struct FlightValue<V> {
    value: V,
    tags: Tagged,
    unchecked_since: Option<u64>,
}

/// An answer another caller made (a flight's, an entry found again), its
/// tags read before it is served, and what the load does if one was bumped.
struct Checking<V> {
    check: TagCheck,
    value: V,
    stamp: Arc<TagStamp>,
    then: Otherwise,
}

/// Where a load goes on when the answer it found cannot be served.
enum Otherwise {
    /// A leader's re-read: on to the lock or the origin.
    Reread(Entry),
    /// The entry read with the lock: the origin, or polling again.
    Locked(Entry, Locking),
    /// A flight's answer: join a flight again.
    Landed(Target),
}

/// Where a load's answer goes: its entry, or, when Redis failed and the
/// cache answers from the origin all the same, nowhere (the flight is then
/// the query's key at generation 0, so one origin call per query still).
enum Target {
    Entry(Entry),
    Unstored(Box<str>),
}

impl Target {
    /// The flight's key.
    fn key(&self) -> &str {
        match self {
            Target::Entry(entry) => entry.key(),
            Target::Unstored(key) => key,
        }
    }
}

/// The load lock this load takes, and until when it waits for another
/// process's answer.
#[derive(Clone, Copy)]
struct Locking {
    lock: LoadLock,
    deadline: Instant,
}

/// One `get_or_load` of `query`, by a cache whose shared parts are `state`.
pub(crate) struct Load<'c, 'q, Q: CachedQuery + ?Sized, E> {
    query: &'q Q,
    state: &'c CacheState,
    stats: Recorder<'c>,
    phase: Phase<'q, 'c, Q, E>,
    leader: Option<Leader<'c>>,
    lease: Option<Lease>,
    /// A value past its freshness (with a fail-safe): served if the origin
    /// fails.
    fallback: Option<Stored<Q::Value>>,
    purpose: Purpose,
    /// The answer was a hit in its eager refresh window
    /// ([`Purpose::Refreshable`]).
    due: bool,
    /// The tag clock read before the origin, for an answer tagged from its
    /// value; `Err` once its read failed (the answer is then not stored).
    tag_clock: Option<Result<TagClock, ()>>,
    /// When this load began, and when its origin call did, on the
    /// invalidation clock of this process ([`FlightValue::unchecked_since`]).
    began: u64,
    origin_began: u64,
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
        let refresh = purpose.is_refresh();
        let phase = match state.keyed_read(query) {
            Ok(read) => Phase::Read(read.naming_entry(refresh)),
            Err(error) => Phase::Done(Err(error.into())),
        };
        Load {
            query,
            state,
            stats: state.stats.of::<Q>(),
            phase,
            leader: None,
            lease: None,
            fallback: None,
            purpose,
            due: false,
            tag_clock: None,
            began: state.source.invalidations.now(),
            origin_began: 0,
        }
    }

    /// Whether the load ended in a hit in its eager refresh window.
    pub(crate) fn refresh_due(&self) -> bool {
        self.due
    }

    /// What to do next. The driver answers a [`Step::Send`] with
    /// [`receive`](Self::receive), a [`Step::Origin`] with
    /// [`origin`](Self::origin) and a [`Step::Pause`] with
    /// [`resume`](Self::resume), and stops at [`Step::Done`].
    pub(crate) fn step(&mut self) -> Step<'c, Q::Value, E> {
        loop {
            let mut batch = Batch::default();
            match std::mem::replace(&mut self.phase, Phase::Over) {
                Phase::Read(mut read) => {
                    read.send(&mut batch);
                    self.phase = Phase::Read(read);
                }
                Phase::Join(target) => match self.state.flights.join(target.key()) {
                    Role::Lead(leader) => {
                        self.leader = Some(leader);
                        self.phase = self.lead(target);
                        continue;
                    }
                    Role::Wait(waiter) => {
                        self.phase = Phase::Waiting(target);
                        return Step::Pause(Pause::Flight(waiter));
                    }
                },
                Phase::Reread(entry) => {
                    batch.push(entry.get());
                    self.phase = Phase::Reread(entry);
                }
                Phase::Lock(entry, locking) => {
                    let lease = Lease::on(&entry);
                    batch.push(lease.take(locking.lock.lease()));
                    batch.push(entry.get());
                    self.lease = Some(lease);
                    self.phase = Phase::Lock(entry, locking);
                }
                Phase::Poll(entry, locking) => {
                    let left = locking.deadline.saturating_duration_since(Instant::now());
                    self.phase = Phase::Polled(entry, locking);
                    return Step::Pause(Pause::For(locking.lock.poll().min(left)));
                }
                Phase::Origin(Target::Entry(entry))
                    if Q::VALUE_TAGS && self.tag_clock.is_none() =>
                {
                    let read = QueryCounters::of(self.query).map(|counters| {
                        ClockRead::new(counters.counters(), self.state.source.topology)
                    });
                    match read {
                        Ok(mut clock) => {
                            clock.send(&mut batch);
                            self.phase = Phase::Clock(Target::Entry(entry), clock);
                        }
                        // Named once already: a key error here is a bug of the query type.
                        Err(error) => {
                            self.phase = Phase::Done(Err(error.into()));
                            continue;
                        }
                    }
                }
                Phase::Origin(target) => {
                    self.stats.load();
                    self.origin_began = self.state.source.invalidations.now();
                    self.phase = Phase::Origin(target);
                    let soft_timeout = self.fallback.as_ref().and(self.state.soft_timeout);
                    return Step::Origin { soft_timeout };
                }
                Phase::Store(commands, value, tags) => {
                    for command in commands {
                        batch.push(command);
                    }
                    if let Some(lease) = &self.lease {
                        batch.push(lease.release());
                    }
                    self.phase = Phase::Storing(value, tags);
                }
                Phase::Check(mut checking) => {
                    checking.check.send(&mut batch);
                    self.phase = Phase::Check(checking);
                }
                Phase::Release(answer) => match &self.lease {
                    Some(lease) => {
                        batch.push(lease.release());
                        self.phase = Phase::Releasing(answer);
                    }
                    None => {
                        self.phase = Phase::Done(answer);
                        continue;
                    }
                },
                Phase::Done(answer) => return Step::Done(answer),
                Phase::Waiting(_)
                | Phase::Clock(..)
                | Phase::Polled(..)
                | Phase::Storing(..)
                | Phase::Releasing(_)
                | Phase::Over => {
                    unreachable!("a driver answers each step before the next, and stops at Done")
                }
            }
            return Step::Send(batch);
        }
    }

    /// Leading a flight to `target`: an entry's through the lock, if the
    /// cache has one; none is taken for an answer never stored.
    fn lead(&self, target: Target) -> Phase<'q, 'c, Q, E> {
        match target {
            Target::Entry(entry) => self.after_miss(entry),
            Target::Unstored(_) => Phase::Origin(target),
        }
    }

    /// After a miss as the flight's leader: the lock, if the cache has one.
    fn after_miss(&self, entry: Entry) -> Phase<'q, 'c, Q, E> {
        match self.state.lock {
            Some(lock) => Phase::Lock(
                entry,
                Locking {
                    lock,
                    deadline: Instant::now() + lock.wait(),
                },
            ),
            None => Phase::Origin(Target::Entry(entry)),
        }
    }

    /// Redis failed with `error` before the key could be read: the origin
    /// answers, nothing is stored, unless the cache returns such errors
    /// (or the load is an eager refresh, whose answer has nowhere to go).
    fn degrade(&mut self, error: CacheError<Infallible>) -> Phase<'q, 'c, Q, E> {
        let degrades = !self.purpose.is_refresh() && self.state.degrades(&error);
        if !degrades {
            self.stats.error(&error);
            return Phase::Done(Err(error.with_origin()));
        }
        self.state.degraded(self.stats, &error);
        // With a fail-safe, what the level in process holds and nothing
        // known invalidated: served if fresh, else kept for an origin that
        // fails too.
        if let Some(stored) = self.state.outage_value(self.query) {
            if stored.is_fresh() {
                self.stats.stale();
                return Phase::Done(Ok(stored.value));
            }
            self.fallback = Some(stored);
        }
        match self.query.cache_key(0) {
            Ok(key) => Phase::Join(Target::Unstored(key.as_str().into())),
            // Named once already: a key error here is a bug of the query type.
            Err(error) => Phase::Done(Err(GenerationError::from(error).into())),
        }
    }

    /// Judges the replies to the last [`Step::Send`] (or the driver's own
    /// failure to send it).
    pub(crate) fn receive(&mut self, replies: Sent) {
        let stats = self.stats;
        self.phase = match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Read(mut read) => match read.receive(replies) {
                None => Phase::Read(read),
                Some(Ok(Read::Hit {
                    stored,
                    local,
                    entry,
                })) => {
                    let due = match self.purpose {
                        Purpose::Load => false,
                        Purpose::Refreshable(eager) | Purpose::Refresh(eager) => {
                            self.state.refresh_due::<Q>(eager, stored.fresh_until)
                        }
                    };
                    match (self.purpose, entry) {
                        // Still in its window: load it again.
                        (Purpose::Refresh(_), Some(entry)) if due => {
                            Phase::Join(Target::Entry(entry))
                        }
                        // Reloaded since the hit that asked for it (a
                        // refresh's read always names its entry).
                        (Purpose::Refresh(_), _) => Phase::Done(Ok(stored.value)),
                        (Purpose::Load | Purpose::Refreshable(_), _) => {
                            stats.hit(local);
                            self.due = due;
                            Phase::Done(Ok(stored.value))
                        }
                    }
                }
                Some(Ok(Read::Miss { entry, missed })) => {
                    match missed {
                        // Past its freshness: reloaded, but at hand should
                        // the origin fail.
                        Missed::Stale(stored) => self.fallback = self.state.fallback(stored),
                        Missed::Rejected(reason) => stats.reject(reason),
                        Missed::Absent => {}
                    }
                    if !self.purpose.is_refresh() {
                        stats.miss();
                    }
                    Phase::Join(Target::Entry(entry))
                }
                Some(Err(error)) => self.degrade(error),
            },
            Phase::Reread(entry) => match self.judge_one(&entry, replies, 0) {
                Ok(Some(stored)) => {
                    self.check_found(stored.value, stored.tags, Otherwise::Reread(entry))
                }
                Ok(None) => self.after_miss(entry),
                Err(error) => Phase::Done(Err(error)),
            },
            Phase::Lock(entry, locking) => self.locked(entry, locking, replies),
            Phase::Clock(target, mut clock) => {
                let read = replies
                    .map_err(GenerationError::store)
                    .and_then(|mut replies| clock.receive(&mut replies));
                match read.map_err(CacheError::from) {
                    Ok(since) => {
                        self.tag_clock = Some(Ok(since));
                        Phase::Origin(target)
                    }
                    // The answer is still returned: reported, not stored.
                    Err(error) if self.state.degrades(&error) => {
                        self.state.degraded(stats, &error);
                        self.tag_clock = Some(Err(()));
                        Phase::Origin(target)
                    }
                    Err(error) => {
                        stats.error(&error);
                        Phase::Release(Err(error.with_origin()))
                    }
                }
            }
            Phase::Check(mut checking) => {
                let judged = replies
                    .map_err(GenerationError::store)
                    .and_then(|mut replies| checking.check.receive(&mut replies));
                match judged {
                    Err(error) => {
                        let error = CacheError::from(error);
                        stats.error(&error);
                        self.end(Err(error.with_origin()))
                    }
                    Ok(()) if !checking.check.is_done() => Phase::Check(checking),
                    Ok(()) => self.checked(*checking),
                }
            }
            Phase::Storing(value, tags) => {
                if let Some(failure) = failure(replies) {
                    // The answer is still returned: reported, not raised.
                    self.state.degraded(stats, &failure);
                }
                self.lease = None;
                // Landed once stored, so that a caller arriving meanwhile
                // finds the flight and not yet an empty key.
                self.land_value(&value, tags, false);
                Phase::Done(Ok(value))
            }
            Phase::Releasing(answer) => {
                if let Some(failure) = failure(replies) {
                    // Left to the lease's expiry.
                    self.state.degraded(stats, &failure);
                }
                self.lease = None;
                Phase::Done(answer)
            }
            _ => unreachable!("replies answer the phase that sent a batch"),
        };
    }

    /// The replies to `SET lock NX` and the entry's `GET`.
    fn locked(&mut self, entry: Entry, locking: Locking, replies: Sent) -> Phase<'q, 'c, Q, E> {
        let taken = match &replies {
            Ok(replies) => match &replies[0] {
                Ok(Value::Nil) => false,
                Ok(_) => true,
                Err(error) => {
                    self.lease = None;
                    let error = BackendError::refused(error.clone());
                    self.stats.error(&error);
                    return Phase::Done(Err(error.into()));
                }
            },
            Err(_) => false,
        };
        if !taken {
            self.lease = None;
        }
        match self.judge_one(&entry, replies, 1) {
            Ok(Some(stored)) => {
                self.check_found(stored.value, stored.tags, Otherwise::Locked(entry, locking))
            }
            Ok(None) => self.still_missing(entry, locking),
            Err(error) => self.end(Err(error)),
        }
    }

    /// The entry is still missing after the lock's read: the origin, with
    /// the lock taken or the wait over; otherwise poll again.
    fn still_missing(&self, entry: Entry, locking: Locking) -> Phase<'q, 'c, Q, E> {
        if self.lease.is_some() || Instant::now() >= locking.deadline {
            Phase::Origin(Target::Entry(entry))
        } else {
            Phase::Poll(entry, locking)
        }
    }

    /// Ends with `answer`, releasing the lock first if this load holds it.
    fn end(&self, answer: Answer<Q::Value, E>) -> Phase<'q, 'c, Q, E> {
        match self.lease {
            Some(_) => Phase::Release(answer),
            None => Phase::Done(answer),
        }
    }

    /// Serves `value`, another caller's answer, if it has no tags or none
    /// of them was bumped since its fill began (read now, unless the
    /// counters are all kept in process); otherwise goes on as `then` says.
    fn check_found(
        &mut self,
        value: Q::Value,
        tags: Tagged,
        then: Otherwise,
    ) -> Phase<'q, 'c, Q, E> {
        let Some(stamp) = tags else {
            return self.accept(value, None, then);
        };
        let check = match QueryCounters::of(self.query) {
            Ok(counters) => TagCheck::of(counters.counters(), &stamp, &self.state.source),
            // Named once already: a key error here is a bug of the query type.
            Err(error) => return self.end(Err(error.into())),
        };
        self.checked(Checking {
            check,
            value,
            stamp,
            then,
        })
    }

    /// What follows a tag check: still reading, or its verdict.
    fn checked(&mut self, checking: Checking<Q::Value>) -> Phase<'q, 'c, Q, E> {
        if !checking.check.is_done() {
            return Phase::Check(Box::new(checking));
        }
        if checking.check.unchanged() {
            return self.accept(checking.value, Some(checking.stamp), checking.then);
        }
        match checking.then {
            Otherwise::Reread(entry) => self.after_miss(entry),
            Otherwise::Locked(entry, locking) => self.still_missing(entry, locking),
            Otherwise::Landed(target) => Phase::Join(target),
        }
    }

    /// Serves another caller's answer (landed for the flight this load
    /// leads, if any).
    fn accept(&mut self, value: Q::Value, tags: Tagged, then: Otherwise) -> Phase<'q, 'c, Q, E> {
        let answer = self.coalesced(value, tags);
        match then {
            Otherwise::Locked(..) => self.end(answer),
            Otherwise::Reread(_) | Otherwise::Landed(_) => Phase::Done(answer),
        }
    }

    /// The entry in reply `at`: a value, or `None` (absent or rejected,
    /// counted); an error when the batch or that reply failed.
    fn judge_one(
        &self,
        entry: &Entry,
        replies: Sent,
        at: usize,
    ) -> Result<Option<Stored<Q::Value>>, CacheError<E>> {
        let stats = self.stats;
        let judged = replies.and_then(|mut replies| {
            let reply = std::mem::replace(&mut replies[at], Ok(Value::Nil));
            entry.judge(reply).map_err(BackendError::refused)
        });
        match judged {
            Ok(Found::Value(stored)) if stored.is_fresh() => Ok(Some(stored)),
            Ok(Found::Value(_) | Found::Absent) => Ok(None),
            Ok(Found::Rejected(reason)) => {
                stats.reject(reason);
                Ok(None)
            }
            Err(error) => {
                stats.error(&error);
                Err(error.into())
            }
        }
    }

    /// The origin's answer, after [`Step::Origin`].
    pub(crate) fn origin(&mut self, answer: Result<Q::Value, E>) {
        let Phase::Origin(target) = std::mem::replace(&mut self.phase, Phase::Over) else {
            unreachable!("the driver calls the origin when a step asks it")
        };
        let stats = self.stats;
        self.phase = match (answer, target) {
            (Ok(value), Target::Unstored(_)) => {
                self.land_value(&value, None, true);
                Phase::Done(Ok(value))
            }
            (Ok(value), Target::Entry(entry)) => {
                let stored = self.stamp(&value).and_then(|tags| {
                    let lifetime = self.state.lifetime::<Q>();
                    let set = entry.set(&value, lifetime, tags.as_deref());
                    let (set, fresh_until) =
                        set.map_err(|error| Some(CacheError::Unstorable(Box::new(error))))?;
                    let mut commands = vec![set];
                    if self.state.source.tag_lifetime.is_some() {
                        // Named once already: a key error here is a bug of the query type.
                        let counters =
                            QueryCounters::of(self.query).map_err(|error| Some(error.into()))?;
                        let value_tags = tags.as_deref().map(|stamp| &stamp.tags);
                        commands.extend(keep_tags(
                            counters.counters(),
                            value_tags,
                            lifetime.kept(),
                        ));
                    }
                    Ok(((commands, fresh_until), tags))
                });
                match stored {
                    Ok(((commands, fresh_until), tags)) => {
                        self.state
                            .keep_local::<Q>(&entry, &value, fresh_until, tags.clone());
                        Phase::Store(commands, value, tags)
                    }
                    Err(failure) => {
                        // Served, never stored.
                        if let Some(failure) = failure {
                            self.state.degraded(stats, &failure);
                        }
                        // Its tags, if it has any, are not known to be unbumped.
                        self.land_value(&value, None, Q::VALUE_TAGS);
                        Phase::Release(Ok(value))
                    }
                }
            }
            (Err(error), _) => match self.fallback.take() {
                Some(stale) => self.serve_stale(stale),
                None => {
                    stats.error(&"the origin failed");
                    let error = Arc::new(error);
                    self.land(Landing::Error(error.clone()));
                    Phase::Release(Err(CacheError::Origin(error)))
                }
            },
        };
    }

    /// The tags `value` is stored with (`None` when `Q`'s answers carry
    /// none); `Err` when it cannot be stored: its tags cannot be taken (the
    /// failure, to report) or the tag clock could not be read (reported).
    fn stamp(&self, value: &Q::Value) -> Result<Option<Arc<TagStamp>>, Option<CacheError>> {
        let since = match self.tag_clock {
            _ if !Q::VALUE_TAGS => return Ok(None),
            Some(Ok(since)) => since,
            Some(Err(())) | None => return Err(None),
        };
        match value_tags::<Q>(value, self.state.max_tags) {
            Ok(tags) if tags.is_empty() => Ok(None),
            Ok(tags) => Ok(Some(Arc::new(TagStamp { tags, since }))),
            Err(error) => Err(Some(CacheError::Unstorable(error))),
        }
    }

    /// The origin was slower than the fail-safe's soft timeout: the stale
    /// value at hand is served instead.
    #[cfg(feature = "redis-async")]
    pub(crate) fn origin_timed_out(&mut self) {
        let Phase::Origin(_) = std::mem::replace(&mut self.phase, Phase::Over) else {
            unreachable!("the driver gives the origin up only when a step asked it")
        };
        let stale = self
            .fallback
            .take()
            .expect("`step` gives a soft timeout only with a stale value at hand");
        self.phase = self.serve_stale(stale);
    }

    /// Serves (and hands the waiters) a value past its freshness, never
    /// stored again.
    fn serve_stale(&mut self, stale: Stored<Q::Value>) -> Phase<'q, 'c, Q, E> {
        self.stats.stale();
        self.land(Landing::Value(Arc::new(FlightValue {
            value: stale.value.clone(),
            tags: stale.tags,
            unchecked_since: None,
        })));
        Phase::Release(Ok(stale.value))
    }

    /// What the [`Pause`] this load asked for ended with.
    pub(crate) fn resume(&mut self, resumed: Resumed<'c>) {
        let (target, waited) = match (std::mem::replace(&mut self.phase, Phase::Over), resumed) {
            (Phase::Polled(entry, locking), Resumed::Slept) => {
                self.phase = Phase::Lock(entry, locking);
                return;
            }
            (Phase::Waiting(target), Resumed::Flight(waited)) => (target, waited),
            _ => unreachable!("a load resumes from the pause it asked for"),
        };
        self.landed(target, waited);
    }

    /// What the flight this load waited on ended with.
    fn landed(&mut self, target: Target, waited: Waited<'c>) {
        let stats = self.stats;
        self.phase = match waited {
            Waited::Lead(leader) => {
                self.leader = Some(leader);
                match target {
                    Target::Entry(entry) => Phase::Reread(entry),
                    Target::Unstored(_) => Phase::Origin(target),
                }
            }
            Waited::Landed(Landing::Value(value)) => {
                match value.downcast_ref::<FlightValue<Q::Value>>() {
                    // Its origin call began before a bump that ended before
                    // this load began: what that check would have caught.
                    Some(landed) if landed.unchecked_since.is_some_and(|at| at < self.began) => {
                        Phase::Join(target)
                    }
                    Some(landed) => {
                        let (value, tags) = (landed.value.clone(), landed.tags.clone());
                        self.check_found(value, tags, Otherwise::Landed(target))
                    }
                    // Another query type under this key (see `registry::check`).
                    None => Phase::Origin(target),
                }
            }
            Waited::Landed(Landing::Error(error)) => match error.downcast::<E>() {
                Ok(error) => {
                    stats.coalesced();
                    stats.error(&"the origin failed");
                    Phase::Done(Err(CacheError::Origin(error)))
                }
                // A caller of this key with another error type: load alone.
                Err(_) => Phase::Origin(target),
            },
        };
    }

    /// Another caller's answer: counted, and landed for the flight this
    /// load leads, if any.
    fn coalesced(&mut self, value: Q::Value, tags: Tagged) -> Answer<Q::Value, E> {
        self.stats.coalesced();
        self.land_value(&value, tags, false);
        Ok(value)
    }

    fn land(&mut self, landing: Landing) {
        if let Some(leader) = self.leader.take() {
            leader.land(landing);
        }
    }

    /// Lands `value` for the flight this load leads, copied only if someone
    /// waits for it; `unchecked` when it skipped a check a waiter must make
    /// up for ([`FlightValue::unchecked_since`]).
    fn land_value(&mut self, value: &Q::Value, tags: Tagged, unchecked: bool) {
        let unchecked_since = unchecked.then_some(self.origin_began);
        if let Some(leader) = self.leader.take() {
            leader.land_with(|| {
                Landing::Value(Arc::new(FlightValue {
                    value: value.clone(),
                    tags,
                    unchecked_since,
                }))
            });
        }
    }
}

/// How a batch, or the first command in it that failed, failed; `None`
/// when every command succeeded.
fn failure(replies: Sent) -> Option<CacheError> {
    match replies {
        Err(error) => Some(error.into()),
        Ok(replies) => (replies.into_iter())
            .find_map(Result::err)
            .map(|error| BackendError::refused(error).into()),
    }
}
