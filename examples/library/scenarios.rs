//! The scenarios of the library example: a small library in an in-memory
//! SQLite database, a `moka` cache in front of it, and the same queries cached
//! under hand-written keys and under keys derived with `#[derive(CacheKey)]`.
//!
//! Every function returns plain figures; `examples/library/main.rs` prints them and
//! `tests/library_example.rs` checks them, so the example cannot drift.

use std::error::Error;

use cache_key::cache::{MokaCache, QueryCache, TypedCache};
use cache_key::{CacheKey, CacheTags, GenerationStore, MemoryGenerations, Scopes};
use moka::sync::Cache;
use rusqlite::{Connection, params};

/// Any failure of a scenario: SQLite or a key that could not be built.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The invalidation generation every derived key in the example is built at.
pub const GENERATION: u64 = 4;

/// Requests replayed by the cardinality scenario.
pub const REQUESTS: u32 = 400;

/// Books per page of a branch listing.
pub const PAGE_SIZE: u32 = 2;

/// `(id, name, city)`.
pub const BRANCHES: [(u32, &str, &str); 3] = [
    (1, "Central", "Ankara"),
    (2, "Bahcelievler", "Ankara"),
    (3, "Kadikoy", "Istanbul"),
];

/// `(id, title, author, year, branch)`.
pub const BOOKS: [(u32, &str, &str, u32, u32); 7] = [
    (1, "Blindness", "José Saramago", 1995, 1),
    (2, "The Disconnected", "Oğuz Atay", 1972, 1),
    (3, "The Book of Sand", "Jorge Luis Borges", 1975, 2),
    (4, "Yaban", "Yakup Kadri", 1932, 2),
    (5, "Silent House", "Orhan Pamuk", 1983, 3),
    (6, "Motherland Hotel", "Yusuf Atılgan", 1973, 3),
    (7, "Sand: Borges Selection", "Anthology", 2010, 1),
];

/// The search query, keyed by the derive. The tenant is the branch the user
/// is browsing from; the search itself runs across all branches.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
pub struct Search<'a> {
    #[tenant]
    pub branch: &'a str,
    #[criterion]
    pub title: &'a str,
    #[criterion]
    pub author: &'a str,
}

/// One page of a branch's books, keyed by the derive.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
pub struct BranchList {
    #[tenant]
    pub branch: u32,
    #[criterion]
    pub page: u32,
}

/// A book as a branch listing returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Book {
    pub title: String,
    pub branch: u32,
}

/// The library database (SQLite, in memory: nothing is left behind).
pub struct Library {
    conn: Connection,
}

impl Library {
    /// Creates the schema and the data of the example.
    pub fn open() -> Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(
            "CREATE TABLE branches (
                 branch_id INTEGER PRIMARY KEY,
                 name      TEXT NOT NULL,
                 city      TEXT NOT NULL
             );
             CREATE TABLE books (
                 book_id   INTEGER PRIMARY KEY,
                 title     TEXT NOT NULL,
                 author    TEXT NOT NULL,
                 year      INTEGER NOT NULL,
                 branch_id INTEGER NOT NULL REFERENCES branches (branch_id)
             );",
        )?;
        for (id, name, city) in BRANCHES {
            conn.execute(
                "INSERT INTO branches (branch_id, name, city) VALUES (?1, ?2, ?3)",
                params![id, name, city],
            )?;
        }
        for (id, title, author, year, branch) in BOOKS {
            conn.execute(
                "INSERT INTO books (book_id, title, author, year, branch_id)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, title, author, year, branch],
            )?;
        }
        Ok(Library { conn })
    }

    /// Titles matching both filters, across all branches.
    pub fn search(&self, title: &str, author: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT title FROM books
             WHERE title LIKE '%' || ?1 || '%' AND author LIKE '%' || ?2 || '%'
             ORDER BY book_id",
        )?;
        let rows = stmt.query_map(params![title, author], |row| row.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Page `page` (from 1) of a branch's books.
    pub fn branch_page(&self, branch: u32, page: u32) -> Result<Vec<Book>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT title, branch_id FROM books WHERE branch_id = ?1
             ORDER BY book_id LIMIT ?2 OFFSET ?3",
        )?;
        let offset = page.saturating_sub(1) * PAGE_SIZE;
        let rows = stmt.query_map(params![branch, PAGE_SIZE, offset], |row| {
            Ok(Book {
                title: row.get(0)?,
                branch: row.get(1)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Corrects a book's title: a change to its branch's catalog.
    pub fn retitle(&self, book: u32, title: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE books SET title = ?1 WHERE book_id = ?2",
            params![title, book],
        )?;
        Ok(())
    }

    /// Adds a book to the catalog.
    pub fn add(
        &self,
        (id, title, author, year, branch): (u32, &str, &str, u32, u32),
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO books (book_id, title, author, year, branch_id)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, title, author, year, branch],
        )?;
        Ok(())
    }

    /// The books whose author matches, across all branches, with their ids.
    pub fn by_author(&self, author: &str) -> Result<Vec<Title>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT book_id, title FROM books WHERE author LIKE '%' || ?1 || '%'
             ORDER BY book_id",
        )?;
        let rows = stmt.query_map(params![author], |row| {
            Ok(Title {
                id: row.get(0)?,
                title: row.get(1)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The name of a branch, e.g. `Kadikoy`.
    pub fn branch_name(&self, branch: u32) -> Result<String> {
        Ok(self.conn.query_row(
            "SELECT name FROM branches WHERE branch_id = ?1",
            [branch],
            |row| row.get(0),
        )?)
    }
}

/// A cache in front of the database, the way an application uses one: look the
/// key up, and on a miss read the database and store the answer.
fn cached<V, F>(cache: &Cache<String, V>, key: &str, read: F) -> Result<(V, bool)>
where
    V: Clone + Send + Sync + 'static,
    F: FnOnce() -> Result<V>,
{
    if let Some(value) = cache.get(key) {
        return Ok((value, true));
    }
    let value = read()?;
    cache.insert(key.to_owned(), value.clone());
    Ok((value, false))
}

fn new_cache<V: Clone + Send + Sync + 'static>() -> Cache<String, V> {
    Cache::new(10_000)
}

// ---------------------------------------------------------------------------
// 1. Collision

/// The two searches of the collision scenario, both from branch 2.
pub const SEARCHES: [(&str, &str); 2] = [("Sand", "Borges"), ("Sand: Borges", "")];

/// The branch the collision searches are made from (the key's tenant).
pub const SEARCH_TENANT: &str = "branch-2";

/// A hand-concatenated search key, `search:{title}:{author}`, written the way
/// such keys usually end up: empty filters are left out, and whitespace is
/// removed because memcached refuses keys containing spaces.
pub fn hand_search_key(title: &str, author: &str) -> String {
    let mut key = String::from("search");
    for part in [title, author] {
        if !part.is_empty() {
            key.push(':');
            key.push_str(part);
        }
    }
    key.retain(|c| !c.is_whitespace());
    key
}

/// One search sent through the cache.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    pub title: String,
    pub author: String,
    pub key: String,
    /// Whether the answer came from the cache.
    pub hit: bool,
    /// What the cache layer answered.
    pub served: Vec<String>,
    /// What the database says.
    pub database: Vec<String>,
}

impl SearchOutcome {
    /// Whether the user got the database's answer.
    pub fn correct(&self) -> bool {
        self.served == self.database
    }
}

/// The same two searches, with hand-written keys and with derived keys.
#[derive(Debug, Clone)]
pub struct Collision {
    pub hand: Vec<SearchOutcome>,
    pub derived: Vec<SearchOutcome>,
}

fn run_searches<K>(library: &Library, key_of: K) -> Result<Vec<SearchOutcome>>
where
    K: Fn(&str, &str) -> Result<String>,
{
    let cache = new_cache::<Vec<String>>();
    let mut outcomes = Vec::new();
    for (title, author) in SEARCHES {
        let key = key_of(title, author)?;
        let (served, hit) = cached(&cache, &key, || library.search(title, author))?;
        outcomes.push(SearchOutcome {
            title: title.to_owned(),
            author: author.to_owned(),
            key,
            hit,
            served,
            database: library.search(title, author)?,
        });
    }
    Ok(outcomes)
}

/// Scenario 1: a separator inside a value makes two queries share a key.
pub fn collision(library: &Library) -> Result<Collision> {
    let hand = run_searches(library, |title, author| Ok(hand_search_key(title, author)))?;
    let derived = run_searches(library, |title, author| {
        let query = Search {
            branch: SEARCH_TENANT,
            title,
            author,
        };
        Ok(query.cache_key(GENERATION)?.into_string())
    })?;
    Ok(Collision { hand, derived })
}

// ---------------------------------------------------------------------------
// 2. Tenant leak

/// The branch that fills the cache and the branch that reads it next.
pub const LEAK_BRANCHES: (u32, u32) = (2, 3);

/// A hand-written listing key without the tenant: `list:page:{page}`.
pub fn hand_list_key(page: u32) -> String {
    format!("list:page:{page}")
}

/// Page 1 of one branch, then of another, through one cache.
#[derive(Debug, Clone)]
pub struct LeakRun {
    /// The key branch 2's request used.
    pub first_key: String,
    /// The key branch 3's request used.
    pub second_key: String,
    /// Whether branch 3's request was a cache hit.
    pub second_hit: bool,
    /// What branch 3 was served.
    pub served: Vec<Book>,
    /// How many of those records belong to another branch.
    pub foreign: usize,
}

/// The same two requests, with a hand-written key and with a derived key.
#[derive(Debug, Clone)]
pub struct TenantLeak {
    pub hand: LeakRun,
    pub derived: LeakRun,
}

fn run_leak<K>(library: &Library, key_of: K) -> Result<LeakRun>
where
    K: Fn(u32, u32) -> Result<String>,
{
    let cache = new_cache::<Vec<Book>>();
    let (first, second) = LEAK_BRANCHES;
    let first_key = key_of(first, 1)?;
    cached(&cache, &first_key, || library.branch_page(first, 1))?;
    let second_key = key_of(second, 1)?;
    let (served, second_hit) = cached(&cache, &second_key, || library.branch_page(second, 1))?;
    let foreign = served.iter().filter(|book| book.branch != second).count();
    Ok(LeakRun {
        first_key,
        second_key,
        second_hit,
        served,
        foreign,
    })
}

/// Scenario 2: a key without the tenant serves one branch's books to another.
pub fn tenant_leak(library: &Library) -> Result<TenantLeak> {
    let hand = run_leak(library, |_branch, page| Ok(hand_list_key(page)))?;
    let derived = run_leak(library, |branch, page| {
        Ok(BranchList { branch, page }
            .cache_key(GENERATION)?
            .into_string())
    })?;
    Ok(TenantLeak { hand, derived })
}

// ---------------------------------------------------------------------------
// 3. Cardinality

/// How the listing key is made in the cardinality scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// `#[derive(CacheKey)]` on `BranchList`: tenant and criteria, nothing else.
    Derived,
    /// A hand-written key that also holds the request id.
    ExtraField,
    /// A hand-written key without the tenant.
    MissingField,
}

impl KeyForm {
    /// The three forms, in the order of the table.
    pub const ALL: [KeyForm; 3] = [KeyForm::Derived, KeyForm::ExtraField, KeyForm::MissingField];

    /// The key of one request.
    pub fn key(self, request: &Request) -> Result<String> {
        Ok(match self {
            KeyForm::Derived => BranchList {
                branch: request.branch,
                page: request.page,
            }
            .cache_key(GENERATION)?
            .into_string(),
            KeyForm::ExtraField => format!(
                "list:{}:page:{}:{}",
                request.branch, request.page, request.request_id
            ),
            KeyForm::MissingField => hand_list_key(request.page),
        })
    }
}

/// One request of the cardinality scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub branch: u32,
    pub page: u32,
    pub request_id: String,
}

/// Request `i`: branch `(i % 3) + 1`, page `(i % 2) + 1`, request id `r-{i}`.
pub fn request(i: u32) -> Request {
    Request {
        branch: i % 3 + 1,
        page: i % 2 + 1,
        request_id: format!("r-{i}"),
    }
}

/// The figures of one key form over all requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardinalityRow {
    pub form: KeyForm,
    /// The key of request 0, as an illustration.
    pub sample_key: String,
    pub hits: u64,
    pub misses: u64,
    /// Answers that differ from a fresh database read.
    pub wrong: u64,
    /// Entries in the cache at the end.
    pub entries: u64,
}

impl CardinalityRow {
    /// Hits as a percentage of all requests.
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 {
            0.0
        } else {
            self.hits as f64 * 100.0 / total as f64
        }
    }
}

fn replay(library: &Library, form: KeyForm) -> Result<CardinalityRow> {
    let cache = new_cache::<Vec<Book>>();
    let mut row = CardinalityRow {
        form,
        sample_key: form.key(&request(0))?,
        hits: 0,
        misses: 0,
        wrong: 0,
        entries: 0,
    };
    for i in 0..REQUESTS {
        let request = request(i);
        let key = form.key(&request)?;
        let (served, hit) = cached(&cache, &key, || {
            library.branch_page(request.branch, request.page)
        })?;
        if hit {
            row.hits += 1;
        } else {
            row.misses += 1;
        }
        if served != library.branch_page(request.branch, request.page)? {
            row.wrong += 1;
        }
    }
    cache.run_pending_tasks();
    row.entries = cache.entry_count();
    Ok(row)
}

/// Scenario 3: the same 400 requests under each key form.
pub fn cardinality(library: &Library) -> Result<Vec<CardinalityRow>> {
    KeyForm::ALL
        .iter()
        .map(|&form| replay(library, form))
        .collect()
}

// ---------------------------------------------------------------------------
// 4. Invalidation

/// The book whose title branch 2 corrects, and its new title.
pub const RETITLED: (u32, &str) = (4, "Yaban (Strangers)");

/// One branch-list request of the invalidation scenario.
#[derive(Debug, Clone)]
pub struct ListOutcome {
    /// When it was made.
    pub step: Step,
    pub branch: u32,
    /// The key, read (with its generation) before the database was asked.
    pub key: String,
    pub hit: bool,
    pub served: Vec<Book>,
    pub database: Vec<Book>,
}

impl ListOutcome {
    /// Whether the branch got the database's answer.
    pub fn correct(&self) -> bool {
        self.served == self.database
    }
}

/// The steps of the invalidation scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Both branches list page 1: the cache fills.
    First,
    /// Both again: served from the cache.
    Again,
    /// Branch 2 corrected a title, and nobody bumped its generation.
    Updated,
    /// Branch 2's generation was bumped after the update.
    Bumped,
}

/// Scenario 4: page 1 of branches 2 and 3 through a cache keyed by
/// `GenerationStore::key_for`; branch 2 corrects a title; its cached list is
/// stale until branch 2's generation is bumped, which makes its next list a
/// miss with the new data while branch 3 keeps its hits.
pub fn invalidation() -> Result<Vec<ListOutcome>> {
    // A database of its own: this scenario changes the data.
    let library = Library::open()?;
    let generations = MemoryGenerations::new();
    let cache = new_cache::<Vec<Book>>();
    let list = |step: Step, branch: u32| -> Result<ListOutcome> {
        let query = BranchList { branch, page: 1 };
        // The key first, then the database: a bump that lands while the
        // database answers leaves the answer under the old generation.
        let key = generations.key_for(&query)?.into_string();
        let (served, hit) = cached(&cache, &key, || library.branch_page(branch, 1))?;
        Ok(ListOutcome {
            step,
            branch,
            key,
            hit,
            served,
            database: library.branch_page(branch, 1)?,
        })
    };
    let mut outcomes = vec![
        list(Step::First, 2)?,
        list(Step::First, 3)?,
        list(Step::Again, 2)?,
        list(Step::Again, 3)?,
    ];
    let (book, title) = RETITLED;
    library.retitle(book, title)?;
    outcomes.push(list(Step::Updated, 2)?);
    generations.invalidate(&BranchList::tenant_scope(&2)?)?;
    outcomes.push(list(Step::Bumped, 2)?);
    outcomes.push(list(Step::Bumped, 3)?);
    Ok(outcomes)
}

// ---------------------------------------------------------------------------
// 5. Invalidation by entity

/// A book as a search by author shows it: tagged with its id, one tag for
/// the whole catalog (every branch searches every branch's books).
#[derive(Debug, Clone, PartialEq, Eq, CacheTags)]
pub struct Title {
    #[tag(name = "book", global = "one catalog, searched from every branch")]
    pub id: u32,
    pub title: String,
}

/// A search by author, through the typed cache: its answer's tags are the
/// books it holds (`value_tags`).
#[derive(CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "by_author",
    value = Vec<Title>,
    ttl = "10m",
    value_tags
)]
pub struct ByAuthor<'a> {
    #[tenant]
    pub branch: u32,
    #[criterion]
    pub author: &'a str,
}

/// The book the entity scenario adds and edits.
pub const ALEPH: (u32, &str, &str, u32, u32) = (42, "The Aleph", "Jorge Luis Borges", 1949, 1);

/// Book 42's corrected title.
pub const ALEPH_RETITLED: &str = "El Aleph";

/// The searches of the entity scenario: `(branch, author)`.
pub const AUTHOR_SEARCHES: [(u32, &str); 3] = [(2, "Borges"), (3, "Borges"), (2, "Pamuk")];

/// One search of the entity scenario.
#[derive(Debug, Clone)]
pub struct FindOutcome {
    pub step: Step,
    pub branch: u32,
    pub author: &'static str,
    pub hit: bool,
    pub served: Vec<Title>,
    pub database: Vec<Title>,
}

impl FindOutcome {
    /// Whether the search got the database's answer.
    pub fn correct(&self) -> bool {
        self.served == self.database
    }
}

/// The searches of [`AUTHOR_SEARCHES`] through `cache` at `step`, each
/// beside the database's answer (`by_author`).
pub fn search_authors<S: GenerationStore>(
    cache: &MokaCache<S>,
    step: Step,
    by_author: impl Fn(&str) -> Result<Vec<Title>>,
) -> Result<Vec<FindOutcome>> {
    let mut outcomes = Vec::new();
    for (branch, author) in AUTHOR_SEARCHES {
        let mut hit = true;
        let served = cache.get_or_load(&ByAuthor { branch, author }, || {
            hit = false;
            by_author(author).map_err(|error| std::io::Error::other(error.to_string()))
        })?;
        outcomes.push(FindOutcome {
            step,
            branch,
            author,
            hit,
            served,
            database: by_author(author)?,
        });
    }
    Ok(outcomes)
}

/// Scenario 5: searches by author from two branches through a `MokaCache`,
/// their answers tagged with the books they hold; book 42 is retitled, and
/// bumping its tag misses exactly the searches that hold it, in every
/// branch, while the others keep their hits.
pub fn entity() -> Result<Vec<FindOutcome>> {
    // A database of its own, with book 42: this scenario changes the data.
    let library = Library::open()?;
    library.add(ALEPH)?;
    let cache = MokaCache::new(MemoryGenerations::new(), 1_000);
    let search = |step: Step| search_authors(&cache, step, |author| library.by_author(author));
    let mut outcomes = search(Step::First)?;
    outcomes.extend(search(Step::Again)?);
    library.retitle(ALEPH.0, ALEPH_RETITLED)?;
    outcomes.extend(search(Step::Updated)?);
    cache.invalidate(&Title::tag_scope_book::<ByAuthor>(&ALEPH.0)?)?;
    outcomes.extend(search(Step::Bumped)?);
    Ok(outcomes)
}
