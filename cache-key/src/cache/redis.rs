//! The typed cache in Redis or a Redis Cluster: [`RedisCache`].

use std::any::Any;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ::redis::{ConnectionLike, cmd};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::envelope::{self, Expected};
use super::{CacheError, CachedQuery, Stats, StatsCounters, Ttls};
use crate::canonical::TenantValue;
use crate::generation::{GenerationError, GenerationScope, GenerationStore};
use crate::key::Key;

/// A query's key and readable key at the generation read before the origin.
struct Named {
    key: String,
    query: String,
    schema: u32,
    value_type: &'static str,
}

impl Named {
    fn expected(&self) -> Expected<'_> {
        Expected {
            schema: self.schema,
            value_type: self.value_type,
            query: &self.query,
        }
    }
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
/// each call it once too.
pub struct RedisCache<C, S> {
    connection: Mutex<C>,
    store: S,
    ttls: Ttls,
    stats: StatsCounters,
    flights: Mutex<HashMap<Key, Arc<Flight>>>,
}

fn backend<E>(error: impl std::error::Error + Send + Sync + 'static) -> CacheError<E> {
    CacheError::Backend(Box::new(error))
}

fn infallible<E>(error: CacheError<Infallible>) -> CacheError<E> {
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
        }
    }

    /// The generation store that names and invalidates entries.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The connection entries are read and written through.
    pub fn connection(&self) -> MutexGuard<'_, C> {
        lock(&self.connection)
    }

    /// Overrides `Q`'s time to live ([`CachedQuery::TTL`]) in this cache.
    pub fn with_ttl<Q: CachedQuery + ?Sized>(mut self, ttl: Duration) -> Self {
        self.ttls.set::<Q>(ttl);
        self
    }

    /// The time to live this cache gives `Q`'s entries.
    pub fn ttl_for<Q: CachedQuery + ?Sized>(&self) -> Duration {
        self.ttls.get::<Q>()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave Redis by TTL, or by [`RedisGenerations::sweep`](crate::RedisGenerations::sweep)).
    pub fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError> {
        self.store.invalidate(scope)
    }

    /// Invalidates every entry of `Q`'s namespace.
    pub fn invalidate_namespace<Q: CachedQuery + ?Sized>(&self) -> Result<(), GenerationError> {
        self.store.invalidate_namespace::<Q>()
    }

    /// Invalidates every entry of `Q`'s namespace for one tenant (or its
    /// leading values).
    pub fn invalidate_tenant<Q: CachedQuery + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> Result<(), GenerationError> {
        self.store.invalidate_tenant::<Q>(tenant)
    }

    /// Invalidates every entry of `Q`'s operation for one whole tenant.
    pub fn invalidate_operation<Q: CachedQuery + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> Result<(), GenerationError> {
        self.store.invalidate_operation::<Q>(tenant)
    }

    /// `query`'s key and readable key at its current generation.
    fn name<Q: CachedQuery + ?Sized>(&self, query: &Q) -> Result<Named, GenerationError> {
        let named = (|| {
            let generation = self.store.generation_for(query)?;
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
        })();
        named.inspect_err(|_: &GenerationError| self.stats.error())
    }

    /// The entry under `named`, if it is one this query may serve; a
    /// rejected entry is counted and read as absent.
    fn read<Q>(&self, named: &Named) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let bytes: Option<Vec<u8>> = cmd("GET")
            .arg(&named.key)
            .query(&mut *self.connection())
            .inspect_err(|_| self.stats.error())
            .map_err(backend)?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        match envelope::decode(&bytes, &named.expected()) {
            Ok(value) => Ok(Some(value)),
            Err(reason) => {
                self.stats.reject(reason);
                Ok(None)
            }
        }
    }

    fn write<Q>(&self, named: &Named, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
    {
        let result = (|| {
            let bytes = envelope::encode(&named.expected(), value).map_err(backend)?;
            // Redis refuses PX 0; a zero TTL still expires at once.
            let ttl = u64::try_from(self.ttl_for::<Q>().as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            cmd("SET")
                .arg(&named.key)
                .arg(bytes)
                .arg("PX")
                .arg(ttl)
                .query::<()>(&mut *self.connection())
                .map_err(backend)
        })();
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
            let landed = landing.clone().flatten();
            drop(landing);
            if let Some(result) = landed
                .as_deref()
                .and_then(|any| any.downcast_ref::<Result<Q::Value, Arc<E>>>())
            {
                self.stats.coalesced();
                return result.clone().map_err(|e| {
                    self.stats.error();
                    CacheError::Origin(e)
                });
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
        let result = self.load_and_store::<Q, E, F>(&named, origin);
        let shared: Result<Q::Value, Arc<E>> = match &result {
            Ok(value) => Ok(value.clone()),
            Err(CacheError::Origin(e)) => Err(e.clone()),
            // Not reached: load_and_store fails only with the origin's error.
            Err(_) => return result,
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
}
