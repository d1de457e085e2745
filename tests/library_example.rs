//! Every figure `cargo run --example library` prints, checked: the example runs
//! the scenarios of this module, so it cannot drift into a toy.

#[path = "../examples/library/scenarios.rs"]
mod scenarios;

use scenarios::{Book, KeyForm, Library, Step, request};

fn library() -> Library {
    Library::open().expect("the example database opens")
}

fn book(title: &str, branch: u32) -> Book {
    Book {
        title: title.into(),
        branch,
    }
}

#[test]
fn the_data_is_the_example_data() {
    let library = library();
    assert_eq!(library.branch_name(3).unwrap(), "Kadikoy");
    assert_eq!(
        library.search("Sand", "Borges").unwrap(),
        ["The Book of Sand"]
    );
    assert_eq!(
        library.search("Sand: Borges", "").unwrap(),
        ["Sand: Borges Selection"]
    );
    assert_eq!(
        library.branch_page(1, 2).unwrap(),
        [book("Sand: Borges Selection", 1)]
    );
    assert_eq!(library.branch_page(2, 2).unwrap(), []);
}

#[test]
fn a_hand_written_key_is_shared_and_serves_the_wrong_title() {
    let result = scenarios::collision(&library()).unwrap();
    let [first, second] = &result.hand[..] else {
        panic!("two searches expected, got {:?}", result.hand);
    };
    assert_eq!(
        (first.title.as_str(), first.author.as_str()),
        ("Sand", "Borges")
    );
    assert_eq!(
        (second.title.as_str(), second.author.as_str()),
        ("Sand: Borges", "")
    );
    assert_eq!(first.key, "search:Sand:Borges");
    assert_eq!(second.key, first.key, "the hand-written key is shared");

    assert!(!first.hit);
    assert_eq!(first.served, ["The Book of Sand"]);
    assert!(first.correct());

    assert!(second.hit, "the second search is served from the cache");
    assert_eq!(second.served, ["The Book of Sand"]);
    assert_eq!(second.database, ["Sand: Borges Selection"]);
    assert!(!second.correct());
}

#[test]
fn derived_keys_differ_and_each_answer_equals_the_database() {
    let result = scenarios::collision(&library()).unwrap();
    let [first, second] = &result.derived[..] else {
        panic!("two searches expected, got {:?}", result.derived);
    };
    assert_eq!(
        first.key,
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand"
    );
    assert_eq!(
        second.key,
        "library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges"
    );
    for outcome in [first, second] {
        assert!(!outcome.hit, "{outcome:?}");
        assert!(outcome.correct(), "{outcome:?}");
    }
    assert_eq!(first.served, ["The Book of Sand"]);
    assert_eq!(second.served, ["Sand: Borges Selection"]);
    assert_eq!(first.author, "Borges");
    assert_eq!(second.author, "");
}

#[test]
fn a_key_without_the_tenant_leaks_two_records_the_derived_key_none() {
    let result = scenarios::tenant_leak(&library()).unwrap();

    let hand = &result.hand;
    assert_eq!(hand.first_key, "list:page:1");
    assert_eq!(hand.second_key, hand.first_key);
    assert!(hand.second_hit);
    assert_eq!(hand.served, [book("The Book of Sand", 2), book("Yaban", 2)]);
    assert_eq!(hand.foreign, 2);

    let derived = &result.derived;
    assert_eq!(derived.first_key, "library:s1:g4:t2:list:page=1");
    assert_eq!(derived.second_key, "library:s1:g4:t3:list:page=1");
    assert!(!derived.second_hit);
    assert_eq!(
        derived.served,
        [book("Silent House", 3), book("Motherland Hotel", 3)]
    );
    assert_eq!(derived.foreign, 0);
}

#[test]
fn requests_follow_the_documented_pattern() {
    let r = request(5);
    assert_eq!((r.branch, r.page, r.request_id.as_str()), (3, 2, "r-5"));
}

#[test]
fn the_cardinality_table() {
    let rows = scenarios::cardinality(&library()).unwrap();
    let figures: Vec<_> = rows
        .iter()
        .map(|row| (row.form, row.hits, row.misses, row.wrong, row.entries))
        .collect();
    assert_eq!(
        figures,
        [
            (KeyForm::Derived, 394, 6, 0, 6),
            (KeyForm::ExtraField, 0, 400, 0, 400),
            (KeyForm::MissingField, 398, 2, 200, 2),
        ]
    );
    let ratios: Vec<String> = rows
        .iter()
        .map(|row| format!("{:.1}", row.hit_ratio()))
        .collect();
    assert_eq!(ratios, ["98.5", "0.0", "99.5"]);

    let keys: Vec<&str> = rows.iter().map(|row| row.sample_key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "library:s1:g4:t1:list:page=1",
            "list:1:page:1:r-0",
            "list:page:1"
        ]
    );

    // The lesson: the highest hit ratio belongs to the wrong implementation.
    let best = rows
        .iter()
        .max_by(|a, b| a.hit_ratio().total_cmp(&b.hit_ratio()))
        .unwrap();
    assert_eq!(best.form, KeyForm::MissingField);
    assert!(best.wrong > 0);
}

#[test]
fn bumping_branch_2_makes_its_next_list_a_miss_with_the_new_data_while_branch_3_keeps_its_hits() {
    let outcomes = scenarios::invalidation().unwrap();
    let seen: Vec<_> = outcomes
        .iter()
        .map(|o| (o.step, o.branch, o.hit, o.correct()))
        .collect();
    assert_eq!(
        seen,
        [
            (Step::First, 2, false, true),
            (Step::First, 3, false, true),
            (Step::Again, 2, true, true),
            (Step::Again, 3, true, true),
            // The update without a bump: branch 2 is served its old list.
            (Step::Updated, 2, true, false),
            // After the bump: a miss with the new data; branch 3 still hits.
            (Step::Bumped, 2, false, true),
            (Step::Bumped, 3, true, true),
        ]
    );
    let [first_2, first_3, _, _, stale, bumped_2, bumped_3] = &outcomes[..] else {
        panic!("seven requests expected, got {outcomes:?}");
    };
    assert_eq!(
        stale.served,
        [book("The Book of Sand", 2), book("Yaban", 2)]
    );
    assert_eq!(
        bumped_2.served,
        [book("The Book of Sand", 2), book("Yaban (Strangers)", 2)]
    );
    assert_eq!(stale.key, first_2.key);
    let generation = |key: &str| cache_key::decode(key).unwrap().generation();
    assert!(generation(&bumped_2.key) > generation(&first_2.key));
    assert_ne!(bumped_2.key, first_2.key);
    assert_eq!(bumped_3.key, first_3.key);
    assert!(
        bumped_2.key.ends_with(":t2:list:page=1"),
        "{}",
        bumped_2.key
    );
}

/// The one test an application keeps for its query types: no two share a key
/// space (namespace and operation).
#[test]
fn query_types_have_key_spaces_of_their_own() {
    cache_key::registry::check().unwrap();
}

/// The example's query types keep a reviewed key layout: a change to one of
/// them fails here until its schema is bumped or the lock is re-recorded
/// (`CACHE_KEY_BLESS=1 cargo test --workspace --test library_example`).
#[test]
fn the_example_key_layouts_are_locked() {
    if let Err(error) = cache_key::registry::check_lock("examples/library/cache-keys.lock") {
        panic!("{error}");
    }
}

#[test]
fn bumping_a_book_misses_the_searches_that_hold_it_and_keeps_the_others() {
    let outcomes = scenarios::entity().unwrap();
    let at = |step: Step| -> Vec<(u32, &str, bool, bool)> {
        outcomes
            .iter()
            .filter(|outcome| outcome.step == step)
            .map(|o| (o.branch, o.author, o.hit, o.correct()))
            .collect()
    };
    assert_eq!(
        at(Step::First),
        [
            (2, "Borges", false, true),
            (3, "Borges", false, true),
            (2, "Pamuk", false, true)
        ]
    );
    assert_eq!(
        at(Step::Again),
        [
            (2, "Borges", true, true),
            (3, "Borges", true, true),
            (2, "Pamuk", true, true)
        ]
    );
    // Retitled, not yet bumped: the cache cannot know.
    assert_eq!(
        at(Step::Updated),
        [
            (2, "Borges", true, false),
            (3, "Borges", true, false),
            (2, "Pamuk", true, true)
        ]
    );
    // One bump: every search holding book 42 misses, in both branches.
    bumped_misses_the_searches_holding_book_42(&outcomes);
}

/// After book 42's bump: its searches miss and serve its new title, the
/// search for Pamuk keeps its hit.
fn bumped_misses_the_searches_holding_book_42(outcomes: &[scenarios::FindOutcome]) {
    let bumped: Vec<_> = outcomes.iter().filter(|o| o.step == Step::Bumped).collect();
    let seen: Vec<_> = bumped
        .iter()
        .map(|o| (o.branch, o.author, o.hit, o.correct()))
        .collect();
    assert_eq!(
        seen,
        [
            (2, "Borges", false, true),
            (3, "Borges", false, true),
            (2, "Pamuk", true, true)
        ]
    );
    let titles: Vec<&str> = bumped[0].served.iter().map(|t| t.title.as_str()).collect();
    assert_eq!(titles, ["The Book of Sand", scenarios::ALEPH_RETITLED]);
}

/// Scenario 6 runs a PostgreSQL of its own.
#[path = "../examples/library/change_log.rs"]
mod change_log;

#[test]
#[ignore = "starts PostgreSQL: cargo test -- --include-ignored"]
fn an_edit_in_plain_sql_misses_the_searches_holding_the_book_and_keeps_the_others() {
    let Some(outcomes) = change_log::run().unwrap() else {
        return;
    };
    let at = |step: Step| -> Vec<(u32, &str, bool, bool)> {
        outcomes
            .iter()
            .filter(|outcome| outcome.step == step)
            .map(|o| (o.branch, o.author, o.hit, o.correct()))
            .collect()
    };
    let searches = |hit: bool| {
        [
            (2, "Borges", hit, true),
            (3, "Borges", hit, true),
            (2, "Pamuk", hit, true),
        ]
    };
    assert_eq!(at(Step::First), searches(false));
    assert_eq!(at(Step::Again), searches(true));
    // The consumer's bump, no invalidation in the service.
    bumped_misses_the_searches_holding_book_42(&outcomes);
}
