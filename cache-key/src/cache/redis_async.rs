//! The typed cache in Redis on async connections: [`AsyncRedisCache`]
//! (feature `redis-async`).

use std::any::Any;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ::redis::aio::ConnectionLike;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::time::Instant;

use super::redis::{LoadLock, Named, backend, infallible, landed, landing, lock_token};
use super::{CacheError, CachedQuery, Stats, StatsCounters, Ttls};
use crate::canonical::TenantValue;
use crate::generation::{AsyncGenerationStore, GenerationError, GenerationScope};
use crate::key::Key;

/// What a flight's leader hands its waiters: a `Result<Q::Value, Arc<E>>`,
/// type-erased and checked on the way out. A flight whose sender is dropped
/// without one was abandoned (the leader's future was dropped, or Redis
/// failed it): its waiters start over, and one of them leads.
type Landing = Option<Arc<dyn Any + Send + Sync>>;

type Flights = Mutex<HashMap<Key, watch::Receiver<Landing>>>;

fn lock(flights: &Flights) -> MutexGuard<'_, HashMap<Key, watch::Receiver<Landing>>> {
    // The map is changed by single inserts and removes: never half-written.
    flights.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends a flight when its leader is done, also when its future is dropped.
struct Leader<'a> {
    flights: &'a Flights,
    key: Key,
    sender: watch::Sender<Landing>,
}

impl Leader<'_> {
    fn land(&self, landing: Arc<dyn Any + Send + Sync>) {
        self.sender.send_replace(Some(landing));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        // Only a leader inserts its key, and only when absent: the entry is
        // this flight's. Dropping the sender then wakes every waiter.
        lock(self.flights).remove(&self.key);
    }
}

/// Whether a caller leads the load of a key or waits on another's.
enum Role {
    Lead(watch::Sender<Landing>),
    Wait(watch::Receiver<Landing>),
}

/// The async twin of [`RedisCache`](super::RedisCache) (feature
/// `redis-async`): the same envelope and checks, the same rejections and
/// [`Stats`], on the `redis` crate's async connections, for async services
/// (an axum handler) whose threads must not block on Redis.
///
/// `C` is any cheap-to-clone async connection: a
/// [`MultiplexedConnection`](::redis::aio::MultiplexedConnection), a
/// `ConnectionManager` (the `redis` crate's `connection-manager` feature),
/// or a [`cluster_async::ClusterConnection`](::redis::cluster_async::ClusterConnection);
/// each call clones it, so concurrent calls share its socket. The futures
/// are `Send` and need a tokio runtime (the `redis` crate's and, with a
/// [`LoadLock`], tokio's timer).
///
/// # Generations
///
/// Keys are named by an [`AsyncGenerationStore`], read **before** the
/// origin is asked:
///
/// - [`AsyncRedisGenerations`](crate::generation::AsyncRedisGenerations):
///   counters in Redis, shared by every process (a bump anywhere is seen by
///   the next read everywhere), at the price of one more round trip (`MGET`)
///   per read, awaited rather than blocking.
/// - [`MemoryGenerations`](crate::MemoryGenerations): counters in this
///   process, read without waiting (no round trip), but a bump is seen only
///   by this process: right for a single instance, wrong for several
///   instances sharing one Redis, which would keep serving entries another
///   instance invalidated.
///
/// A sync store on a blocking connection (`RedisGenerations`) is not
/// accepted: its reads would block the runtime's threads.
///
/// # One origin call per key
///
/// Concurrent [`get_or_load`](Self::get_or_load) misses of one key in this
/// process await one origin call; its error reaches each of them and is not
/// stored. A leader whose future is dropped (a client that went away)
/// abandons its flight and one of its waiters takes over. With a
/// [`LoadLock`] ([`with_lock`](Self::with_lock)), processes sharing the Redis
/// load a cold key once between them.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use cache_key::CacheKey;
/// use cache_key::cache::{AsyncRedisCache, CachedQuery, LoadLock};
/// use cache_key::generation::AsyncRedisGenerations;
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", hash_tag)]
/// struct Search { #[tenant] branch: u32, #[criterion] title: String }
///
/// impl CachedQuery for Search {
///     type Value = Vec<String>;
///     const TTL: Duration = Duration::from_secs(300);
/// }
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let connection = client.get_multiplexed_async_connection().await?;
/// let cache = AsyncRedisCache::new(connection.clone(), AsyncRedisGenerations::new(connection))
///     .with_lock(LoadLock::new(Duration::from_secs(5), Duration::from_secs(2)));
///
/// let query = Search { branch: 2, title: "Dune".into() };
/// let titles = cache
///     .get_or_load(&query, || async { Ok::<_, std::io::Error>(vec!["Dune".to_owned()]) })
///     .await?;
/// cache.invalidate_tenant::<Search>(&[&2u32]).await?;
/// # Ok(()) }
/// ```
pub struct AsyncRedisCache<C, S> {
    connection: C,
    store: S,
    ttls: Ttls,
    stats: StatsCounters,
    flights: Flights,
    lock: Option<LoadLock>,
}

impl<C, S> AsyncRedisCache<C, S>
where
    C: ConnectionLike + Clone + Send + Sync,
    S: AsyncGenerationStore,
{
    /// A cache that keeps entries through `connection`, named by `store`.
    pub fn new(connection: C, store: S) -> Self {
        AsyncRedisCache {
            connection,
            store,
            ttls: Ttls::default(),
            stats: StatsCounters::default(),
            flights: Mutex::new(HashMap::new()),
            lock: None,
        }
    }

    /// Overrides `Q`'s time to live ([`CachedQuery::TTL`]) in this cache.
    pub fn with_ttl<Q: CachedQuery + ?Sized>(mut self, ttl: Duration) -> Self {
        self.ttls.set::<Q>(ttl);
        self
    }

    /// Takes a [`LoadLock`] in Redis around each origin call, so that
    /// processes sharing this Redis load a cold key once between them.
    pub fn with_lock(mut self, lock: LoadLock) -> Self {
        self.lock = Some(lock);
        self
    }

    /// The time to live this cache gives `Q`'s entries.
    pub fn ttl_for<Q: CachedQuery + ?Sized>(&self) -> Duration {
        self.ttls.get::<Q>()
    }

    /// The generation store that names and invalidates entries.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// A clone of the connection entries are read and written through.
    pub fn connection(&self) -> C {
        self.connection.clone()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    /// Bumps `scope`'s generation: its entries are never read again (and
    /// leave Redis by TTL).
    pub async fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError> {
        self.store.invalidate(scope).await
    }

    /// Invalidates every entry of `Q`'s namespace.
    pub async fn invalidate_namespace<Q: CachedQuery + ?Sized>(
        &self,
    ) -> Result<(), GenerationError> {
        self.invalidate(&GenerationScope::namespace::<Q>()).await
    }

    /// Invalidates every entry of `Q`'s namespace for one tenant (or its
    /// leading values).
    pub fn invalidate_tenant<Q: CachedQuery + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + '_ {
        let scope = GenerationScope::tenant::<Q>(tenant);
        async move { self.invalidate(&scope?).await }
    }

    /// Invalidates every entry of `Q`'s operation for one whole tenant.
    pub fn invalidate_operation<Q: CachedQuery + ?Sized>(
        &self,
        tenant: &[&dyn TenantValue],
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + '_ {
        let scope = GenerationScope::operation::<Q>(tenant);
        async move { self.invalidate(&scope?).await }
    }

    /// `query`'s key and readable key at its current generation.
    async fn name<Q>(&self, query: &Q) -> Result<Named, GenerationError>
    where
        Q: CachedQuery + Sync + ?Sized,
    {
        let generation = self.store.generation_for(query).await;
        generation
            .and_then(|generation| Named::new(query, generation))
            .inspect_err(|_| self.stats.error())
    }

    /// The entry under `named`, if it is one this query may serve.
    async fn read<Q>(&self, named: &Named) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let bytes: Option<Vec<u8>> = named
            .get()
            .query_async(&mut self.connection.clone())
            .await
            .inspect_err(|_| self.stats.error())
            .map_err(backend)?;
        Ok(named.served(bytes, &self.stats))
    }

    async fn write<Q>(&self, named: &Named, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
    {
        let written = match named.set(value, self.ttl_for::<Q>()) {
            Ok(set) => set
                .query_async::<()>(&mut self.connection.clone())
                .await
                .map_err(backend),
            Err(e) => Err(backend(e)),
        };
        written.inspect_err(|_| self.stats.error())
    }

    /// `query`'s cached answer, if a valid one is stored at its current
    /// generation.
    pub async fn get<Q>(&self, query: &Q) -> Result<Option<Q::Value>, CacheError<Infallible>>
    where
        Q: CachedQuery + Sync + ?Sized,
        Q::Value: DeserializeOwned,
    {
        let named = self.name(query).await?;
        let value = self.read::<Q>(&named).await?;
        match value {
            Some(_) => self.stats.hit(),
            None => self.stats.miss(),
        }
        Ok(value)
    }

    /// Stores `value` as `query`'s answer at its current generation, for
    /// its type's TTL.
    pub async fn insert<Q>(&self, query: &Q, value: &Q::Value) -> Result<(), CacheError<Infallible>>
    where
        Q: CachedQuery + Sync + ?Sized,
        Q::Value: Serialize,
    {
        let named = self.name(query).await?;
        self.write::<Q>(&named, value).await
    }

    /// `query`'s answer: from Redis, or from the future `origin` returns,
    /// awaited once per key in this process however many callers miss it
    /// at once, and stored under the key named **before** the call. An
    /// origin error reaches every caller waiting on that call and is not
    /// stored. A failed write is counted as an error, and the answer is
    /// still returned; a failed read is returned as
    /// [`CacheError::Backend`] without asking the origin.
    pub async fn get_or_load<Q, E, F, Fut>(
        &self,
        query: &Q,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + Sync + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        E: Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Q::Value, E>>,
    {
        let named = self.name(query).await?;
        if let Some(value) = self.read::<Q>(&named).await.map_err(infallible)? {
            self.stats.hit();
            return Ok(value);
        }
        self.stats.miss();
        let key = Key::from_canonical(named.key.clone());
        let sender = loop {
            let role = {
                let mut flights = lock(&self.flights);
                match flights.get(&key) {
                    Some(receiver) => Role::Wait(receiver.clone()),
                    None => {
                        let (sender, receiver) = watch::channel(None);
                        flights.insert(key.clone(), receiver);
                        Role::Lead(sender)
                    }
                }
            };
            match role {
                Role::Lead(sender) => break sender,
                Role::Wait(mut receiver) => {
                    let landing = match receiver.wait_for(Option::is_some).await {
                        Ok(landing) => landing.clone(),
                        Err(_) => None,
                    };
                    if let Some(result) = landed(landing.as_deref(), &self.stats) {
                        return result;
                    }
                    // Abandoned, or a load with another error type: start
                    // over, leading if nobody else does.
                }
            }
        };
        let leader = Leader {
            flights: &self.flights,
            key,
            sender,
        };
        // A flight that landed between our read and ours may have stored it.
        if let Some(value) = self.read::<Q>(&named).await.map_err(infallible)? {
            self.stats.coalesced();
            leader.land(Arc::new(Ok::<_, Arc<E>>(value.clone())));
            return Ok(value);
        }
        let result = self.load_locked::<Q, E, F, Fut>(&named, origin).await;
        // A lock that could not be taken or checked is this caller's error;
        // the waiters, finding no landing, start over.
        let Some(shared) = landing(&result) else {
            return result;
        };
        leader.land(Arc::new(shared));
        result
    }

    async fn load_and_store<Q, E, F, Fut>(
        &self,
        named: &Named,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Q::Value, E>>,
    {
        self.stats.load();
        let value = origin().await.map_err(|e| {
            self.stats.error();
            CacheError::Origin(Arc::new(e))
        })?;
        // Counted in `write`; the caller still gets the origin's answer.
        let _ = self.write::<Q>(named, &value).await;
        Ok(value)
    }

    /// `load_and_store` under the cache's [`LoadLock`], if it has one.
    async fn load_locked<Q, E, F, Fut>(
        &self,
        named: &Named,
        origin: F,
    ) -> Result<Q::Value, CacheError<E>>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Q::Value, E>>,
    {
        let Some(lock) = self.lock else {
            return self.load_and_store::<Q, E, F, Fut>(named, origin).await;
        };
        let token = lock_token();
        let deadline = Instant::now() + lock.wait();
        let mut first = true;
        loop {
            if !first && let Some(value) = self.read::<Q>(named).await.map_err(infallible)? {
                self.stats.coalesced();
                return Ok(value);
            }
            first = false;
            if self
                .try_lock(named, &token, lock.lease())
                .await
                .map_err(infallible)?
            {
                // Another owner may have stored the answer just before it
                // released the lock we now hold.
                let result = match self.read::<Q>(named).await.map_err(infallible) {
                    Ok(Some(value)) => {
                        self.stats.coalesced();
                        Ok(value)
                    }
                    Ok(None) => self.load_and_store::<Q, E, F, Fut>(named, origin).await,
                    Err(e) => Err(e),
                };
                self.unlock(named, &token).await;
                return result;
            }
            let now = Instant::now();
            if now >= deadline {
                return self.load_and_store::<Q, E, F, Fut>(named, origin).await;
            }
            tokio::time::sleep(lock.poll_interval().min(deadline - now)).await;
        }
    }

    /// `SET name token NX PX lease`: whether this caller now holds the lock.
    async fn try_lock(
        &self,
        named: &Named,
        token: &str,
        lease: Duration,
    ) -> Result<bool, CacheError<Infallible>> {
        let reply: Option<String> = named
            .take_lock(token, lease)
            .query_async(&mut self.connection.clone())
            .await
            .inspect_err(|_| self.stats.error())
            .map_err(backend)?;
        Ok(reply.is_some())
    }

    /// Releases the lock if it is still this caller's; a failure is counted
    /// and otherwise left to the lease.
    async fn unlock(&self, named: &Named, token: &str) {
        let released: Result<i64, _> = named
            .release_lock(token)
            .invoke_async(&mut self.connection.clone())
            .await;
        if released.is_err() {
            self.stats.error();
        }
    }
}
