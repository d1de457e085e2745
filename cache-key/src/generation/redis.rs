//! [`RedisGenerations`]: generation counters in Redis or a Redis Cluster
//! (feature `redis`), and the sweep of old generations.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ::redis::cluster::ClusterConnection;
use ::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use ::redis::{Connection, ConnectionLike, RedisResult, Script, Value, cmd};

use super::{Counter, Counters, GenerationError, GenerationScope, GenerationStore, GenerationSum};
use crate::decode::{DecodedKey, decode};
use crate::escape::push_escaped;
use crate::pattern::KeyPattern;

/// Creates a missing counter at the server's clock, then adds `ARGV[1]` (0 to
/// read, 1 to bump) and returns the value.
///
/// The start is the server's `TIME` in microseconds since 2020-01-01 UTC,
/// written as decimal text (`seconds` then six digits of microseconds) so
/// that Lua's floating-point numbers never hold it whole. One server's clock
/// is the only clock a counter ever sees (it lives on one server), so clients
/// with skewed clocks cannot start it low.
pub(super) const COUNTER_SCRIPT: &str = "\
local now = redis.call('TIME')
local start = string.format('%d%06d', tonumber(now[1]) - 1577836800, tonumber(now[2]))
redis.call('SET', KEYS[1], start, 'NX')
return redis.call('INCRBY', KEYS[1], ARGV[1])
";

/// Generation counters in Redis (feature `redis`), shared by every process
/// that uses the same Redis: a bump by one is seen by all.
///
/// # Counters
///
/// Each counter is a Redis key named as [`Counter::write_name`] says
/// (`library:g`, `library:g:t{branch-2}`, `library:g:t{branch-2}:list`):
/// every part escaped as in a key, the tenant always a hash tag, so a
/// tenant's counters sit in its Redis Cluster slot, the slot of its keys when
/// the query type uses `hash_tag`. Counter names are never keys
/// ([`decode`](crate::decode) refuses them), so a [`KeyPattern`] never
/// matches them.
///
/// A bump is `SET counter <now> NX` then `INCR counter`, in one script
/// (`EVALSHA`), `<now>` being the server's clock in microseconds since 2020.
/// A read is one `MGET` of all the query's counters, then the value's `GET`:
/// two round trips per keyed read on one server. In a cluster the `redis`
/// client splits the `MGET` by slot, one request per slot: the tenant's
/// counters share its slot, the namespace's counter has its own (and each
/// leading value of a compound tenant its own), so a keyed read of a
/// one-value tenant is three requests: two `MGET`s and the `GET`.
///
/// # A counter that vanishes
///
/// Redis loses counters: `maxmemory-policy allkeys-lru` evicts them like any
/// key, a restart without persistence loses them all, a careless `DEL`
/// removes one. A counter that came back at 0 would make old entries
/// reachable again. Here a missing counter is created by the same script at
/// the server's clock (`SET NX`, so a counter another client just created is
/// kept), then read: its new value is the time in microseconds, and the
/// counter it replaces started at an earlier time and was bumped by one per
/// `INCR`. It is therefore above every value the lost counter had, as long as
/// that counter was not bumped more than once per microsecond on average
/// since it was created (a Redis server runs a few hundred thousand scripts a
/// second at most), and the server's clock did not go back by more than the
/// time since. Under a `volatile-*` eviction policy counters (which have no
/// time to live) are never evicted at all.
///
/// Redis Cluster failover can lose a bump the primary acknowledged but did
/// not yet replicate (Redis replication is asynchronous); a counter that
/// must survive that can be followed by `WAIT` on the same connection.
///
/// # When Redis cannot be reached
///
/// Every read and bump is an error the caller sees
/// ([`GenerationErrorKind::Store`](super::GenerationErrorKind::Store), the
/// `redis` crate's error as its source),
/// never generation 0 and never a remembered value: a cache that cannot
/// learn the generation cannot name the key, and should go to the origin.
/// Timeouts are the connection's own (`redis::Client::get_connection_with_timeout`,
/// `ClusterClientBuilder::connection_timeout`...). Nothing is cached locally:
/// a bump is seen by the very next read, in every process.
///
/// # Connections
///
/// The store keeps one connection behind a mutex: a plain
/// [`redis::Connection`](::redis::Connection), a
/// [`ClusterConnection`](::redis::cluster::ClusterConnection), or any
/// [`ConnectionLike`]. Use [`connection`](Self::connection) to send your own
/// commands (the entries' `GET` and `SET`) on it.
///
/// ```no_run
/// use cache_key::{CacheKey, GenerationStore, RedisGenerations};
/// use redis::Commands;
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "list", hash_tag)]
/// struct BranchList { #[tenant] branch: u32, #[criterion] page: u32 }
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let generations = RedisGenerations::new(client.get_connection()?);
///
/// let query = BranchList { branch: 2, page: 1 };
/// let key = generations.key_for(&query)?;          // MGET of the query's counters
/// let cached: Option<String> = generations.connection().get(&key)?;
/// if cached.is_none() {
///     let answer = "...";                           // ask the origin, then store under `key`
///     let () = generations.connection().set_ex(&key, answer, 3600)?;
/// }
/// generations.invalidate_tenant::<BranchList>(&[&2u32])?;   // branch 2's keys are unreachable
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisGenerations<C> {
    connection: Mutex<C>,
    script: Script,
}

/// A counter key that holds something other than a counter (a value written
/// by someone else under a counter's name): an error, never a guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACounter {
    name: String,
    value: String,
}

impl NotACounter {
    /// The counter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it holds, as Redis returned it (shortened).
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for NotACounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` holds {}, not a generation counter (a non-negative integer)",
            self.name, self.value
        )
    }
}

impl Error for NotACounter {}

impl<C: ConnectionLike> RedisGenerations<C> {
    /// A store keeping its counters through `connection`.
    pub fn new(connection: C) -> Self {
        RedisGenerations {
            connection: Mutex::new(connection),
            script: Script::new(COUNTER_SCRIPT),
        }
    }

    /// The store's connection, for the cache's own commands. Reads and bumps
    /// wait while it is held.
    pub fn connection(&self) -> MutexGuard<'_, C> {
        // A panic while the connection was held left it as `redis` left it:
        // each command is sent and read whole, or fails with an error.
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection back.
    pub fn into_inner(self) -> C {
        self.connection
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs the counter script on `name`: creates it at the server's clock
    /// if missing, adds `by`, returns the value.
    fn run_script(&self, connection: &mut C, name: &str, by: u64) -> Result<u64, GenerationError> {
        let value: i64 = self
            .script
            .key(name)
            .arg(by)
            .invoke(connection)
            .map_err(GenerationError::store)?;
        u64::try_from(value).map_err(|_| not_a_counter(name, value.to_string()))
    }
}

/// An error unless `MGET` of `names` returned one value each.
pub(super) fn check_count(names: &[String], values: &[Value]) -> Result<(), GenerationError> {
    if values.len() == names.len() {
        return Ok(());
    }
    Err(GenerationError::store(format!(
        "MGET of {} counters returned {} values",
        names.len(),
        values.len()
    )))
}

/// A counter's value as `MGET` returns it; `None` when it is missing.
pub(super) fn counter_value(name: &str, value: &Value) -> Result<Option<u64>, GenerationError> {
    let text = match value {
        Value::Nil => return Ok(None),
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes),
        Value::SimpleString(text) => text.as_str().into(),
        Value::Int(value) => value.to_string().into(),
        other => return Err(not_a_counter(name, format!("{other:?}"))),
    };
    match text.parse::<u64>() {
        Ok(value) => Ok(Some(value)),
        Err(_) => Err(not_a_counter(name, format!("{text:?}"))),
    }
}

pub(super) fn not_a_counter(name: &str, mut value: String) -> GenerationError {
    if value.len() > 80 {
        let mut end = 80;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        value.truncate(end);
        value.push_str("...");
    }
    GenerationError::store(NotACounter {
        name: name.to_owned(),
        value,
    })
}

impl<C: ConnectionLike> GenerationStore for RedisGenerations<C> {
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError> {
        let names: Vec<String> = counters.iter().map(|counter| counter.name()).collect();
        let mut connection = self.connection();
        let values: Vec<Value> = cmd("MGET")
            .arg(&names)
            .query(&mut *connection)
            .map_err(GenerationError::store)?;
        check_count(&names, &values)?;
        for (name, value) in names.iter().zip(&values) {
            let value = match counter_value(name, value)? {
                Some(value) => value,
                // First use of the scope, or the counter was lost: made at the
                // server's clock, above any value it had (see the type's docs).
                None => self.run_script(&mut connection, name, 0)?,
            };
            sum.add(value);
        }
        Ok(())
    }

    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
        let name = counter.name();
        let mut connection = self.connection();
        self.run_script(&mut connection, &name, 1).map(drop)
    }
}

/// How a [sweep](RedisGenerations::sweep) walks the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepOptions {
    batch: usize,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions { batch: 500 }
    }
}

impl SweepOptions {
    /// Keys asked for per `SCAN` call (its `COUNT`), and so the most keys
    /// held in memory and deleted by one `UNLINK`. Default 500.
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }
}

/// What a [sweep](RedisGenerations::sweep) did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SweepReport {
    /// Primaries scanned (1 for a single server).
    pub primaries: usize,
    /// Keys `SCAN` returned (with the namespace's glob).
    pub scanned: u64,
    /// Of these, keys in the scope.
    pub in_scope: u64,
    /// Of these, keys of an older generation than their query's current
    /// one, deleted.
    pub deleted: u64,
}

/// The most current generations a sweep remembers at once (one per tenant
/// and operation met); past it, it forgets them and reads them again.
const SWEEP_GENERATIONS: usize = 4096;

impl<C: ScanPrimaries> RedisGenerations<C> {
    /// Deletes the entries of `scope` whose generation is older than their
    /// query's current one: entries nobody can read any more.
    ///
    /// Each primary is walked with `SCAN` and the glob of the scope's
    /// namespace ([`KeyPattern::namespace`], glob-escaped), `batch` keys at a
    /// time; each key returned is decoded and kept only when the scope
    /// [`contains`](GenerationScope::contains) it (the exact test: a glob's
    /// `*` also matches `:`) and its generation is below the current
    /// generation of its namespace, tenant and operation (read from the
    /// counters, once per tenant and operation). Those are deleted with
    /// `UNLINK`, one call per batch: memory stays bounded by the batch,
    /// however many keys there are. Counters (whose names are not keys) and
    /// entries at the current generation are never deleted.
    ///
    /// An entry written during the sweep under a generation read before a
    /// bump may survive it: give entries a time to live, the primary answer
    /// to old generations, and sweep to reclaim memory sooner. `SCAN` walks
    /// the whole key space of each primary whatever the scope.
    pub fn sweep(
        &self,
        scope: &GenerationScope,
        options: SweepOptions,
    ) -> Result<SweepReport, GenerationError> {
        let glob = KeyPattern::namespace(scope.counter().namespace()).glob();
        let primaries = self
            .connection()
            .__primaries()
            .map_err(GenerationError::store)?;
        let mut report = SweepReport {
            primaries: primaries.len(),
            ..SweepReport::default()
        };
        let mut current: HashMap<(Option<String>, String), u64> = HashMap::new();
        for primary in primaries {
            let mut cursor = 0;
            loop {
                let (next, keys) = self
                    .connection()
                    .__scan(primary, cursor, &glob, options.batch)
                    .map_err(GenerationError::store)?;
                let mut doomed = Vec::new();
                for key in keys {
                    report.scanned += 1;
                    let Ok(decoded) = decode(&key) else {
                        continue;
                    };
                    if !scope.contains(&decoded) {
                        continue;
                    }
                    report.in_scope += 1;
                    if decoded.generation() < self.current(&mut current, &decoded)? {
                        doomed.push(key);
                    }
                }
                if !doomed.is_empty() {
                    let deleted: u64 = cmd("UNLINK")
                        .arg(&doomed)
                        .query(&mut *self.connection())
                        .map_err(GenerationError::store)?;
                    report.deleted += deleted;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(report)
    }

    /// The current generation of `key`'s namespace, tenant and operation.
    fn current(
        &self,
        known: &mut HashMap<(Option<String>, String), u64>,
        key: &DecodedKey,
    ) -> Result<u64, GenerationError> {
        let tenant = (!key.tenant().is_global()).then(|| {
            let mut tenant = String::new();
            for (i, part) in key.tenant().parts().iter().enumerate() {
                if i > 0 {
                    tenant.push(',');
                }
                push_escaped(&mut tenant, part);
            }
            tenant
        });
        let id = (tenant, key.operation().to_owned());
        if let Some(&generation) = known.get(&id) {
            return Ok(generation);
        }
        let counters = Counters::new(key.namespace(), id.0.as_deref(), &id.1);
        let mut sum = GenerationSum::default();
        self.read(counters, &mut sum)?;
        let generation = sum.finish(&counters)?;
        if known.len() >= SWEEP_GENERATIONS {
            known.clear();
        }
        known.insert(id, generation);
        Ok(generation)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for redis::Connection {}
    impl Sealed for redis::cluster::ClusterConnection {}
}

/// A connection a [sweep](RedisGenerations::sweep) can walk every primary of
/// with `SCAN`: a [`redis::Connection`](::redis::Connection) (its server) or a
/// [`ClusterConnection`](::redis::cluster::ClusterConnection) (each primary
/// of the cluster, found with `CLUSTER SLOTS`). Sealed.
pub trait ScanPrimaries: ConnectionLike + sealed::Sealed {
    /// One slot owned by each primary (any value for a single server).
    #[doc(hidden)]
    fn __primaries(&mut self) -> RedisResult<Vec<u16>>;

    /// One `SCAN cursor MATCH glob COUNT count` on the primary owning `slot`.
    #[doc(hidden)]
    fn __scan(
        &mut self,
        slot: u16,
        cursor: u64,
        glob: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<String>)>;
}

fn scan_command(cursor: u64, glob: &str, count: usize) -> ::redis::Cmd {
    let mut scan = cmd("SCAN");
    scan.arg(cursor)
        .arg("MATCH")
        .arg(glob)
        .arg("COUNT")
        .arg(count);
    scan
}

impl ScanPrimaries for Connection {
    fn __primaries(&mut self) -> RedisResult<Vec<u16>> {
        Ok(vec![0])
    }

    fn __scan(
        &mut self,
        _slot: u16,
        cursor: u64,
        glob: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<String>)> {
        scan_command(cursor, glob, count).query(self)
    }
}

impl ScanPrimaries for ClusterConnection {
    fn __primaries(&mut self) -> RedisResult<Vec<u16>> {
        let slots = self.route_command(
            &cmd("CLUSTER").arg("SLOTS").clone(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
        )?;
        // Each range: [start, end, [host, port, node id, ...], replicas...].
        let ranges: Vec<Vec<Value>> = ::redis::from_redis_value(slots)?;
        let mut first_slot: HashMap<Vec<u8>, u16> = HashMap::new();
        for range in ranges {
            let (Some(start), Some(Value::Array(primary))) = (range.first(), range.get(2)) else {
                continue;
            };
            let start: u16 = ::redis::from_redis_value_ref(start)?;
            let id = match primary.get(2) {
                Some(Value::BulkString(id)) => id.clone(),
                _ => format!("{:?}{:?}", primary.first(), primary.get(1)).into_bytes(),
            };
            let slot = first_slot.entry(id).or_insert(start);
            *slot = (*slot).min(start);
        }
        let mut slots: Vec<u16> = first_slot.into_values().collect();
        slots.sort_unstable();
        Ok(slots)
    }

    fn __scan(
        &mut self,
        slot: u16,
        cursor: u64,
        glob: &str,
        count: usize,
    ) -> RedisResult<(u64, Vec<String>)> {
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
            slot,
            SlotAddr::Master,
        )));
        let reply = self.route_command(&scan_command(cursor, glob, count), routing)?;
        Ok(::redis::from_redis_value(reply)?)
    }
}
