//! What every generation store must guarantee, written once and run against
//! each store: the bump model (`run_model`) and the race (`race`).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use cache_key::{CacheKey, GenerationScope, GenerationStore, Scopes};

// ---------------------------------------------------------------------------
// Query types: a compound tenant (with and without hash tag), its leading
// value alone, a global query, and another namespace.

#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "issues")]
pub struct Issues<'a> {
    #[tenant]
    pub org: &'a str,
    #[tenant]
    pub repo: &'a str,
    #[criterion]
    pub page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "pulls", hash_tag)]
pub struct Pulls<'a> {
    #[tenant]
    pub org: &'a str,
    #[tenant]
    pub repo: &'a str,
    #[criterion]
    pub page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "forge", operation = "feed")]
pub struct Feed<'a> {
    #[tenant]
    pub org: &'a str,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "forge",
    operation = "trending",
    global = "the same for everyone"
)]
pub struct Trending {
    #[criterion]
    pub page: u32,
}

#[derive(CacheKey)]
#[cache_key(namespace = "wiki", operation = "pages")]
pub struct Pages<'a> {
    #[tenant]
    pub org: &'a str,
}

/// Organizations: one with a separator in it, one with a glob character.
pub const ORGS: [&str; 3] = ["acme", "a,b", "acme*"];
/// Repositories of each organization.
pub const REPOS: [&str; 2] = ["rocket", "x:y"];

/// A query type of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Issues,
    Pulls,
    Feed,
    Trending,
    Pages,
}

/// One query of the model: a type and its tenant values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    pub kind: Kind,
    pub org: usize,
    pub repo: usize,
}

impl Instance {
    /// Every query of the model: 19.
    pub fn all() -> Vec<Instance> {
        let mut all = Vec::new();
        for kind in [Kind::Issues, Kind::Pulls] {
            for org in 0..ORGS.len() {
                for repo in 0..REPOS.len() {
                    all.push(Instance { kind, org, repo });
                }
            }
        }
        for kind in [Kind::Feed, Kind::Pages] {
            for org in 0..ORGS.len() {
                all.push(Instance { kind, org, repo: 0 });
            }
        }
        all.push(Instance {
            kind: Kind::Trending,
            org: 0,
            repo: 0,
        });
        all
    }

    /// Namespace, tenant values and operation, as the model sees them.
    fn identity(&self) -> (&'static str, Vec<&'static str>, &'static str) {
        let (org, repo) = (ORGS[self.org], REPOS[self.repo]);
        match self.kind {
            Kind::Issues => ("forge", vec![org, repo], "issues"),
            Kind::Pulls => ("forge", vec![org, repo], "pulls"),
            Kind::Feed => ("forge", vec![org], "feed"),
            Kind::Trending => ("forge", vec![], "trending"),
            Kind::Pages => ("wiki", vec![org], "pages"),
        }
    }

    pub fn generation<S: GenerationStore>(&self, store: &S) -> Result<u64, String> {
        let (org, repo) = (ORGS[self.org], REPOS[self.repo]);
        let page = 1;
        match self.kind {
            Kind::Issues => store.generation_for(&Issues { org, repo, page }),
            Kind::Pulls => store.generation_for(&Pulls { org, repo, page }),
            Kind::Feed => store.generation_for(&Feed { org }),
            Kind::Trending => store.generation_for(&Trending { page }),
            Kind::Pages => store.generation_for(&Pages { org }),
        }
        .map_err(|error| format!("{self:?}: {error}"))
    }
}

/// A scope the model bumps, made through every typed constructor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bump {
    /// `GenerationScope::namespace` of forge (through `Issues`) or wiki.
    Namespace { wiki: bool },
    /// `Issues::tenant_scope_by_org(&org)`: an organization with all
    /// its repositories (and `Feed`'s one-value tenant).
    Org { org: usize },
    /// `Feed::tenant_scope(&org)`: the same counter as `Org`.
    FeedOrg { org: usize },
    /// `Pulls::tenant_scope((&org, &repo))`: one repository.
    Repo { org: usize, repo: usize },
    /// `GenerationScope::tenant_of(&Issues { .. })`.
    RepoOf { org: usize, repo: usize },
    /// `Issues::operation_scope((&org, &repo))`.
    IssuesOf { org: usize, repo: usize },
    /// `GenerationScope::operation_of(&Pulls { .. })`.
    PullsOf { org: usize, repo: usize },
    /// `Trending::operation_scope(())`: among the global keys.
    Trending,
    /// `Pages::operation_scope(&org)`.
    PagesOf { org: usize },
}

impl Bump {
    pub fn scope(&self) -> GenerationScope {
        let page = 1;
        match *self {
            Bump::Namespace { wiki: false } => Ok(GenerationScope::namespace::<Issues>()),
            Bump::Namespace { wiki: true } => Ok(GenerationScope::namespace::<Pages>()),
            Bump::Org { org } => Issues::tenant_scope_by_org(&ORGS[org]),
            Bump::FeedOrg { org } => Feed::tenant_scope(&ORGS[org]),
            Bump::Repo { org, repo } => Pulls::tenant_scope((&ORGS[org], &REPOS[repo])),
            Bump::RepoOf { org, repo } => GenerationScope::tenant_of(&Issues {
                org: ORGS[org],
                repo: REPOS[repo],
                page,
            }),
            Bump::IssuesOf { org, repo } => Issues::operation_scope((&ORGS[org], &REPOS[repo])),
            Bump::PullsOf { org, repo } => GenerationScope::operation_of(&Pulls {
                org: ORGS[org],
                repo: REPOS[repo],
                page,
            }),
            Bump::Trending => Trending::operation_scope(()),
            Bump::PagesOf { org } => Pages::operation_scope(&ORGS[org]),
        }
        .expect("the model's scopes are valid")
    }

    /// Whether bumping this scope must change `instance`'s generation.
    pub fn encloses(&self, instance: &Instance) -> bool {
        let (namespace, parts, operation) = instance.identity();
        let forge = namespace == "forge";
        let tenant_is = |values: &[&str]| parts == values;
        let tenant_starts = |values: &[&str]| parts.starts_with(values);
        match *self {
            Bump::Namespace { wiki } => forge != wiki,
            Bump::Org { org } | Bump::FeedOrg { org } => forge && tenant_starts(&[ORGS[org]]),
            Bump::Repo { org, repo } | Bump::RepoOf { org, repo } => {
                forge && tenant_starts(&[ORGS[org], REPOS[repo]])
            }
            Bump::IssuesOf { org, repo } => {
                operation == "issues" && tenant_is(&[ORGS[org], REPOS[repo]])
            }
            Bump::PullsOf { org, repo } => {
                operation == "pulls" && tenant_is(&[ORGS[org], REPOS[repo]])
            }
            Bump::Trending => operation == "trending",
            Bump::PagesOf { org } => operation == "pages" && tenant_is(&[ORGS[org]]),
        }
    }
}

/// One step of the model.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// Bump a scope; every query it encloses must get a higher generation.
    Bump(Bump),
    /// Read one query's generation.
    Read(usize),
    /// Lose a counter (for stores that can: Redis), chosen by this number.
    Lose(usize),
}

/// What each query has seen so far.
#[derive(Default)]
struct Seen {
    last: Option<u64>,
    all: HashSet<u64>,
}

impl Seen {
    fn record(&mut self, instance: &Instance, generation: u64) -> Result<(), String> {
        if let Some(last) = self.last {
            if generation < last {
                return Err(format!(
                    "{instance:?}: generation went back from {last} to {generation}"
                ));
            }
            if generation != last && self.all.contains(&generation) {
                return Err(format!(
                    "{instance:?}: generation {generation} came back after {last}"
                ));
            }
        }
        self.last = Some(generation);
        self.all.insert(generation);
        Ok(())
    }
}

/// Runs `ops` against `store`, checking after each step that no query's
/// generation ever goes back or repeats a value it moved away from, and that
/// every bump raises the generation of every query the scope encloses.
/// `lose` makes the store lose a counter (chosen by the number) for
/// `Op::Lose`. Returns how many generations were read.
pub fn run_model<S: GenerationStore>(
    store: &S,
    ops: &[Op],
    mut lose: impl FnMut(usize),
) -> Result<usize, String> {
    let instances = Instance::all();
    let mut seen: Vec<Seen> = instances.iter().map(|_| Seen::default()).collect();
    let mut reads = 0;
    let mut read = |i: usize, seen: &mut Vec<Seen>| -> Result<u64, String> {
        let generation = instances[i].generation(store)?;
        seen[i].record(&instances[i], generation)?;
        reads += 1;
        Ok(generation)
    };
    for op in ops {
        match *op {
            Op::Read(i) => {
                read(i % instances.len(), &mut seen)?;
            }
            Op::Lose(n) => lose(n),
            Op::Bump(bump) => {
                let enclosed: Vec<usize> = (0..instances.len())
                    .filter(|&i| bump.encloses(&instances[i]))
                    .collect();
                let before: Vec<u64> = enclosed
                    .iter()
                    .map(|&i| read(i, &mut seen))
                    .collect::<Result<_, _>>()?;
                store
                    .invalidate(&bump.scope())
                    .map_err(|error| format!("{bump:?}: {error}"))?;
                for (&i, before) in enclosed.iter().zip(before) {
                    let after = read(i, &mut seen)?;
                    if after <= before {
                        return Err(format!(
                            "{bump:?} left {:?} at {after} (was {before})",
                            instances[i]
                        ));
                    }
                }
            }
        }
    }
    Ok(reads)
}

// ---------------------------------------------------------------------------
// The race: threads reading, computing from the origin and writing, and a
// thread updating the origin and bumping.

/// The query of the race.
#[derive(CacheKey)]
#[cache_key(namespace = "race", operation = "list")]
pub struct List {
    #[tenant(allow_zero = "branch 0 is one of the race's branches")]
    pub branch: u32,
    #[criterion]
    pub page: u32,
}

/// Branches of the race: each has its own origin version.
pub const BRANCHES: u32 = 3;

/// Where the race's cached values live.
pub trait Entries {
    fn lookup(&self, key: &str) -> Option<u64>;
    fn insert(&self, key: &str, value: u64);
}

impl Entries for Mutex<HashMap<String, u64>> {
    fn lookup(&self, key: &str) -> Option<u64> {
        self.lock().unwrap().get(key).copied()
    }

    fn insert(&self, key: &str, value: u64) {
        self.lock().unwrap().insert(key.to_owned(), value);
    }
}

impl<E: Entries + ?Sized> Entries for &E {
    fn lookup(&self, key: &str) -> Option<u64> {
        (**self).lookup(key)
    }

    fn insert(&self, key: &str, value: u64) {
        (**self).insert(key, value)
    }
}

/// What the race counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RaceReport {
    pub reads: u64,
    pub hits: u64,
    pub misses: u64,
    pub bumps: u64,
    /// Reads that got a value older than the origin's version at a bump
    /// that had returned before the read started.
    pub stale: u64,
}

/// The origin: a version per branch, and for each the version whose bump has
/// returned.
pub struct Origin {
    versions: Vec<AtomicU64>,
    published: Vec<AtomicU64>,
}

impl Origin {
    pub fn new() -> Self {
        Origin {
            versions: (0..BRANCHES).map(|_| AtomicU64::new(1)).collect(),
            published: (0..BRANCHES).map(|_| AtomicU64::new(1)).collect(),
        }
    }

    /// What the origin answers for `branch` now.
    pub fn read(&self, branch: u32) -> u64 {
        self.versions[branch as usize].load(Ordering::Acquire)
    }

    /// Changes `branch`'s data; returns the new version.
    pub fn update(&self, branch: u32) -> u64 {
        self.versions[branch as usize].fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Records that the bump for `version` of `branch` has returned.
    pub fn publish(&self, branch: u32, version: u64) {
        self.published[branch as usize].fetch_max(version, Ordering::AcqRel);
    }

    /// The oldest version a read of `branch` starting now may return.
    pub fn floor(&self, branch: u32) -> u64 {
        self.published[branch as usize].load(Ordering::Acquire)
    }
}

impl Default for Origin {
    fn default() -> Self {
        Self::new()
    }
}

/// One read through the cache, in the order the race rule asks: the key (so
/// the generation) first, then on a miss the origin, stored under that key.
/// Returns the value and whether it was a hit.
pub fn read_through<S: GenerationStore, E: Entries>(
    store: &S,
    entries: &E,
    origin: &Origin,
    query: &List,
) -> (u64, bool) {
    let key = store.key_for(query).expect("the generation is readable");
    if let Some(value) = entries.lookup(key.as_str()) {
        return (value, true);
    }
    let value = origin.read(query.branch);
    // A slow origin: leave room for a bump to land before the value is stored.
    thread::yield_now();
    entries.insert(key.as_str(), value);
    (value, false)
}

/// A simple deterministic generator for the race's choices.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) % n
    }
}

/// `readers` threads each doing `reads` reads through the cache, and one
/// thread doing `bumps` bumps (each after updating the origin: the
/// branch's tenant, its `list` operation, or the whole namespace); each
/// thread gets its store and entries from `connect`. Counts the reads that
/// returned a value older than a bump that returned before they started.
pub fn race<S, E>(
    connect: impl Fn() -> (S, E) + Sync,
    readers: usize,
    reads: u64,
    bumps: u64,
) -> RaceReport
where
    S: GenerationStore,
    E: Entries,
{
    let origin = Origin::new();
    let total = Mutex::new(RaceReport::default());
    // Reads and bumps done so far: each side waits for the other, so that
    // the bumps are spread over the whole run.
    let progress = AtomicU64::new(0);
    let bumped = AtomicU64::new(0);
    // Set when a thread panics, so that the others stop waiting for it.
    let failed = AtomicBool::new(false);
    let reads_per_bump = readers as u64 * reads / (bumps + 1);
    thread::scope(|scope| {
        for reader in 0..readers {
            let (origin, total, connect) = (&origin, &total, &connect);
            let (progress, bumped, failed) = (&progress, &bumped, &failed);
            scope.spawn(move || {
                let _failed = FailOnPanic(failed);
                let (store, entries) = connect();
                let mut rng = Rng::new(reader as u64 + 1);
                let mut report = RaceReport::default();
                for _ in 0..reads {
                    loop {
                        let done = bumped.load(Ordering::Relaxed);
                        if done == bumps
                            || progress.load(Ordering::Relaxed) < (done + 1) * reads_per_bump
                            || failed.load(Ordering::Relaxed)
                        {
                            break;
                        }
                        thread::yield_now();
                    }
                    let query = List {
                        branch: rng.below(u64::from(BRANCHES)) as u32,
                        page: rng.below(2) as u32 + 1,
                    };
                    let floor = origin.floor(query.branch);
                    let (value, hit) = read_through(&store, &entries, origin, &query);
                    report.reads += 1;
                    if hit {
                        report.hits += 1;
                    } else {
                        report.misses += 1;
                    }
                    if value < floor {
                        report.stale += 1;
                    }
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                let mut total = total.lock().unwrap();
                total.reads += report.reads;
                total.hits += report.hits;
                total.misses += report.misses;
                total.stale += report.stale;
            });
        }
        let (origin, total, connect) = (&origin, &total, &connect);
        let (progress, bumped, failed) = (&progress, &bumped, &failed);
        scope.spawn(move || {
            let _failed = FailOnPanic(failed);
            let (store, _entries) = connect();
            let mut rng = Rng::new(99);
            for bump in 0..bumps {
                // Let readers fill the cache between bumps.
                while progress.load(Ordering::Relaxed) < bump * reads_per_bump {
                    assert!(!failed.load(Ordering::Relaxed), "a reader failed");
                    thread::yield_now();
                }
                let branch = rng.below(u64::from(BRANCHES)) as u32;
                match rng.below(10) {
                    0 => {
                        let versions: Vec<u64> =
                            (0..BRANCHES).map(|branch| origin.update(branch)).collect();
                        store.invalidate_namespace::<List>().expect("a bump");
                        for (branch, version) in (0..BRANCHES).zip(versions) {
                            origin.publish(branch, version);
                        }
                    }
                    choice => {
                        let version = origin.update(branch);
                        if choice < 6 {
                            store
                                .invalidate(&List::tenant_scope(&branch).unwrap())
                                .expect("a bump");
                        } else {
                            store
                                .invalidate(&List::operation_scope(&branch).unwrap())
                                .expect("a bump");
                        }
                        origin.publish(branch, version);
                    }
                }
                bumped.fetch_add(1, Ordering::Relaxed);
            }
            total.lock().unwrap().bumps += bumps;
        });
    });
    total.into_inner().unwrap()
}

/// Sets its flag when the thread holding it unwinds.
struct FailOnPanic<'a>(&'a AtomicBool);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}
