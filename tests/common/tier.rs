//! The Redis tier under test through one interface, so that the same test
//! bodies run against the blocking driver (`RedisCache`, `RedisGenerations`
//! on a `RedisPool`) and the async one (`AsyncRedisCache`,
//! `AsyncRedisGenerations` on an `AsyncRedisPool`), on one server and on a
//! cluster.
//!
//! The async driver is run from the test's threads with `Handle::block_on`
//! on a runtime of its own: its futures, flights and timers are the async
//! ones, while a test body stays plain code that can start threads.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use cache_key::Scopes;
use cache_key::cache::{AsyncQueryCache, AsyncTypedCache, QueryCache, TypedCache};
use cache_key::cache::{CacheError, Stats};
use cache_key::generation::{AsyncGenerationStore, Counter, Counters, GenerationSum};
use cache_key::redis::{
    AsyncRedisCache, AsyncRedisGenerations, AsyncRedisPool, EagerRefresh, FailSafe, FailurePolicy,
    InstanceCheck, LoadLock, Pool, RedisCache, RedisGenerations, RedisPool, Timeouts, Tracking,
};
use cache_key::{GenerationError, GenerationStore};
use tokio::runtime::{Handle, Runtime};

use super::library_search::{Book, Search};

/// Where the tier's Redis is: one server, or a cluster (any of its nodes).
#[derive(Debug, Clone)]
pub enum Address {
    Server(String),
    Cluster(Vec<String>),
}

/// The two drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Blocking,
    Async,
}

pub const DRIVERS: [Driver; 2] = [Driver::Blocking, Driver::Async];

/// What a tier is made with besides its address.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub lock: Option<LoadLock>,
    pub ttl: Option<Duration>,
    pub timeouts: Option<Timeouts>,
    /// A level in process of this many entries.
    pub local: Option<u64>,
    pub fail_safe: Option<FailSafe>,
    /// Counters kept in process, dropped when Redis says they changed.
    pub tracking: Option<Tracking>,
    pub eager: Option<EagerRefresh>,
    /// How pools know which process answers them (the default: per
    /// connection).
    pub instance_check: Option<InstanceCheck>,
    /// What a call does when Redis fails: the tests' default returns the
    /// error (the cache's own default answers without the cache).
    pub failure_policy: Option<FailurePolicy>,
}

/// An origin that may outlive the call: an eager refresh's.
pub type Origin = Box<dyn FnOnce() -> Result<Vec<Book>, String> + Send>;

/// A typed cache on Redis, whichever its driver.
pub trait Tier: Sync {
    fn driver(&self) -> Driver;
    fn get(&self, query: &Search) -> Result<Option<Vec<Book>>, CacheError<Infallible>>;
    // The cache's value type is `Vec<Book>`: a slice would not be one.
    #[allow(clippy::ptr_arg)]
    fn insert(&self, query: &Search, value: &Vec<Book>) -> Result<(), CacheError<Infallible>>;
    fn get_or_load(
        &self,
        query: &Search,
        origin: &(dyn Fn() -> Result<Vec<Book>, String> + Sync),
    ) -> Result<Vec<Book>, CacheError<String>>;
    fn get_or_refresh(
        &self,
        query: &Search,
        origin: Origin,
    ) -> Result<Vec<Book>, CacheError<String>>;
    fn invalidate_tenant(&self, branch: u32) -> Result<(), CacheError>;
    fn stats(&self) -> Stats;
    /// The cache's generation store, as a blocking one.
    fn generations(&self) -> &(dyn GenerationStore + Sync);
    /// Whether the store's tracked counters are in use now.
    fn is_tracking(&self) -> bool;
}

/// Waits until `tier`'s subscription is up (at most 10 s).
pub fn until_tracking(tier: &dyn Tier) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tier.is_tracking() {
        assert!(Instant::now() < deadline, "the subscription never came up");
        thread::sleep(Duration::from_millis(5));
    }
}

/// `query`'s generation now, read through `tier`'s store.
pub fn generation(tier: &dyn Tier, query: &Search) -> u64 {
    let store = tier.generations();
    GenerationStore::generation_for(&store, query).expect("a generation")
}

impl Driver {
    /// A tier on `address`.
    pub fn tier(self, address: &Address, options: Options) -> Box<dyn Tier> {
        let timeouts = options.timeouts.unwrap_or_default();
        match self {
            Driver::Blocking => {
                let builder = RedisPool::builder()
                    .timeouts(timeouts)
                    .instance_check(options.instance_check.unwrap_or_default());
                let pool = match address {
                    Address::Server(url) => builder.open(url.as_str()),
                    Address::Cluster(urls) => builder.open_cluster(urls.iter().map(String::as_str)),
                }
                .expect("a pool");
                let mut cache = options.apply(RedisCache::new(options.store(pool)));
                if let Some(fail_safe) = options.fail_safe {
                    cache = cache.with_fail_safe(fail_safe);
                }
                Box::new(BlockingTier {
                    cache: Arc::new(cache),
                    eager: options.eager(),
                })
            }
            Driver::Async => {
                let runtime = Arc::new(runtime());
                let builder = AsyncRedisPool::builder()
                    .timeouts(timeouts)
                    .instance_check(options.instance_check.unwrap_or_default());
                let pool = runtime
                    .block_on(async {
                        match address {
                            Address::Server(url) => builder.connect(url.as_str()).await,
                            Address::Cluster(urls) => {
                                builder
                                    .connect_cluster(urls.iter().map(String::as_str))
                                    .await
                            }
                        }
                    })
                    .expect("an async pool");
                let generations = options.store(pool);
                let mut cache = options.apply(AsyncRedisCache::new(generations.clone()));
                if let Some(fail_safe) = options.fail_safe {
                    cache = cache.with_fail_safe(fail_safe);
                }
                let handle = runtime.handle().clone();
                Box::new(AsyncTier {
                    cache: Arc::new(cache),
                    eager: options.eager(),
                    generations: BlockOn {
                        store: generations,
                        handle: handle.clone(),
                    },
                    handle,
                    _runtime: runtime,
                })
            }
        }
    }
}

impl Options {
    /// The generation store on `pool`, tracked if asked.
    fn store<P: Pool>(&self, pool: P) -> RedisGenerations<P> {
        match self.tracking {
            Some(tracking) => RedisGenerations::tracked(pool, tracking),
            None => RedisGenerations::new(pool),
        }
    }

    /// What `get_or_refresh` is given: the eager refresh asked for, or one
    /// that never refreshes early.
    fn eager(&self) -> EagerRefresh {
        self.eager.unwrap_or(EagerRefresh::after(1.0))
    }

    /// `cache` with these options.
    fn apply<P: Pool>(
        &self,
        mut cache: RedisCache<RedisGenerations<P>>,
    ) -> RedisCache<RedisGenerations<P>> {
        if let Some(lock) = self.lock {
            cache = cache.with_lock(lock);
        }
        if let Some(ttl) = self.ttl {
            cache = cache.with_ttl::<Search>(ttl);
        }
        if let Some(capacity) = self.local {
            cache = cache.with_local(capacity);
        }
        // Tests see a failure as the error it is, not as a miss, unless
        // they test what the cache does around it.
        let policy = self.failure_policy.unwrap_or(FailurePolicy::ReturnError);
        cache = cache.with_failure_policy(policy);
        cache
    }
}

/// A runtime for one async tier.
pub use crate::common::async_runtime::runtime;

struct BlockingTier {
    cache: Arc<RedisCache>,
    eager: EagerRefresh,
}

impl Tier for BlockingTier {
    fn driver(&self) -> Driver {
        Driver::Blocking
    }
    fn get(&self, query: &Search) -> Result<Option<Vec<Book>>, CacheError<Infallible>> {
        self.cache.get(query)
    }
    fn insert(&self, query: &Search, value: &Vec<Book>) -> Result<(), CacheError<Infallible>> {
        self.cache.insert(query, value.clone())
    }
    fn get_or_load(
        &self,
        query: &Search,
        origin: &(dyn Fn() -> Result<Vec<Book>, String> + Sync),
    ) -> Result<Vec<Book>, CacheError<String>> {
        self.cache.get_or_load(query, origin)
    }
    fn get_or_refresh(
        &self,
        query: &Search,
        origin: Origin,
    ) -> Result<Vec<Book>, CacheError<String>> {
        self.cache.get_or_refresh(query, self.eager, origin)
    }
    fn invalidate_tenant(&self, branch: u32) -> Result<(), CacheError> {
        self.cache.invalidate(&Search::tenant_scope(&branch)?)
    }
    fn stats(&self) -> Stats {
        self.cache.stats()
    }
    fn generations(&self) -> &(dyn GenerationStore + Sync) {
        self.cache.store()
    }
    fn is_tracking(&self) -> bool {
        self.cache.store().is_tracking()
    }
}

struct AsyncTier {
    cache: Arc<AsyncRedisCache>,
    eager: EagerRefresh,
    generations: BlockOn<AsyncRedisGenerations>,
    handle: Handle,
    _runtime: Arc<Runtime>,
}

impl AsyncTier {
    fn block<F: Future + Send>(&self, future: F) -> F::Output
    where
        F::Output: Send,
    {
        block(&self.handle, future)
    }
}

impl Tier for AsyncTier {
    fn driver(&self) -> Driver {
        Driver::Async
    }
    fn get(&self, query: &Search) -> Result<Option<Vec<Book>>, CacheError<Infallible>> {
        self.block(self.cache.get(query))
    }
    fn insert(&self, query: &Search, value: &Vec<Book>) -> Result<(), CacheError<Infallible>> {
        self.block(self.cache.insert(query, value.clone()))
    }
    fn get_or_load(
        &self,
        query: &Search,
        origin: &(dyn Fn() -> Result<Vec<Book>, String> + Sync),
    ) -> Result<Vec<Book>, CacheError<String>> {
        self.block(self.cache.get_or_load(query, || async { origin() }))
    }
    fn get_or_refresh(
        &self,
        query: &Search,
        origin: Origin,
    ) -> Result<Vec<Book>, CacheError<String>> {
        let eager = self.eager;
        // A refresh's origin runs on a worker of the runtime, and a test's
        // origin blocks (held until the test lets it go): `block_in_place`
        // hands the worker's other work, the reactor's turn among it, to
        // another thread meanwhile, as a blocking origin must.
        let origin = || async move { tokio::task::block_in_place(origin) };
        self.block(self.cache.get_or_refresh(query, eager, origin))
    }
    fn invalidate_tenant(&self, branch: u32) -> Result<(), CacheError> {
        self.block(self.cache.invalidate(&Search::tenant_scope(&branch)?))
    }
    fn stats(&self) -> Stats {
        self.cache.stats()
    }
    fn generations(&self) -> &(dyn GenerationStore + Sync) {
        &self.generations
    }
    fn is_tracking(&self) -> bool {
        self.generations.store.is_tracking()
    }
}

/// An async store driven from blocking code: the async driver's counters
/// behind the blocking trait, so that the stores' test bodies run against
/// both drivers.
pub struct BlockOn<S> {
    pub store: S,
    pub handle: Handle,
}

impl<S: AsyncGenerationStore> GenerationStore for BlockOn<S> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        block(&self.handle, self.store.read(counters, sum))
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        block(&self.handle, self.store.bump(counter))
    }
}

/// Runs `future` to its end from blocking code: on this thread, or on a
/// thread of its own when this one already drives a runtime (an origin that
/// calls the cache).
fn block<F: Future + Send>(handle: &Handle, future: F) -> F::Output
where
    F::Output: Send,
{
    if Handle::try_current().is_err() {
        return handle.block_on(future);
    }
    thread::scope(|scope| scope.spawn(|| handle.block_on(future)).join())
        .expect("the future's thread")
}

/// A generation store on `address`, whichever its driver (the async one
/// behind [`BlockOn`], with its runtime).
pub fn generations(driver: Driver, address: &Address) -> Box<dyn GenerationStore + Send + Sync> {
    match driver {
        Driver::Blocking => {
            let pool = match address {
                Address::Server(url) => RedisPool::open(url.as_str()),
                Address::Cluster(urls) => RedisPool::open_cluster(urls.iter().map(String::as_str)),
            }
            .expect("a pool");
            Box::new(RedisGenerations::new(pool))
        }
        Driver::Async => {
            let runtime = runtime();
            let pool = runtime
                .block_on(async {
                    match address {
                        Address::Server(url) => AsyncRedisPool::connect(url.as_str()).await,
                        Address::Cluster(urls) => {
                            AsyncRedisPool::connect_cluster(urls.iter().map(String::as_str)).await
                        }
                    }
                })
                .expect("an async pool");
            Box::new(Owned {
                store: BlockOn {
                    store: AsyncRedisGenerations::new(pool),
                    handle: runtime.handle().clone(),
                },
                _runtime: runtime,
            })
        }
    }
}

/// A store with the runtime it runs on.
struct Owned<S> {
    store: S,
    _runtime: Runtime,
}

impl<S: GenerationStore> GenerationStore for Owned<S> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        self.store.read(counters, sum)
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        self.store.bump(counter)
    }
}

/// An origin answering `dune()`, counting its calls in `calls`.
pub fn origin_of(calls: &AtomicUsize) -> impl Fn() -> Result<Vec<Book>, String> + Sync + '_ {
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(super::library_search::dune())
    }
}
