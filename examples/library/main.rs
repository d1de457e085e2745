//! The library example: what a wrong cache key does, measured.
//!
//! A small library lives in an in-memory SQLite database with a `moka` cache in
//! front of it. The same queries are cached under hand-written keys and under
//! keys derived with `#[derive(CacheKey)]`, and every answer is compared with a
//! fresh database read.
//!
//! Run it with `cargo run --example library`. It is a package of its own
//! (`examples/Cargo.toml`), so that command builds only what it needs:
//! cache-key with moka, and SQLite. The scenarios live in
//! `examples/library/scenarios.rs`; `tests/library_example.rs` checks every
//! figure printed here.

mod change_log;
mod scenarios;

use std::error::Error;
use std::path::Path;

use scenarios::{
    BOOKS, BRANCHES, Book, CardinalityRow, KeyForm, LeakRun, Library, SearchOutcome, Step,
};

/// The struct that would produce each hand-written row of the cardinality
/// table, and the trybuild snapshot holding the derive's error for it.
const REFUSED: [(KeyForm, &str, &str); 2] = [
    (
        KeyForm::ExtraField,
        "tests/ui/sensitive/volatile_request_id.stderr",
        "#[derive(CacheKey)]
#[cache_key(namespace = \"library\", operation = \"list\")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
    #[criterion]
    request_id: String,
}",
    ),
    (
        KeyForm::MissingField,
        "tests/ui/tenant/missing_tenant.stderr",
        "#[derive(CacheKey)]
#[cache_key(namespace = \"library\", operation = \"list\")]
struct BranchList {
    #[criterion]
    page: u32,
}",
    ),
];

fn main() -> Result<(), Box<dyn Error>> {
    let library =
        Library::open().map_err(|e| format!("cannot create the library database: {e}"))?;

    title("cache-key: the library example");
    println!("A library in an in-memory SQLite database, a moka cache in front of it, and");
    println!("the same queries cached under hand-written keys and under keys derived with");
    println!("#[derive(CacheKey)]. Every answer is compared with a fresh database read.");
    println!();
    print_data(&library)?;

    collision(&library)?;
    tenant_leak(&library)?;
    cardinality(&library)?;
    invalidation(&library)?;
    entity()?;
    commit_log()?;
    Ok(())
}

// ---------------------------------------------------------------------------
// The data

fn print_data(library: &Library) -> Result<(), Box<dyn Error>> {
    let mut branches = Table::new(&["id", "branch", "city"], "lll");
    for (id, name, city) in BRANCHES {
        branches.row([id.to_string(), name.into(), city.into()]);
    }
    let mut books = Table::new(&["id", "title", "author", "year", "branch"], "rllrl");
    for (id, title, author, year, branch) in BOOKS {
        books.row([
            id.to_string(),
            title.into(),
            author.into(),
            year.to_string(),
            format!("{branch} {}", library.branch_name(branch)?),
        ]);
    }
    println!("Branches");
    branches.print();
    println!();
    println!("Books");
    books.print();
    println!();
    println!("Search: titles where title LIKE %title% AND author LIKE %author%, all branches.");
    println!(
        "Branch list: a branch's titles, {} per page, ordered by id.",
        scenarios::PAGE_SIZE
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// 1. Collision

fn collision(library: &Library) -> Result<(), Box<dyn Error>> {
    let result = scenarios::collision(library)?;
    heading("1. Collision: a separator inside a value");
    println!(
        "A user browsing from {} runs two searches, one after the other.",
        scenarios::SEARCH_TENANT
    );
    println!();
    println!("Hand-written key: format!(\"search:{{title}}:{{author}}\"), empty filters left out");
    println!("and spaces removed (memcached refuses keys with spaces).");
    println!();
    search_table(&result.hand).print();
    println!();
    println!("Both searches land on one key: the second user is served the first one's");
    println!("answer, and nothing fails. A cache never errors, it is silently wrong.");
    println!();
    println!("Derived key:");
    println!();
    println!("    #[derive(CacheKey)]");
    println!("    #[cache_key(namespace = \"library\", operation = \"search\")]");
    println!("    struct Search<'a> {{");
    println!("        #[tenant]    branch: &'a str,");
    println!("        #[criterion] title: &'a str,");
    println!("        #[criterion] author: &'a str,");
    println!("    }}");
    println!();
    search_table(&result.derived).print();
    println!();
    println!("Every value is escaped (`:` is %3A, a space %20), so no value can forge a");
    println!("separator: two different searches, two keys, and each gets its own answer.");
    Ok(())
}

fn search_table(outcomes: &[SearchOutcome]) -> Table {
    let mut table = Table::new(
        &["title, author", "cache", "served", "database", "answer"],
        "lllll",
    );
    for outcome in outcomes {
        table.row([
            format!("{:?}, {:?}", outcome.title, outcome.author),
            hit_or_miss(outcome.hit).into(),
            titles(&outcome.served),
            titles(&outcome.database),
            verdict(outcome.correct()).into(),
        ]);
        table.note(format!("key {}", outcome.key));
    }
    table
}

// ---------------------------------------------------------------------------
// 2. Tenant leak

fn tenant_leak(library: &Library) -> Result<(), Box<dyn Error>> {
    let result = scenarios::tenant_leak(library)?;
    let (first, second) = scenarios::LEAK_BRANCHES;
    heading("2. Tenant leak: a key without the tenant");
    println!(
        "Branch {first} ({}) opens page 1 of its books, then branch {second} ({}) opens",
        library.branch_name(first)?,
        library.branch_name(second)?
    );
    println!("its own page 1.");
    println!();
    println!("Hand-written key: format!(\"list:page:{{page}}\")");
    println!();
    leak_table(library, &result.hand)?.print();
    println!();
    println!("Derived key: BranchList {{ #[tenant] branch: u32, #[criterion] page: u32 }}");
    println!();
    leak_table(library, &result.derived)?.print();
    println!();
    println!(
        "Records branch {second} was served that are not its own: {} with the hand-written",
        result.hand.foreign
    );
    println!(
        "key, {} with the derived key. The tenant is the authorization scope: a key",
        result.derived.foreign
    );
    println!("without it shares one cache entry among all branches.");
    Ok(())
}

fn leak_table(library: &Library, run: &LeakRun) -> Result<Table, Box<dyn Error>> {
    let (first, second) = scenarios::LEAK_BRANCHES;
    let mut table = Table::new(&["request", "key", "cache", "not its own"], "lllr");
    table.row([
        format!("branch {first}, page 1"),
        run.first_key.clone(),
        hit_or_miss(false).into(),
        String::new(),
    ]);
    table.row([
        format!("branch {second}, page 1"),
        run.second_key.clone(),
        hit_or_miss(run.second_hit).into(),
        run.foreign.to_string(),
    ]);
    table.note(format!("served {}", books(library, &run.served)?));
    Ok(table)
}

// ---------------------------------------------------------------------------
// 3. Cardinality

fn cardinality(library: &Library) -> Result<(), Box<dyn Error>> {
    let rows = scenarios::cardinality(library)?;
    let sample = scenarios::request(0);
    heading("3. Cardinality: what belongs in the key");
    println!(
        "{} requests; request i is branch (i % 3) + 1, page (i % 2) + 1, request id r-{{i}}.",
        scenarios::REQUESTS
    );
    println!(
        "Keys of request 0 (branch {}, page {}, request id {}):",
        sample.branch, sample.page, sample.request_id
    );
    println!();
    for row in &rows {
        println!("  {:<31}  {}", form_name(row.form), row.sample_key);
    }
    println!();
    let mut table = Table::new(
        &[
            "key form",
            "hits",
            "misses",
            "hit ratio",
            "wrong",
            "entries",
        ],
        "lrrrrr",
    );
    for row in &rows {
        table.row([
            form_name(row.form).into(),
            row.hits.to_string(),
            row.misses.to_string(),
            format!("{:.1} %", row.hit_ratio()),
            row.wrong.to_string(),
            row.entries.to_string(),
        ]);
    }
    table.print();
    println!();
    println!("\"wrong\" counts answers that differ from a fresh database read.");
    println!();
    println!("Only the first row can be written with #[derive(CacheKey)]. The other two use");
    println!("format! strings, because the derive refuses the structs that would produce them:");
    for (form, snapshot, source) in REFUSED {
        println!();
        println!("{}:", form_name(form));
        println!();
        print_indented(source);
        println!();
        // The snapshots are the workspace's, the directory above this package.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(snapshot);
        match std::fs::read_to_string(path) {
            Ok(stderr) => {
                println!("  the compiler says ({snapshot}):");
                println!();
                print_indented(stderr.trim_end());
            }
            Err(e) => println!("  (the snapshot {snapshot} is missing: {e})"),
        }
    }
    println!();
    lesson(&rows);
    Ok(())
}

fn lesson(rows: &[CardinalityRow]) {
    let Some(best) = rows
        .iter()
        .max_by(|a, b| a.hit_ratio().total_cmp(&b.hit_ratio()))
    else {
        return;
    };
    println!("Lesson");
    println!("------");
    println!(
        "The highest hit ratio ({:.1} %) belongs to the wrong implementation: the",
        best.hit_ratio()
    );
    println!(
        "{} key answered {} of {} requests with another",
        form_name(best.form),
        best.wrong,
        best.hits + best.misses
    );
    println!("branch's books. The key with an extra field is never wrong, and never hits.");
    println!("A hit ratio measures the cache, not the answers: only the key can make them");
    println!("right, and the derive checks the key when it compiles.");
}

// ---------------------------------------------------------------------------
// 4. Invalidation

fn invalidation(library: &Library) -> Result<(), Box<dyn Error>> {
    let outcomes = scenarios::invalidation()?;
    let (book, title) = scenarios::RETITLED;
    heading("4. Invalidation: bumping one branch's generation");
    println!("Branches 2 and 3 list page 1 through the cache. The key's generation comes");
    println!("from a MemoryGenerations store, read from the query itself before the");
    println!("database is asked:");
    println!();
    println!("    let key = generations.key_for(&BranchList {{ branch, page: 1 }})?;");
    println!();
    println!("Then branch 2 corrects the title of book {book} to {title:?}, and later bumps its");
    println!("generation:");
    println!();
    println!("    generations.invalidate(&BranchList::tenant_scope(&2)?)?;");
    println!();
    let mut table = Table::new(&["step", "branch", "key", "cache", "answer"], "lrlll");
    for outcome in &outcomes {
        table.row([
            step_name(outcome.step).into(),
            outcome.branch.to_string(),
            outcome.key.clone(),
            hit_or_miss(outcome.hit).into(),
            verdict(outcome.correct()).into(),
        ]);
        table.note(format!("served {}", books(library, &outcome.served)?));
    }
    table.print();
    println!();
    println!("Until the bump, branch 2 is served its old list: the cache cannot know the");
    println!("data changed. The bump raises the generation of every key of branch 2, so");
    println!("its next list is a miss with the new title, while branch 3's keys, and hits,");
    println!("stay as they were. Nothing is deleted: the old entries are unreachable and");
    println!("leave the cache when it evicts them (give entries a time to live).");
    Ok(())
}

// ---------------------------------------------------------------------------
// 5. Invalidation by entity

fn entity() -> Result<(), Box<dyn Error>> {
    let outcomes = scenarios::entity()?;
    let (book, title, author, ..) = scenarios::ALEPH;
    heading("5. Invalidation by entity: editing book 42");
    println!("Searches by author go through a typed cache (MokaCache), their answers");
    println!("tagged with the books they hold: the value type derives CacheTags,");
    println!();
    println!("    #[derive(CacheTags)]");
    println!(
        "    struct Title {{ #[tag(name = \"book\", global = \"...\")] id: u32, title: String }}"
    );
    println!();
    println!("and the query says `value_tags`. The catalog gains book {book}, {title:?} by");
    println!(
        "{author}, which then gets the corrected title {:?}, and its tag is bumped:",
        scenarios::ALEPH_RETITLED
    );
    println!();
    println!("    cache.invalidate(&Title::tag_scope_book::<ByAuthor>(&{book})?)?;");
    println!();
    print_finds(&outcomes, step_name);
    println!();
    println!("Until the bump, both branches' searches for Borges serve the old title. The");
    println!("bump of book {book}'s tag is one counter, whatever the number of answers holding");
    println!("it: every answer that holds book {book} misses, in every branch and query type,");
    println!("and the search for Pamuk, which does not hold it, keeps its hit.");
    Ok(())
}

// ---------------------------------------------------------------------------
// 6. Invalidation from the commit log

fn commit_log() -> Result<(), Box<dyn Error>> {
    let (book, ..) = scenarios::ALEPH;
    heading("6. Invalidation from the commit log: book 42 edited with plain SQL");
    println!("The catalog now lives in PostgreSQL, and the service has no invalidation code:");
    println!("a consumer of the database's logical replication (crate cache-key-pg) bumps the");
    println!("tag of every row a committed transaction changed, as declared once:");
    println!();
    println!("    ChangeMap::new().namespace::<ByAuthor>().table(\"books\", |row, bumps| {{");
    println!("        bumps.push(Title::tag_scope_book::<ByAuthor>(&row.get::<u32>(\"id\")?)?);");
    println!("        Ok(())");
    println!("    }})?");
    println!();
    let Some(outcomes) = change_log::run()? else {
        println!("Skipped: PostgreSQL is not installed (apt-get install postgresql).");
        return Ok(());
    };
    println!(
        "Another program runs UPDATE books SET title = {:?} WHERE id = {book};",
        scenarios::ALEPH_RETITLED
    );
    println!("the searches wait for the consumer to apply that commit (by its WAL position):");
    println!();
    print_finds(&outcomes, |step| match step {
        Step::Bumped => "after the SQL edit",
        step => step_name(step),
    });
    println!();
    println!("Nobody called invalidate: the commit did. The searches holding book {book} miss");
    println!("and serve the new title; the search for Pamuk keeps its hit.");
    Ok(())
}

/// The searches by author, a row each, with what each served.
fn print_finds(outcomes: &[scenarios::FindOutcome], step_name: fn(Step) -> &'static str) {
    let mut table = Table::new(&["step", "branch", "author", "cache", "answer"], "lrlll");
    for outcome in outcomes {
        table.row([
            step_name(outcome.step).into(),
            outcome.branch.to_string(),
            outcome.author.into(),
            hit_or_miss(outcome.hit).into(),
            verdict(outcome.correct()).into(),
        ]);
        let titles: Vec<&str> = outcome.served.iter().map(|t| t.title.as_str()).collect();
        table.note(format!("served {}", titles.join(", ")));
    }
    table.print();
}

fn step_name(step: Step) -> &'static str {
    match step {
        Step::First => "first visit",
        Step::Again => "again",
        Step::Updated => "after the update",
        Step::Bumped => "after the bump",
    }
}

fn form_name(form: KeyForm) -> &'static str {
    match form {
        KeyForm::Derived => "derived (tenant + criteria)",
        KeyForm::ExtraField => "extra field (request id in key)",
        KeyForm::MissingField => "missing field (no tenant)",
    }
}

// ---------------------------------------------------------------------------
// Formatting

fn title(text: &str) {
    let rule = "=".repeat(text.chars().count());
    println!("{rule}\n{text}\n{rule}\n");
}

fn heading(text: &str) {
    println!("\n\n{text}\n{}\n", "-".repeat(text.chars().count()));
}

fn print_indented(text: &str) {
    for line in text.lines() {
        println!("    {line}");
    }
}

fn hit_or_miss(hit: bool) -> &'static str {
    if hit { "hit" } else { "miss" }
}

fn verdict(correct: bool) -> &'static str {
    if correct { "right" } else { "WRONG" }
}

fn titles(titles: &[String]) -> String {
    if titles.is_empty() {
        "(nothing)".into()
    } else {
        titles.join(", ")
    }
}

fn books(library: &Library, books: &[Book]) -> Result<String, Box<dyn Error>> {
    let named = books
        .iter()
        .map(|book| {
            Ok(format!(
                "{} ({})",
                book.title,
                library.branch_name(book.branch)?
            ))
        })
        .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
    Ok(titles(&named))
}

/// A plain-text table: columns as wide as their widest cell, and under any row
/// an optional note line.
struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<(Vec<String>, Option<String>)>,
}

impl Table {
    /// `align` has one letter per column: `l` (left) or `r` (right).
    fn new(headers: &[&str], align: &str) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            right: align.chars().map(|c| c == 'r').collect(),
            rows: Vec::new(),
        }
    }

    fn row<const N: usize>(&mut self, cells: [String; N]) {
        self.rows.push((cells.into(), None));
    }

    fn note(&mut self, note: String) {
        if let Some(last) = self.rows.last_mut() {
            last.1 = Some(note);
        }
    }

    fn print(&self) {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for (cells, _) in &self.rows {
            for (width, cell) in widths.iter_mut().zip(cells) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from(" ");
            for ((cell, width), right) in cells.iter().zip(&widths).zip(&self.right) {
                let pad = " ".repeat(width - cell.chars().count());
                if *right {
                    out.push_str(&format!(" {pad}{cell} "));
                } else {
                    out.push_str(&format!(" {cell}{pad} "));
                }
            }
            println!("{}", out.trim_end());
        };
        line(&self.headers);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule);
        for (cells, note) in &self.rows {
            line(cells);
            if let Some(note) = note {
                println!("    {note}");
            }
        }
    }
}
