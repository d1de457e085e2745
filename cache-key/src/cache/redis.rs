//! The typed cache in Redis or a Redis Cluster: [`RedisCache`].

use std::any::Any;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ::redis::{Cmd, ConnectionLike, Script, ScriptInvocation, cmd};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::envelope::{self, Expected};
use super::{CacheError, CachedQuery, Stats, StatsCounters, Ttls};
use crate::canonical::TenantValue;
use crate::generation::{GenerationError, GenerationScope, GenerationStore};
use crate::key::Key;

/// A query's key and readable key at the generation read before the origin.
pub(super) struct Named {
    pub(super) key: String,
    query: String,
    schema: u32,
    value_type: &'static str,
}

impl Named {
    /// `query`'s names at `generation`.
    pub(super) fn new<Q: CachedQuery + ?Sized>(
        query: &Q,
        generation: u64,
    ) -> Result<Named, GenerationError> {
        let mut key = String::new();
        query.write_key(generation, &mut key)?;
        let mut text = String::new();
        query.write_readable_key(generation, &mut text)?;
        Ok(Named {
            key,
            query: text,
            schema: Q::KEY_SCHEMA.schema(),
            value_type: std::any::type_name::<Q::Value>(),
        })
    }

    pub(super) fn expected(&self) -> Expected<'_> {
        Expected {
            schema: self.schema,
            value_type: self.value_type,
            query: &self.query,
        }
    }

    /// The name of the [`LoadLock`] on this key: the key and `#lock`. Never
    /// a key, since every key part escapes `#`, and in the key's cluster
    /// slot when the key has a hash tag.
    pub(super) fn lock_name(&self) -> String {
        format!("{}#lock", self.key)
    }

    /// The value in `bytes` (what `GET` returned) if the entry may be
    /// served; a rejected entry is counted in `stats` and read as absent.
    pub(super) fn served<T: DeserializeOwned>(
        &self,
        bytes: Option<Vec<u8>>,
        stats: &StatsCounters,
    ) -> Option<T> {
        match envelope::decode(&bytes?, &self.expected()) {
            Ok(value) => Some(value),
            Err(reason) => {
                stats.reject(reason);
                None
            }
        }
    }
}

/// `ttl` in milliseconds for `SET ... PX`: at least 1 (Redis refuses
/// `PX 0`; a zero TTL still expires at once), at most `u64::MAX`.
pub(super) fn px(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// An optional lock in Redis around origin calls, so that processes
/// sharing a Redis load a cold key once between them (off by default; see
/// [`RedisCache::with_lock`]).
///
/// The process that misses first takes the lock with `SET <key>#lock
/// <token> NX PX <lease>`, asks the origin, stores the answer, and releases
/// the lock with a script that deletes it only if it still holds its own
/// token (a lock that outlived its lease and was taken by another process is
/// never released by the first). The others poll the entry every `poll`: an
/// answer found there is served (counted as coalesced); a lock freed without
/// an answer (the origin failed) is taken by the next poller. After `wait`
/// without an answer a process **asks the origin anyway** (counted as a
/// load): the lock bounds how long a request waits, it never turns a slow
/// origin into an error.
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
    pub fn poll(mut self, poll: Duration) -> Self {
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

    pub(super) fn poll_interval(&self) -> Duration {
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

/// A token no other lock owner has: this process, the time and a counter.
pub(super) fn lock_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{nanos}-{n}", std::process::id())
}

/// What a flight's leader hands its waiters: a `Result<Q::Value, Arc<E>>`
/// (type-erased, checked on the way out), or `None` if it was abandoned
/// (the leader panicked), after which each waiter asks the origin itself.
type Landing = Option<Arc<dyn Any + Send + Sync>>;

/// One origin call in progress for one key.
#[derive(Default)]
struct Flight {
    landing: Mutex<Option<Landing>>,
    landed: Condvar,
}

/// The commands both caches send, built in one place.
impl Named {
    /// `GET key`.
    pub(super) fn get(&self) -> Cmd {
        cmd("GET").arg(&self.key).take()
    }

    /// `SET key <envelope> PX ttl`.
    pub(super) fn set<T: Serialize>(&self, value: &T, ttl: Duration) -> serde_json::Result<Cmd> {
        let bytes = envelope::encode(&self.expected(), value)?;
        Ok(cmd("SET")
            .arg(&self.key)
            .arg(bytes)
            .arg("PX")
            .arg(px(ttl))
            .take())
    }

    /// `SET <key>#lock token NX PX lease`; a reply of nil means another
    /// owner holds the lock.
    pub(super) fn take_lock(&self, token: &str, lease: Duration) -> Cmd {
        cmd("SET")
            .arg(self.lock_name())
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(px(lease))
            .take()
    }

    /// The release script's call for this key's lock and `token`.
    pub(super) fn release_lock<'a>(&self, token: &str) -> ScriptInvocation<'a> {
        static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SCRIPT));
        let mut invocation = RELEASE.prepare_invoke();
        invocation.key(self.lock_name()).arg(token);
        invocation
    }
}

/// What a leader hands its waiters for `result`: the value or the origin's
/// error; `None` for another error (the lock's), which is the leader's own.
pub(super) fn landing<V: Clone, E>(result: &Result<V, CacheError<E>>) -> Option<Result<V, Arc<E>>> {
    match result {
        Ok(value) => Some(Ok(value.clone())),
        Err(CacheError::Origin(e)) => Some(Err(e.clone())),
        Err(_) => None,
    }
}

/// A waiter's answer from what its leader landed, counted in `stats`;
/// `None` when nothing usable landed (abandoned, or another error type).
pub(super) fn landed<V: Clone + 'static, E: 'static>(
    landed: Option<&(dyn Any + Send + Sync)>,
    stats: &StatsCounters,
) -> Option<Result<V, CacheError<E>>> {
    let result = landed?.downcast_ref::<Result<V, Arc<E>>>()?;
    stats.coalesced();
    Some(result.clone().map_err(|e| {
        stats.error();
        CacheError::Origin(e)
    }))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere never leaves these maps or connections half-written
    // in a way that matters: a flight is removed by its guard either way.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends a flight when the leader is done, also when it unwinds.
struct Leader<'a> {
    flights: &'a Mutex<HashMap<Key, Arc<Flight>>>,
    key: Key,
    flight: Arc<Flight>,
}

impl Leader<'_> {
    fn land(&self, landing: Arc<dyn Any + Send + Sync>) {
        *lock(&self.flight.landing) = Some(Some(landing));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        lock(self.flights).remove(&self.key);
        let mut landing = lock(&self.flight.landing);
        if landing.is_none() {
            *landing = Some(None);
        }
        self.flight.landed.notify_all();
    }
}

/// A typed cache whose entries live in Redis (a single node or a Redis
/// Cluster, any [`ConnectionLike`]).
///
/// Every entry is written with `SET key value PX ttl` in a JSON envelope
/// (format version, key schema, the value type's name, the query's readable
/// key) that is checked on every read: an entry another release, service or
/// client bug put under the key is a miss counted under its
/// [`RejectReason`](super::RejectReason), never a wrong value.
///
/// Concurrent [`get_or_load`](Self::get_or_load) misses of one key **in this
/// process** call the origin once (one flight per key); other processes may
/// each call it once too, unless the cache has a [`LoadLock`]
/// ([`with_lock`](Self::with_lock)).
pub struct RedisCache<C, S> {
    connection: Mutex<C>,
    store: S,
    ttls: Ttls,
    stats: StatsCounters,
    flights: Mutex<HashMap<Key, Arc<Flight>>>,
    lock: Option<LoadLock>,
}

pub(super) fn backend<E>(error: impl std::error::Error + Send + Sync + 'static) -> CacheError<E> {
    CacheError::Backend(Box::new(error))
}

pub(super) fn infallible<E>(error: CacheError<Infallible>) -> CacheError<E> {
    match error {
        CacheError::Generation(e) => CacheError::Generation(e),
        CacheError::Backend(e) => CacheError::Backend(e),
        CacheError::Origin(never) => match *never {},
    }
}

impl<C: ConnectionLike, S: GenerationStore> RedisCache<C, S> {
    /// A cache that keeps entries through `connection`, named by `store`
    /// (which may keep its counters on the same servers, through another
    /// connection).
    pub fn new(connection: C, store: S) -> Self {
        RedisCache {
            connection: Mutex::new(connection),
            store,
            ttls: Ttls::default(),
            stats: StatsCounters::default(),
            flights: Mutex::new(HashMap::new()),
            lock: None,
        }
    }

    /// Takes a [`LoadLock`] in Redis around each origin call, so that
    /// processes sharing this Redis load a cold key once between them.
    pub fn with_lock(mut self, lock: LoadLock) -> Self {
        self.lock = Some(lock);
        self
    }

    shared_methods!(
        "leave Redis by TTL, or by [`RedisGenerations::sweep`](crate::RedisGenerations::sweep)"
    );

    /// The connection entries are read and written through.
    pub fn connection(&self) -> MutexGuard<'_, C> {
        lock(&self.connection)
    }

    /// `query`'s key and readable key at its current generation.
    fn name<Q: CachedQuery + ?Sized>(&self, query: &Q) -> Result<Named, GenerationError> {
        let generation = self.store.generation_for(query);
        generation
            .and_then(|generation| Named::new(query, generation))
            .inspect_err(|_| self.stats.error())
    }

    /// The entry under `named`, if it is one this query may serve; a
    /// rejected entry is counted and read as absent.
    fn read<Q>(&self, named: &Named) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let bytes: Option<Vec<u8>> = named
            .get()
            .query(&mut *self.connection())
            .inspect_err(|_| self.stats.error())
            .map_err(backend)?;
        Ok(named.served(bytes, &self.stats))
    }

    fn write<Q>(&self, named: &Named, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
    {
        let result = named
            .set(value, self.ttl_for::<Q>())
            .map_err(backend)
            .and_then(|set| set.query::<()>(&mut *self.connection()).map_err(backend));
        result.inspect_err(|_| self.stats.error())
    }

    /// `query`'s cached answer, if a valid one is stored at its current
    /// generation.
    pub fn get<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let named = self.name(query)?;
        let value = self.read::<Q>(&named)?;
        match value {
            Some(_) => self.stats.hit(),
            None => self.stats.miss(),
        }
        Ok(value)
    }

    /// Stores `value` as `query`'s answer at its current generation, for
    /// its type's TTL.
    pub fn insert<Q>(&self, query: &Q, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
    {
        let named = self.name(query)?;
        self.write::<Q>(&named, value)
    }

    /// `query`'s answer: from Redis, or from `origin`, called once per key
    /// in this process however many callers miss it at once, and stored
    /// under the key named **before** the call. An origin error reaches
    /// every caller waiting on that call and is not stored. A failed write
    /// is counted as an error, and the answer is still returned; a failed
    /// read is returned as [`CacheError::Backend`] without asking the origin.
    pub fn get_or_load<Q, E, F>(&self, query: &Q, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        let named = self.name(query)?;
        if let Some(value) = self.read::<Q>(&named).map_err(infallible)? {
            self.stats.hit();
            return Ok(value);
        }
        self.stats.miss();
        let key = Key::from_canonical(named.key.clone());
        let (flight, leading) = {
            let mut flights = lock(&self.flights);
            match flights.get(&key) {
                Some(flight) => (flight.clone(), false),
                None => {
                    let flight = Arc::new(Flight::default());
                    flights.insert(key.clone(), flight.clone());
                    (flight, true)
                }
            }
        };
        if !leading {
            let mut landing = lock(&flight.landing);
            while landing.is_none() {
                landing = flight
                    .landed
                    .wait(landing)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            let landing = landing.clone().flatten();
            if let Some(result) = landed(landing.as_deref(), &self.stats) {
                return result;
            }
            // The leader was abandoned or had another error type: ask alone.
            return self.load_and_store::<Q, E, F>(&named, origin);
        }
        let leader = Leader {
            flights: &self.flights,
            key,
            flight,
        };
        // A flight that landed between our read and ours may have stored it.
        if let Some(value) = self.read::<Q>(&named).map_err(infallible)? {
            self.stats.coalesced();
            leader.land(Arc::new(Ok::<_, Arc<E>>(value.clone())));
            return Ok(value);
        }
        let result = self.load_locked::<Q, E, F>(&named, origin);
        // A lock that could not be taken or checked is this caller's error;
        // the waiters, finding no landing, each try themselves.
        let Some(shared) = landing(&result) else {
            return result;
        };
        leader.land(Arc::new(shared));
        result
    }

    fn load_and_store<Q, E, F>(&self, named: &Named, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        self.stats.load();
        let value = origin().map_err(|e| {
            self.stats.error();
            CacheError::Origin(Arc::new(e))
        })?;
        // Counted in `write`; the caller still gets the origin's answer.
        let _ = self.write::<Q>(named, &value);
        Ok(value)
    }

    /// [`load_and_store`](Self::load_and_store) under the cache's
    /// [`LoadLock`], if it has one (see there for what waiting does).
    fn load_locked<Q, E, F>(&self, named: &Named, origin: F) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        F: FnOnce() -> Result<Q::Value, E>,
    {
        let Some(lock) = self.lock else {
            return self.load_and_store::<Q, E, F>(named, origin);
        };
        let token = lock_token();
        let deadline = Instant::now() + lock.wait();
        let mut first = true;
        loop {
            if !first && let Some(value) = self.read::<Q>(named).map_err(infallible)? {
                self.stats.coalesced();
                return Ok(value);
            }
            first = false;
            if self
                .try_lock(named, &token, lock.lease())
                .map_err(infallible)?
            {
                // Another owner may have stored the answer just before it
                // released the lock we now hold.
                let result = match self.read::<Q>(named).map_err(infallible) {
                    Ok(Some(value)) => {
                        self.stats.coalesced();
                        Ok(value)
                    }
                    Ok(None) => self.load_and_store::<Q, E, F>(named, origin),
                    Err(e) => Err(e),
                };
                self.unlock(named, &token);
                return result;
            }
            let now = Instant::now();
            if now >= deadline {
                return self.load_and_store::<Q, E, F>(named, origin);
            }
            thread::sleep(lock.poll_interval().min(deadline - now));
        }
    }

    /// `SET name token NX PX lease`: whether this caller now holds the lock.
    fn try_lock(
        &self,
        named: &Named,
        token: &str,
        lease: Duration,
    ) -> Result<bool, CacheError<Infallible>> {
        let reply: Option<String> = named
            .take_lock(token, lease)
            .query(&mut *self.connection())
            .inspect_err(|_| self.stats.error())
            .map_err(backend)?;
        Ok(reply.is_some())
    }

    /// Releases the lock if it is still this caller's; a failure is counted
    /// and otherwise left to the lease.
    fn unlock(&self, named: &Named, token: &str) {
        let released: Result<i64, _> = named.release_lock(token).invoke(&mut *self.connection());
        if released.is_err() {
            self.stats.error();
        }
    }
}
