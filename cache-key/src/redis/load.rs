//! [`load`]: a `get_or_load` through Redis, one async function over a
//! [`Driver`]: the read, the key's flight, the load lock, the origin and the
//! store. What a load holds (its flight, its lease on the lock) is owned by
//! a guard, so a load dropped at any wait, or whose origin panicked, leaves
//! nothing behind.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redis::Value;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::batch::{Batch, Sent};
use super::counters::keep_tags;
use super::driver::{self, Driver};
use super::entry::{Entry, Found, Stored};
use super::flight::{Landing, Leader, Role, Waited};
use super::lock::{Lease, LoadLock};
use super::read::{Missed, Read};
use super::state::{CacheState, EagerRefresh};
use super::tags::{ClockRead, TagCheck};
use crate::cache::value_tags;
use crate::cache::{BackendError, CacheError, CachedQuery, Recorder};
use crate::generation::{GenerationError, QueryCounters};
use crate::tag::{TagClock, TagStamp};

/// What a [`load`] is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Purpose {
    /// `get_or_load`.
    Load,
    /// `get_or_refresh`: a load that notes whether its hit was in its eager
    /// refresh window.
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

type Answer<V, E> = Result<V, CacheError<E>>;

/// An answer's tags and when its fill began, if it has tags.
type Tagged = Option<Arc<TagStamp>>;

/// `get_or_load` of `query` through Redis on `driver`, by a cache whose
/// shared parts are `state` (the drivers look for a tracked hit in process
/// first). `origin` is taken, and `call`ed with the fail-safe's soft timeout
/// if there is a stale value at hand (`None` back: given up past it), only
/// when the load reaches it; a `get_or_refresh` finds it still there when
/// the load ended in a hit. Also returns whether that hit was in its eager
/// refresh window ([`Purpose::Refreshable`]).
pub(crate) async fn load<D, Q, E, F, C, Called>(
    driver: &D,
    state: &CacheState,
    query: &Q,
    purpose: Purpose,
    origin: &mut Option<F>,
    call: C,
) -> (Answer<Q::Value, E>, bool)
where
    D: Driver,
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
    E: Send + Sync + 'static,
    C: FnOnce(F, Option<Duration>) -> Called,
    Called: Future<Output = Option<Result<Q::Value, E>>>,
{
    let mut load = Load {
        query,
        state,
        driver,
        stats: state.stats.of::<Q>(),
        leader: None,
        lease: Held {
            lease: None,
            driver,
        },
        fallback: None,
        purpose,
        tag_clock: None,
        began: state.source.invalidations.now(),
        origin_began: 0,
        deadline: driver.deadline(),
    };
    let target = match load.read().await {
        Ok(target) => target,
        Err(ended) => return ended,
    };
    let answer = match load.fly(&target).await {
        Flown::Answer(answer) => return (answer, false),
        Flown::Lead { reread } => match &target {
            Target::Entry(entry) => load.lead(entry, reread).await,
            Target::Unstored(_) => None,
        },
        Flown::Alone => None,
    };
    let answer = match answer {
        Some(answer) => answer,
        None => {
            let origin = origin.take().expect("a load reaches its origin once");
            load.call_origin(target, origin, call).await
        }
    };
    (answer, false)
}

/// One load in progress: what it holds, and what it knows so far.
struct Load<'c, 'q, Q: CachedQuery + ?Sized, D: Driver> {
    query: &'q Q,
    state: &'c CacheState,
    driver: &'c D,
    stats: Recorder<'c>,
    leader: Option<Leader<'c>>,
    lease: Held<'c, D>,
    /// A value past its freshness (with a fail-safe): served if the origin
    /// fails.
    fallback: Option<Stored<Q::Value>>,
    purpose: Purpose,
    /// The tag clock read before the origin, for an answer tagged from its
    /// value; `Err` once its read failed (the answer is then not stored).
    tag_clock: Option<Result<TagClock, ()>>,
    /// When this load began, and when its origin call did, on the
    /// invalidation clock of this process ([`FlightValue::unchecked_since`]).
    began: u64,
    origin_began: u64,
    /// When the current stretch of Redis work must be over.
    deadline: Instant,
}

/// The lease on the load lock a load holds, if any: released by the driver
/// should the load end without releasing it (its origin panicked, its
/// future was dropped).
struct Held<'c, D: Driver> {
    lease: Option<Lease>,
    driver: &'c D,
}

impl<D: Driver> Drop for Held<'_, D> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.driver.release(lease);
        }
    }
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

/// What joining the key's flight ended in.
enum Flown<V, E> {
    /// Another caller's answer (or its origin's error), taken.
    Answer(Answer<V, E>),
    /// This load leads the flight; `reread` when it took it over from a
    /// leader who left (who may have stored an answer first).
    Lead { reread: bool },
    /// The flight's answer is of another query type or error type under
    /// this key (see `registry::check`): this load calls its origin alone.
    Alone,
}

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

/// What a tag check of another caller's answer ended in.
enum Checked<V, E> {
    /// None of its tags was bumped since its fill began: served.
    Serve(Answer<V, E>),
    /// One was: not served.
    Bumped,
}

impl<'c, Q, D> Load<'c, '_, Q, D>
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize + DeserializeOwned,
    D: Driver,
{
    /// Reads the key: the load ends in a hit (or an error), or goes on to
    /// the origin for the returned target.
    async fn read<E>(&mut self) -> Result<Target, (Answer<Q::Value, E>, bool)> {
        let refresh = self.purpose.is_refresh();
        let mut read = match self.state.keyed_read(self.query) {
            Ok(read) => read.naming_entry(refresh),
            Err(error) => return Err((Err(error.into()), false)),
        };
        match driver::exchange_by(self.driver, &mut read, self.deadline).await {
            Ok(Read::Hit {
                stored,
                local,
                entry,
            }) => {
                let due = match self.purpose {
                    Purpose::Load => false,
                    Purpose::Refreshable(eager) | Purpose::Refresh(eager) => {
                        self.state.refresh_due::<Q>(eager, stored.fresh_until)
                    }
                };
                match (self.purpose, entry) {
                    // Still in its window: load it again.
                    (Purpose::Refresh(_), Some(entry)) if due => Ok(Target::Entry(entry)),
                    // Reloaded since the hit that asked for it (a refresh's
                    // read always names its entry).
                    (Purpose::Refresh(_), _) => Err((Ok(stored.value), false)),
                    (Purpose::Load | Purpose::Refreshable(_), _) => {
                        self.stats.hit(local);
                        Err((Ok(stored.value), due))
                    }
                }
            }
            Ok(Read::Miss { entry, missed }) => {
                match missed {
                    // Past its freshness: reloaded, but at hand should the
                    // origin fail.
                    Missed::Stale(stored) => self.fallback = self.state.fallback(stored),
                    Missed::Rejected(reason) => self.stats.reject(reason),
                    Missed::Absent => {}
                }
                if !refresh {
                    self.stats.miss();
                }
                Ok(Target::Entry(entry))
            }
            Err(error) => self.degrade(error).map_err(|answer| (answer, false)),
        }
    }

    /// Redis failed with `error` before the key could be read: the origin
    /// answers, nothing is stored, unless the cache returns such errors
    /// (or the load is an eager refresh, whose answer has nowhere to go).
    fn degrade<E>(&mut self, error: CacheError<Infallible>) -> Result<Target, Answer<Q::Value, E>> {
        let degrades = !self.purpose.is_refresh() && self.state.degrades(&error);
        if !degrades {
            self.stats.error(&error);
            return Err(Err(error.with_origin()));
        }
        self.state.degraded(self.stats, &error);
        // With a fail-safe, what the level in process holds and nothing
        // known invalidated: served if fresh, else kept for an origin that
        // fails too.
        if let Some(stored) = self.state.outage_value(self.query) {
            if stored.is_fresh() {
                self.stats.stale();
                return Err(Ok(stored.value));
            }
            self.fallback = Some(stored);
        }
        match self.query.cache_key(0) {
            Ok(key) => Ok(Target::Unstored(key.as_str().into())),
            // Named once already: a key error here is a bug of the query type.
            Err(error) => Err(Err(GenerationError::from(error).into())),
        }
    }

    /// Joins the flight to `target`: leads it, or takes its answer once it
    /// lands, checked as this load's own read would be.
    async fn fly<E: Send + Sync + 'static>(&mut self, target: &Target) -> Flown<Q::Value, E> {
        loop {
            let waiter = match self.state.flights.join(target.key()) {
                Role::Lead(leader) => {
                    self.leader = Some(leader);
                    return Flown::Lead { reread: false };
                }
                Role::Wait(waiter) => waiter,
            };
            let waited = self.driver.wait(waiter).await;
            self.deadline = self.driver.deadline();
            let landed = match waited {
                Waited::Lead(leader) => {
                    self.leader = Some(leader);
                    return Flown::Lead { reread: true };
                }
                Waited::Landed(Landing::Error(error)) => match error.downcast::<E>() {
                    Ok(error) => {
                        self.stats.coalesced();
                        self.stats.error(&"the origin failed");
                        return Flown::Answer(Err(CacheError::Origin(error)));
                    }
                    Err(_) => return Flown::Alone,
                },
                Waited::Landed(Landing::Value(landed)) => landed,
            };
            let Some(landed) = landed.downcast_ref::<FlightValue<Q::Value>>() else {
                return Flown::Alone;
            };
            // Its origin call began before a bump that ended before this
            // load began: what that skipped check would have caught.
            if landed.unchecked_since.is_some_and(|at| at < self.began) {
                continue;
            }
            let (value, tags) = (landed.value.clone(), landed.tags.clone());
            match self.check(value, tags).await {
                Ok(Checked::Serve(answer)) => return Flown::Answer(answer),
                Ok(Checked::Bumped) => continue,
                Err(error) => return Flown::Answer(Err(error)),
            }
        }
    }

    /// Leading the flight to `entry`, missed: read again if the flight was
    /// taken over, then through the load lock if the cache has one. An
    /// answer found on the way ends the load; `None`: on to the origin.
    async fn lead<E>(&mut self, entry: &Entry, reread: bool) -> Option<Answer<Q::Value, E>> {
        if reread {
            let mut batch = Batch::default();
            entry.get(&mut batch);
            let replies = self.driver.send(batch, self.deadline).await;
            match self.found(entry, replies, 0).await {
                Ok(Some(answer)) => return Some(answer),
                Ok(None) => {}
                Err(error) => return Some(Err(error)),
            }
        }
        let lock = self.state.lock?;
        self.locked(entry, lock).await
    }

    /// Takes the load lock, reading the entry again in the same batch, until
    /// the lock is taken, the entry is found or the wait is over (`None`:
    /// on to the origin).
    async fn locked<E>(&mut self, entry: &Entry, lock: LoadLock) -> Option<Answer<Q::Value, E>> {
        let deadline = Instant::now() + lock.wait();
        loop {
            let lease = Lease::on(entry);
            let mut batch = Batch::default();
            batch.push(lease.take(lock.lease()));
            entry.get(&mut batch);
            // Held from before it is sent: a load dropped meanwhile
            // releases it.
            self.lease.lease = Some(lease);
            let replies = self.driver.send(batch, self.deadline).await;
            let taken = match &replies {
                Ok(replies) => match &replies[0] {
                    Ok(Value::Nil) => false,
                    Ok(_) => true,
                    Err(error) => {
                        self.lease.lease = None;
                        let error = BackendError::refused(error.clone());
                        self.stats.error(&error);
                        return Some(Err(error.into()));
                    }
                },
                Err(_) => false,
            };
            if !taken {
                self.lease.lease = None;
            }
            match self.found(entry, replies, 1).await {
                Ok(Some(answer)) => return Some(self.end(answer).await),
                Ok(None) => {}
                Err(error) => return Some(self.end(Err(error)).await),
            }
            if self.lease.lease.is_some() || Instant::now() >= deadline {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            self.driver.sleep(lock.poll().min(left)).await;
            self.deadline = self.driver.deadline();
        }
    }

    /// The entry in reply `at`, served (and landed for this load's flight)
    /// if fresh and its tags unchanged; `None` when absent, rejected
    /// (counted), stale or bumped.
    async fn found<E>(
        &mut self,
        entry: &Entry,
        replies: Sent,
        at: usize,
    ) -> Result<Option<Answer<Q::Value, E>>, CacheError<E>> {
        let judged = replies.and_then(|mut replies| {
            let reply = std::mem::replace(&mut replies[at], Ok(Value::Nil));
            entry.judge(reply).map_err(BackendError::refused)
        });
        let stored = match judged {
            Ok(Found::Value(stored)) if stored.is_fresh() => stored,
            Ok(Found::Value(_) | Found::Absent) => return Ok(None),
            Ok(Found::Rejected(reason)) => {
                self.stats.reject(reason);
                return Ok(None);
            }
            Err(error) => {
                self.stats.error(&error);
                return Err(error.into());
            }
        };
        match self.check(stored.value, stored.tags).await? {
            Checked::Serve(answer) => Ok(Some(answer)),
            Checked::Bumped => Ok(None),
        }
    }

    /// Serves `value`, another caller's answer (landed for the flight this
    /// load leads, if any), if it has no tags or none of them was bumped
    /// since its fill began (read now, unless the counters are all kept in
    /// process).
    async fn check<E>(
        &mut self,
        value: Q::Value,
        tags: Tagged,
    ) -> Result<Checked<Q::Value, E>, CacheError<E>> {
        if let Some(stamp) = &tags {
            let mut check = match QueryCounters::of(self.query) {
                Ok(counters) => TagCheck::of(counters.counters(), stamp, &self.state.source),
                // Named once already: a key error here is a bug of the query type.
                Err(error) => return Err(error.into()),
            };
            let unchanged = match check.is_done() {
                true => check.unchanged(),
                false => match driver::exchange_by(self.driver, &mut check, self.deadline).await {
                    Ok(unchanged) => unchanged,
                    Err(error) => {
                        let error = CacheError::from(error);
                        self.stats.error(&error);
                        return Err(error.with_origin());
                    }
                },
            };
            if !unchanged {
                return Ok(Checked::Bumped);
            }
        }
        self.stats.coalesced();
        self.land_value(&value, tags, false);
        Ok(Checked::Serve(Ok(value)))
    }

    /// Calls the origin for `target` and stores its answer there; an
    /// answer tagged from its value has the tag clock read first.
    async fn call_origin<E, F, C, Called>(
        &mut self,
        target: Target,
        origin: F,
        call: C,
    ) -> Answer<Q::Value, E>
    where
        E: Send + Sync + 'static,
        C: FnOnce(F, Option<Duration>) -> Called,
        Called: Future<Output = Option<Result<Q::Value, E>>>,
    {
        if Q::VALUE_TAGS
            && matches!(target, Target::Entry(_))
            && let Err(answer) = self.read_tag_clock().await
        {
            return self.end(answer).await;
        }
        self.stats.load();
        self.origin_began = self.state.source.invalidations.now();
        let soft_timeout = self.fallback.as_ref().and(self.state.soft_timeout);
        let answer = call(origin, soft_timeout).await;
        self.deadline = self.driver.deadline();
        match (answer, target) {
            (None, _) => {
                let stale = self.fallback.take();
                let stale = stale.expect("a soft timeout is given only with a stale value at hand");
                self.serve_stale(stale).await
            }
            (Some(Ok(value)), Target::Unstored(_)) => {
                self.land_value(&value, None, true);
                Ok(value)
            }
            (Some(Ok(value)), Target::Entry(entry)) => self.store(&entry, value).await,
            (Some(Err(error)), _) => match self.fallback.take() {
                Some(stale) => self.serve_stale(stale).await,
                None => {
                    self.stats.error(&"the origin failed");
                    let error = Arc::new(error);
                    self.land(Landing::Error(error.clone()));
                    self.end(Err(CacheError::Origin(error))).await
                }
            },
        }
    }

    /// Reads the tag clock an answer tagged from its value is stored with;
    /// should that fail, the answer is still returned (reported, not
    /// stored), unless the cache returns such errors.
    async fn read_tag_clock<E>(&mut self) -> Result<(), Answer<Q::Value, E>> {
        let counters = match QueryCounters::of(self.query) {
            Ok(counters) => counters,
            // Named once already: a key error here is a bug of the query type.
            Err(error) => return Err(Err(error.into())),
        };
        let mut clock = ClockRead::new(counters.counters(), self.state.source.topology);
        let read = driver::exchange_by(self.driver, &mut clock, self.deadline).await;
        match read.map_err(CacheError::from) {
            Ok(since) => self.tag_clock = Some(Ok(since)),
            Err(error) if self.state.degrades(&error) => {
                self.state.degraded(self.stats, &error);
                self.tag_clock = Some(Err(()));
            }
            Err(error) => {
                self.stats.error(&error);
                return Err(Err(error.with_origin()));
            }
        }
        Ok(())
    }

    /// Stores `value` in `entry` (its `SET`, what keeps its tag counters as
    /// long, the lease's release, in one batch), then lands it, so that a
    /// caller arriving meanwhile finds the flight and not yet an empty key.
    /// A value that cannot be stored is served all the same.
    async fn store<E>(&mut self, entry: &Entry, value: Q::Value) -> Answer<Q::Value, E> {
        let tags = match self.stamp(&value) {
            Ok(tags) => tags,
            Err(failure) => return self.unstored(value, failure).await,
        };
        let lifetime = self.state.lifetime::<Q>();
        let (set, fresh_until) = match entry.set(&value, lifetime, tags.as_deref()) {
            Ok(set) => set,
            Err(error) => {
                let failure = CacheError::Unstorable(Box::new(error));
                return self.unstored(value, Some(failure)).await;
            }
        };
        let mut batch = Batch::default();
        batch.push(set);
        if self.state.source.tag_lifetime.is_some() {
            let counters = match QueryCounters::of(self.query) {
                Ok(counters) => counters,
                // Named once already: a key error here is a bug of the query type.
                Err(error) => return self.unstored(value, Some(error.into())).await,
            };
            let value_tags = tags.as_deref().map(|stamp| &stamp.tags);
            for keep in keep_tags(counters.counters(), value_tags, lifetime.kept()) {
                batch.push(keep);
            }
        }
        self.state
            .keep_local::<Q>(entry, &value, fresh_until, tags.clone());
        if let Some(lease) = &self.lease.lease {
            batch.push(lease.release());
        }
        let replies = self.driver.send(batch, self.deadline).await;
        if let Some(failure) = failure(replies) {
            // The answer is still returned: reported, not raised.
            self.state.degraded(self.stats, &failure);
        }
        self.lease.lease = None;
        self.land_value(&value, tags, false);
        Ok(value)
    }

    /// Serves `value`, which is not stored (`failure` says why, if it is to
    /// be reported).
    async fn unstored<E>(
        &mut self,
        value: Q::Value,
        failure: Option<CacheError>,
    ) -> Answer<Q::Value, E> {
        if let Some(failure) = failure {
            self.state.degraded(self.stats, &failure);
        }
        // Its tags, if it has any, are not known to be unbumped.
        self.land_value(&value, None, Q::VALUE_TAGS);
        self.end(Ok(value)).await
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

    /// Serves (and hands the waiters) a value past its freshness, never
    /// stored again.
    async fn serve_stale<E>(&mut self, stale: Stored<Q::Value>) -> Answer<Q::Value, E> {
        self.stats.stale();
        self.land(Landing::Value(Arc::new(FlightValue {
            value: stale.value.clone(),
            tags: stale.tags,
            unchecked_since: None,
        })));
        self.end(Ok(stale.value)).await
    }

    /// Ends with `answer`, releasing the lock first if this load holds it
    /// (left to the lease's expiry should that fail).
    async fn end<E>(&mut self, answer: Answer<Q::Value, E>) -> Answer<Q::Value, E> {
        if let Some(lease) = &self.lease.lease {
            let released = self.driver.send(lease.release_batch(), self.deadline).await;
            self.lease.lease = None;
            if let Some(failure) = failure(released) {
                self.state.degraded(self.stats, &failure);
            }
        }
        answer
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
