//! A cache stampede, measured: 200 concurrent requests for one cold key, with
//! a library catalog in SQLite as the origin.
//!
//! - Through the typed cache (`MokaCache::get_or_load`), the 200 misses wait
//!   for one load: SQLite answers once.
//! - The naive way, `get` then `insert` on a miss, every request that missed
//!   asks SQLite itself: 200 queries for one answer, at the moment the cache
//!   is empty.
//!
//! The origin is slower than the requests arrive (it answers once all 200
//! have missed), which is what makes a stampede; that makes both counts a
//! property of the cache, not of the scheduler, so `tests/typed_cache.rs`
//! asserts them exactly. Run with `cargo run --example stampede`.

#[path = "../tests/common/stampede.rs"]
pub mod stampede;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cache_key::cache::MokaCache;
use cache_key::cache::{QueryCache, TypedCache};
use cache_key::{CacheKey, MemoryGenerations};
use rusqlite::Connection;
use stampede::{CALLERS, stampede, until_misses};

/// A title search in one branch; its cached answer is the matching titles.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", value = Vec<String>, ttl = "5m")]
pub struct Search {
    #[tenant]
    pub branch: u32,
    #[criterion]
    pub title: String,
}

/// A title search for `title` in `branch`.
pub fn search(branch: u32, title: &str) -> Search {
    Search {
        branch,
        title: title.to_owned(),
    }
}

/// A library catalog in SQLite that counts the queries it answers.
pub struct Catalog {
    db: Mutex<Connection>,
    queries: AtomicUsize,
}

impl Catalog {
    /// Four books in two branches, in memory.
    pub fn open() -> rusqlite::Result<Catalog> {
        let db = Connection::open_in_memory()?;
        db.execute_batch(
            "CREATE TABLE books (branch INTEGER, title TEXT);
             INSERT INTO books VALUES (1, 'Dune'), (1, 'Dune Messiah'), (2, 'Dune'), (1, 'Solaris');",
        )?;
        Ok(Catalog {
            db: Mutex::new(db),
            queries: AtomicUsize::new(0),
        })
    }

    /// The titles starting with the query's title in its branch.
    pub fn search(&self, query: &Search) -> rusqlite::Result<Vec<String>> {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let db = self
            .db
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut statement = db.prepare(
            "SELECT title FROM books WHERE branch = ?1 AND title LIKE ?2 ORDER BY title",
        )?;
        let rows = statement.query_map((query.branch, format!("{}%", query.title)), |row| {
            row.get(0)
        })?;
        rows.collect()
    }

    /// How many queries SQLite has answered.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

/// What one stampede cost the origin, and what the requests got.
pub struct Stampede {
    /// How many queries reached SQLite.
    pub queries: usize,
    /// Every request's answer.
    pub answers: Vec<Vec<String>>,
}

/// Why a request failed: SQLite, or the cache's generation store.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// 200 requests through `MokaCache::get_or_load`: one origin call.
pub fn typed_cache(catalog: &Catalog) -> Result<Stampede, Error> {
    let cache = MokaCache::new(MemoryGenerations::new(), 10_000);
    let query = search(1, "Dune");
    let answers = stampede(|| -> Result<Vec<String>, Error> {
        let titles = cache.get_or_load(&query, || {
            // The origin is slow: every request arrives while it works.
            until_misses(|| cache.stats(), CALLERS as u64);
            catalog.search(&query)
        })?;
        Ok(titles)
    });
    collect(catalog, answers)
}

/// 200 requests doing `get`, then on a miss the query and an `insert`.
pub fn naive(catalog: &Catalog) -> Result<Stampede, Error> {
    let cache = MokaCache::new(MemoryGenerations::new(), 10_000);
    let query = search(1, "Dune");
    let answers = stampede(|| -> Result<Vec<String>, Error> {
        if let Some(titles) = cache.get(&query)? {
            return Ok(titles);
        }
        until_misses(|| cache.stats(), CALLERS as u64);
        let titles = catalog.search(&query)?;
        cache.insert(&query, titles.clone())?;
        Ok(titles)
    });
    collect(catalog, answers)
}

/// The stampede's cost, or the first request's error.
fn collect(catalog: &Catalog, answers: Vec<Result<Vec<String>, Error>>) -> Result<Stampede, Error> {
    Ok(Stampede {
        queries: catalog.queries(),
        answers: answers.into_iter().collect::<Result<_, _>>()?,
    })
}

fn main() -> Result<(), Error> {
    let typed = typed_cache(&Catalog::open()?)?;
    let naive = naive(&Catalog::open()?)?;
    println!("{CALLERS} concurrent requests for one cold key (branch 1, title \"Dune\"):");
    println!(
        "  MokaCache::get_or_load: {:>3} SQLite queries",
        typed.queries
    );
    println!(
        "  get, then insert:       {:>3} SQLite queries",
        naive.queries
    );
    println!("every request got {:?}", typed.answers[0]);
    Ok(())
}
