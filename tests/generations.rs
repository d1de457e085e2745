//! Generations in the process: the typed entry points, the scopes, the bump
//! model over random bump sequences (`proptest`), and the race rule under
//! threads (0 stale reads).
//!
//! The same model and race run against Redis in `tests/redis_generations.rs`.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use cache_key::generation::{CounterKind, GenerationError, GenerationErrorKind};
use cache_key::{
    CacheKey, GenerationScope, GenerationStore, KeyError, MemoryGenerations, Scopes, decode,
};
use common::generations::{
    Bump, Entries, Feed, Instance, Issues, List, ORGS, Op, Origin, Pulls, REPOS, Trending, race,
    read_through, run_model,
};
use proptest::prelude::*;

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
struct BranchList {
    #[tenant]
    branch: u32,
    #[criterion]
    page: u32,
}

// An integer tenant like `BranchList`'s, so one tenant scope covers both (`fixtures::Search` has a text tenant).
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct Search<'a> {
    #[tenant]
    branch: u32,
    #[criterion]
    title: &'a str,
}

#[test]
fn a_key_is_built_with_its_own_tenants_generation() {
    let store = MemoryGenerations::new();
    let branch_2 = BranchList { branch: 2, page: 1 };
    let branch_3 = BranchList { branch: 3, page: 1 };
    let key_2 = store.key_for(&branch_2).unwrap();
    let key_3 = store.key_for(&branch_3).unwrap();
    let generation = store.generation_for(&branch_2).unwrap();
    assert_eq!(key_2, branch_2.cache_key(generation).unwrap());
    assert_eq!(decode(key_2.as_str()).unwrap().generation(), generation);

    store
        .invalidate(&BranchList::tenant_scope(&2u32).unwrap())
        .unwrap();
    let new_key_2 = store.key_for(&branch_2).unwrap();
    assert_ne!(new_key_2, key_2);
    assert!(store.generation_for(&branch_2).unwrap() > generation);
    assert_eq!(
        store.key_for(&branch_3).unwrap(),
        key_3,
        "branch 3 keeps its keys"
    );

    let mut out = String::from("prefix ");
    let written = store.write_key_for(&branch_2, &mut out).unwrap();
    assert_eq!(out, format!("prefix {new_key_2}"));
    assert_eq!(written, store.generation_for(&branch_2).unwrap());
}

#[test]
fn a_store_can_be_shared_as_a_trait_object() {
    let store: std::sync::Arc<dyn GenerationStore + Send + Sync> =
        std::sync::Arc::new(MemoryGenerations::with_slots(16));
    let query = BranchList { branch: 2, page: 1 };
    let before = store.key_for(&query).unwrap();
    let shared = std::sync::Arc::clone(&store);
    std::thread::spawn(move || shared.invalidate(&BranchList::tenant_scope(&2u32).unwrap()))
        .join()
        .unwrap()
        .unwrap();
    assert_ne!(store.key_for(&query).unwrap(), before);
}

#[test]
fn a_tenant_scope_covers_every_query_type_of_the_namespace() {
    let store = MemoryGenerations::new();
    let list = BranchList { branch: 2, page: 1 };
    let search = Search {
        branch: 2,
        title: "Sand",
    };
    let other = Search {
        branch: 3,
        title: "Sand",
    };
    let read = |store: &MemoryGenerations| {
        [
            store.generation_for(&list).unwrap(),
            store.generation_for(&search).unwrap(),
            store.generation_for(&other).unwrap(),
        ]
    };
    let start = read(&store);
    // Taken from `BranchList`, the tenant scope also covers `Search` of branch 2.
    store
        .invalidate(&BranchList::tenant_scope(&2u32).unwrap())
        .unwrap();
    let after_tenant = read(&store);
    assert!(after_tenant[0] > start[0] && after_tenant[1] > start[1]);
    assert_eq!(after_tenant[2], start[2]);

    // The operation scope covers `list` of branch 2 only.
    store
        .invalidate(&BranchList::operation_scope(&2u32).unwrap())
        .unwrap();
    let after_operation = read(&store);
    assert!(after_operation[0] > after_tenant[0]);
    assert_eq!(after_operation[1..], after_tenant[1..]);

    // The namespace covers them all.
    store.invalidate_namespace::<Search>().unwrap();
    let after_namespace = read(&store);
    for (after, before) in after_namespace.iter().zip(after_operation) {
        assert!(*after > before);
    }
}

#[test]
fn an_organization_is_invalidated_with_all_its_repositories() {
    let store = MemoryGenerations::new();
    let rocket = Issues {
        org: "acme",
        repo: "rocket",
        page: 1,
    };
    let anvil = Pulls {
        org: "acme",
        repo: "anvil",
        page: 1,
    };
    let feed = Feed { org: "acme" };
    let elsewhere = Issues {
        org: "acme-corp",
        repo: "rocket",
        page: 1,
    };
    let read = |store: &MemoryGenerations| {
        [
            store.generation_for(&rocket).unwrap(),
            store.generation_for(&anvil).unwrap(),
            store.generation_for(&feed).unwrap(),
            store.generation_for(&elsewhere).unwrap(),
        ]
    };
    let start = read(&store);
    store
        .invalidate(&Issues::tenant_scope_by_org(&"acme").unwrap())
        .unwrap();
    let after_org = read(&store);
    assert!(after_org[..3].iter().zip(&start[..3]).all(|(a, b)| a > b));
    assert_eq!(
        after_org[3], start[3],
        "`acme-corp` is another organization"
    );

    store
        .invalidate(&Issues::tenant_scope((&"acme", &"rocket")).unwrap())
        .unwrap();
    let after_repo = read(&store);
    assert!(after_repo[0] > after_org[0]);
    assert_eq!(after_repo[1..], after_org[1..]);
}

/// As many tenant fields as the derive accepts: the typed scopes take them
/// all as one tuple (`TenantRefs` has an impl for the widest).
#[test]
fn the_widest_compound_tenant_has_typed_scopes() {
    #[derive(CacheKey)]
    #[cache_key(namespace = "crm", operation = "list")]
    struct Wide {
        #[tenant]
        t1: u32,
        #[tenant]
        t2: u32,
        #[tenant]
        t3: u32,
        #[tenant]
        t4: u32,
        #[tenant]
        t5: u32,
        #[tenant]
        t6: u32,
        #[tenant]
        t7: u32,
        #[tenant]
        t8: u32,
        #[tenant]
        t9: u32,
        #[tenant]
        t10: u32,
        #[tenant]
        t11: u32,
        #[tenant]
        t12: &'static str,
        #[criterion]
        page: u32,
    }
    let query = |t12| Wide {
        t1: 1,
        t2: 2,
        t3: 3,
        t4: 4,
        t5: 5,
        t6: 6,
        t7: 7,
        t8: 8,
        t9: 9,
        t10: 10,
        t11: 11,
        t12,
        page: 1,
    };
    // The tenant values in `Wide`'s own `Tenant` type, as generic code writes them.
    fn tenant(q: &Wide) -> <Wide as CacheKey>::Tenant<'_> {
        (
            &q.t1, &q.t2, &q.t3, &q.t4, &q.t5, &q.t6, &q.t7, &q.t8, &q.t9, &q.t10, &q.t11, &q.t12,
        )
    }
    let (mine, other) = (query("a"), query("b"));
    let store = MemoryGenerations::new();
    store
        .invalidate(&Wide::tenant_scope(tenant(&mine)).unwrap())
        .unwrap();
    store
        .invalidate(&Wide::operation_scope(tenant(&mine)).unwrap())
        .unwrap();
    assert_eq!(store.generation_for(&mine).unwrap(), 2);
    assert_eq!(store.generation_for(&other).unwrap(), 0);
}

#[test]
fn scopes_are_made_from_types_and_tenant_values_only() {
    let scope = GenerationScope::tenant_unchecked::<Issues>(&[&"a,b", &"x:y"]).unwrap();
    assert_eq!(scope.kind(), CounterKind::Tenant);
    assert_eq!(scope.counter().name(), "forge:g:t{a%2Cb,x%3Ay}");
    let scope = GenerationScope::operation_unchecked::<Trending>(&[]).unwrap();
    assert_eq!(scope.counter().name(), "forge:g:t{}:trending");
    assert_eq!(
        GenerationScope::operation_of(&Feed { org: "acme*" })
            .unwrap()
            .counter()
            .name(),
        "forge:g:t{acme*}:feed"
    );

    let too_many = GenerationScope::tenant_unchecked::<Feed>(&[&"acme", &"rocket"]).unwrap_err();
    assert_eq!(too_many.kind(), GenerationErrorKind::TenantValues);
    assert_eq!(
        too_many.to_string(),
        "`forge:feed` has the tenant fields (org): this scope takes 1 tenant values, 2 given"
    );
    let too_few = GenerationScope::operation_unchecked::<Issues>(&[&"acme"]).unwrap_err();
    assert_eq!(
        too_few.to_string(),
        "`forge:issues` has the tenant fields (org, repo): this scope takes 2 tenant values, 1 given"
    );
    let none = GenerationScope::tenant_unchecked::<Issues>(&[]).unwrap_err();
    assert_eq!(none.kind(), GenerationErrorKind::TenantValues);
    assert!(
        none.to_string()
            .ends_with("takes 1 to 2 tenant values, 0 given"),
        "{none}"
    );
    let global = GenerationScope::tenant_unchecked::<Trending>(&[&"acme"]).unwrap_err();
    assert_eq!(global.kind(), GenerationErrorKind::TenantValues);
    assert!(global.to_string().contains("is global"), "{global}");
    assert!(GenerationScope::tenant_of(&Trending { page: 1 }).is_err());

    let empty = GenerationScope::tenant_unchecked::<Issues>(&[&"acme", &""]).unwrap_err();
    assert!(
        matches!(empty.key_error(), Some(KeyError::EmptyTenant { field }) if field == "repo"),
        "{empty:?}"
    );
    let store = MemoryGenerations::new();
    let empty = store
        .key_for(&Feed { org: "" })
        .expect_err("an empty tenant has no generation");
    assert!(matches!(
        empty.key_error(),
        Some(KeyError::EmptyTenant { .. })
    ));
}

#[test]
fn typed_scopes_are_the_scopes_of_the_same_values() {
    // The derive's functions only type the values: each gives the scope the
    // unchecked form gives for the same values, in the same order.
    let unchecked = |values: &[&dyn cache_key::TenantValue]| {
        GenerationScope::tenant_unchecked::<Issues>(values).unwrap()
    };
    assert_eq!(
        Issues::tenant_scope((&"acme", &"rocket")).unwrap(),
        unchecked(&[&"acme", &"rocket"])
    );
    assert_eq!(
        Issues::tenant_scope_by_org(&"acme").unwrap(),
        unchecked(&[&"acme"])
    );
    assert_eq!(
        Issues::operation_scope((&"acme", &"rocket")).unwrap(),
        GenerationScope::operation_unchecked::<Issues>(&[&"acme", &"rocket"]).unwrap()
    );
    assert_eq!(
        Issues::operation_scope((&"acme", &"rocket")).unwrap(),
        GenerationScope::operation_of(&Issues {
            org: "acme",
            repo: "rocket",
            page: 3
        })
        .unwrap()
    );
    assert_eq!(
        Trending::operation_scope(()).unwrap(),
        GenerationScope::operation_unchecked::<Trending>(&[]).unwrap()
    );
    // A scope is the namespace's: `Feed`'s tenant scope is `Issues`' leading one.
    assert_eq!(
        Feed::tenant_scope(&"acme").unwrap().counter().name(),
        Issues::tenant_scope_by_org(&"acme")
            .unwrap()
            .counter()
            .name()
    );
    let empty = Issues::tenant_scope((&"acme", &"")).unwrap_err();
    assert!(
        matches!(empty.key_error(), Some(KeyError::EmptyTenant { field }) if field == "repo"),
        "{empty:?}"
    );
}

/// One tenant value behind `dyn TenantValue` (what the derive's stand-in
/// impl beside its compile errors takes) gives the scopes of its own type.
#[test]
fn a_dyn_tenant_value_gives_the_scopes_of_its_type() {
    struct Dynamic;
    impl CacheKey for Dynamic {
        const KEY_SCHEMA: cache_key::KeySchema = BranchList::KEY_SCHEMA;
        type Tenant<'a> = &'a dyn cache_key::TenantValue;
        fn write_key_part(
            &self,
            _: u64,
            _: &mut String,
            _: cache_key::KeyPart,
        ) -> Result<(), KeyError> {
            unreachable!("only its scopes are asked for")
        }
    }
    assert_eq!(
        Dynamic::tenant_scope(&2u32).unwrap(),
        BranchList::tenant_scope(&2u32).unwrap()
    );
    assert_eq!(
        Dynamic::operation_scope(&2u32).unwrap(),
        BranchList::operation_scope(&2u32).unwrap()
    );
    assert_ne!(
        Dynamic::operation_scope(&3u32).unwrap(),
        BranchList::operation_scope(&2u32).unwrap()
    );
}

#[test]
fn a_u32_tenant_invalidated_by_lookalike_values_bumps_nothing_unchecked() {
    // Why the typed scopes exist: each of these is `Ok` through the unchecked
    // form and invalidates no key of branch 1; `tests/ui/scope` shows that
    // none of them compiles through `List::tenant_scope`.
    #[derive(CacheKey)]
    #[cache_key(namespace = "shop", operation = "list")]
    struct List {
        #[tenant]
        branch: u32,
        #[criterion]
        page: u32,
    }
    let store = MemoryGenerations::new();
    let query = List { branch: 1, page: 1 };
    let before = store.generation_for(&query).unwrap();
    let lookalikes: [&dyn cache_key::TenantValue; 4] = [&"01", &"1 ", &"+1", &-1i64];
    for value in lookalikes {
        store
            .invalidate(&GenerationScope::tenant_unchecked::<List>(&[value]).unwrap())
            .unwrap();
    }
    assert_eq!(store.generation_for(&query).unwrap(), before);
    store.invalidate(&List::tenant_scope(&1).unwrap()).unwrap();
    assert!(store.generation_for(&query).unwrap() > before);
}

#[test]
fn a_scope_contains_exactly_its_keys() {
    let issue = |org: &str, repo: &str| {
        let key = Issues { org, repo, page: 1 }.cache_key(7).unwrap();
        decode(key.as_str()).unwrap()
    };
    let pulls = |org: &str, repo: &str| {
        let key = Pulls { org, repo, page: 1 }.cache_key(7).unwrap();
        decode(key.as_str()).unwrap()
    };
    let feed = decode(Feed { org: "acme" }.cache_key(7).unwrap().as_str()).unwrap();
    let trending = decode(Trending { page: 1 }.cache_key(7).unwrap().as_str()).unwrap();

    let org = GenerationScope::tenant_unchecked::<Issues>(&[&"acme"]).unwrap();
    assert!(org.contains(&issue("acme", "rocket")));
    assert!(org.contains(&pulls("acme", "x:y")), "hash-tagged keys too");
    assert!(org.contains(&feed));
    assert!(!org.contains(&issue("acme*", "rocket")));
    assert!(!org.contains(&trending));

    let repo_issues =
        GenerationScope::operation_unchecked::<Issues>(&[&"acme", &"rocket"]).unwrap();
    assert!(repo_issues.contains(&issue("acme", "rocket")));
    assert!(!repo_issues.contains(&pulls("acme", "rocket")));
    assert!(!repo_issues.contains(&issue("acme", "x:y")));

    let global = GenerationScope::operation_unchecked::<Trending>(&[]).unwrap();
    assert!(global.contains(&trending));
    assert!(!global.contains(&feed));
    assert!(GenerationScope::namespace::<Feed>().contains(&trending));
}

#[test]
fn the_model_holds_on_a_fixed_sequence() {
    // Every scope once, reads in between; with one slot per table every
    // tenant and every operation shares a counter.
    let instances = Instance::all().len();
    let mut ops = Vec::new();
    let bumps = [
        Bump::Namespace { wiki: false },
        Bump::Namespace { wiki: true },
        Bump::Org { org: 0 },
        Bump::FeedOrg { org: 1 },
        Bump::Repo { org: 2, repo: 1 },
        Bump::RepoOf { org: 0, repo: 0 },
        Bump::IssuesOf { org: 1, repo: 1 },
        Bump::PullsOf { org: 2, repo: 0 },
        Bump::Trending,
        Bump::PagesOf { org: 0 },
    ];
    for bump in bumps {
        ops.push(Op::Bump(bump));
        ops.extend((0..instances).map(Op::Read));
    }
    for slots in [1, 2, 1 << 16] {
        let store = MemoryGenerations::with_slots(slots);
        let reads = run_model(&store, &ops, |_| {}).unwrap();
        assert!(reads > instances * bumps.len());
    }
}

#[test]
fn the_model_catches_a_counter_that_goes_back() {
    /// A store whose counters restart at 0 when "evicted": the trap.
    struct Forgetful(Mutex<HashMap<String, u64>>);
    impl GenerationStore for Forgetful {
        fn read(
            &self,
            counters: cache_key::generation::Counters<'_>,
            sum: &mut cache_key::generation::GenerationSum,
        ) -> Result<(), GenerationError> {
            let map = self.0.lock().unwrap();
            for counter in counters {
                sum.add(map.get(&counter.name()).copied().unwrap_or(0));
            }
            Ok(())
        }
        fn bump(&self, counter: cache_key::generation::Counter<'_>) -> Result<(), GenerationError> {
            *self.0.lock().unwrap().entry(counter.name()).or_default() += 1;
            Ok(())
        }
    }
    let store = Forgetful(Mutex::new(HashMap::new()));
    let ops = [
        Op::Read(0),
        Op::Bump(Bump::Org { org: 0 }),
        Op::Lose(0),
        Op::Read(0),
    ];
    let error = run_model(&store, &ops, |_| store.0.lock().unwrap().clear()).unwrap_err();
    assert!(error.contains("went back"), "{error}");
}

fn op() -> impl Strategy<Value = Op> {
    let org = 0..ORGS.len();
    let repo = 0..REPOS.len();
    let bump = prop_oneof![
        any::<bool>().prop_map(|wiki| Bump::Namespace { wiki }),
        org.clone().prop_map(|org| Bump::Org { org }),
        org.clone().prop_map(|org| Bump::FeedOrg { org }),
        (org.clone(), repo.clone()).prop_map(|(org, repo)| Bump::Repo { org, repo }),
        (org.clone(), repo.clone()).prop_map(|(org, repo)| Bump::RepoOf { org, repo }),
        (org.clone(), repo.clone()).prop_map(|(org, repo)| Bump::IssuesOf { org, repo }),
        (org.clone(), repo).prop_map(|(org, repo)| Bump::PullsOf { org, repo }),
        Just(Bump::Trending),
        org.prop_map(|org| Bump::PagesOf { org }),
    ];
    prop_oneof![
        3 => bump.prop_map(Op::Bump),
        2 => (0..Instance::all().len()).prop_map(Op::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Over random bump sequences, with tables so small that scopes share
    /// counters: no query's generation goes back or repeats a value it
    /// moved away from, and every bump raises every query it encloses.
    #[test]
    fn no_bump_sequence_brings_an_old_generation_back(
        ops in proptest::collection::vec(op(), 1..60),
        slots in prop_oneof![Just(1usize), Just(2), Just(4), Just(1 << 16)],
    ) {
        let store = MemoryGenerations::with_slots(slots);
        if let Err(error) = run_model(&store, &ops, |_| {}) {
            return Err(TestCaseError::fail(error));
        }
    }
}

#[test]
fn threads_reading_writing_and_bumping_never_read_stale() {
    let store = MemoryGenerations::new();
    let entries = Mutex::new(HashMap::new());
    let report = race(|| (&store, &entries), 4, 1500, 300);
    assert_eq!(report.reads, 6000);
    assert_eq!(report.bumps, 300);
    assert!(report.hits > 0 && report.misses > 0, "{report:?}");
    assert_eq!(report.stale, 0, "{report:?}");
}

#[test]
fn the_wrong_order_is_a_stale_read_the_race_counts() {
    // The same interleaving twice: a reader misses, asks the origin, and a
    // bump lands before it stores the value. Stored under the generation read
    // before asking, the value is never read again; stored under the
    // generation read after (the Laravel race), it is served after the bump.
    let query = List { branch: 1, page: 1 };
    for right_order in [true, false] {
        let store = MemoryGenerations::new();
        let entries = Mutex::new(HashMap::new());
        let origin = Origin::new();

        let key_before = store.key_for(&query).unwrap();
        let value = origin.read(1);
        let version = origin.update(1);
        store
            .invalidate(&List::tenant_scope(&1u32).unwrap())
            .unwrap();
        origin.publish(1, version);
        let key = if right_order {
            key_before
        } else {
            store.key_for(&query).unwrap()
        };
        entries.insert(key.as_str(), value);

        let floor = origin.floor(1);
        let (served, hit) = read_through(&store, &entries, &origin, &query);
        let stale = served < floor;
        assert_eq!(stale, !right_order, "right order: {right_order}");
        assert_eq!(hit, !right_order);
    }
}

/// `key_for` writes the key once at generation 0 and puts the generation's
/// digits in place: it must equal `cache_key` at the generation read, for
/// hash tags, compound and global tenants, escaped tenants, summarized
/// criteria, and `max_len` measured with the real generation.
#[test]
fn key_for_is_cache_key_at_the_generation_read() {
    #[derive(CacheKey)]
    #[cache_key(namespace = "forge", operation = "issues", hash_tag)]
    struct Issues<'a> {
        #[tenant]
        org: &'a str,
        #[tenant]
        repo: &'a str,
        #[criterion]
        title: &'a str,
    }

    #[derive(CacheKey)]
    #[cache_key(namespace = "forge", operation = "all", global = "public")]
    struct Public {
        #[criterion]
        page: u32,
    }

    #[derive(CacheKey)]
    #[cache_key(namespace = "f", operation = "o", max_len = 64)]
    struct Bounded<'a> {
        #[tenant]
        t: &'a str,
    }

    /// Its namespace is escaped in the key, so the key is longer than written.
    #[derive(CacheKey)]
    #[cache_key(namespace = "my shop", operation = "o:p")]
    struct Escaped<'a> {
        #[tenant]
        t: &'a str,
        #[criterion]
        q: &'a str,
    }

    let store = MemoryGenerations::new();
    let escaped = Escaped { t: "t", q: "g0:t" };
    for _ in 0..12 {
        let generation = store.generation_for(&escaped).unwrap();
        assert_eq!(
            store.key_for(&escaped).unwrap(),
            escaped.cache_key(generation).unwrap()
        );
        store.invalidate_namespace::<Escaped>().unwrap();
    }
    let issues = [
        Issues {
            org: "a:b",
            repo: "r,s",
            title: "x",
        },
        Issues {
            org: "acme",
            repo: "{tag}",
            title: &"long ".repeat(20),
        },
    ];
    for round in 0..3u32 {
        for query in &issues {
            let generation = store.generation_for(query).unwrap();
            assert_eq!(
                store.key_for(query).unwrap(),
                query.cache_key(generation).unwrap()
            );
            let mut out = String::from("kept|");
            assert_eq!(store.write_key_for(query, &mut out).unwrap(), generation);
            assert_eq!(&out[5..], query.cache_key(generation).unwrap().as_str());
            store
                .invalidate(&Issues::tenant_scope_by_org(&query.org).unwrap())
                .unwrap();
        }
        let public = Public { page: round + 1 };
        let generation = store.generation_for(&public).unwrap();
        assert_eq!(
            store.key_for(&public).unwrap(),
            public.cache_key(generation).unwrap()
        );
        store.invalidate_namespace::<Public>().unwrap();
    }

    // A tenant that fits at generation 0 but not at the real generation.
    let bounded = Bounded { t: &"t".repeat(53) };
    for _ in 0..10 {
        store.invalidate_namespace::<Bounded>().unwrap();
    }
    let generation = store.generation_for(&bounded).unwrap();
    assert!(generation >= 10);
    assert!(bounded.cache_key(0).is_ok());
    let expected = bounded.cache_key(generation);
    assert!(matches!(expected, Err(KeyError::TooLong { .. })));
    let mut out = String::from("kept|");
    let err = store.write_key_for(&bounded, &mut out).unwrap_err();
    assert_eq!(err.key_error(), expected.as_ref().err());
    assert_eq!(out, "kept|");
}

/// A hand-written `CacheKey` reads its counters from its own key, as laid
/// out by its `KEY_SCHEMA`; a key laid out otherwise (here a hash tag the
/// schema does not declare) is an error, never another tenant's counter.
#[test]
fn key_for_a_manual_impl_follows_its_schema_or_errs() {
    const ORG: cache_key::Scope = cache_key::Scope::Tenant {
        fields: &["org", "repo"],
    };
    struct Manual {
        hash_tag: bool,
    }
    impl CacheKey for Manual {
        const KEY_SCHEMA: cache_key::KeySchema = cache_key::KeySchema::new("crm", "list", 1, ORG);
        type Tenant<'a> = (&'a &'a str, &'a u32);
        fn write_key_part(
            &self,
            generation: u64,
            out: &mut String,
            part: cache_key::KeyPart,
        ) -> Result<(), KeyError> {
            let mut builder = cache_key::KeyBuilder::new("crm", "list");
            builder
                .generation(generation)
                .tenant("a,b")
                .tenant(7)
                .hash_tag(self.hash_tag)
                .write_part_into(out, part)
        }
    }

    let store = MemoryGenerations::new();
    let manual = Manual { hash_tag: false };
    store
        .invalidate(&GenerationScope::tenant_unchecked::<Manual>(&[&"a,b"]).unwrap())
        .unwrap();
    assert_eq!(store.generation_for(&manual).unwrap(), 1);
    assert_eq!(
        store.key_for(&manual).unwrap(),
        manual.cache_key(1).unwrap()
    );

    let mut out = String::from("kept|");
    let err = store
        .write_key_for(&Manual { hash_tag: true }, &mut out)
        .unwrap_err();
    assert_eq!(err.kind(), GenerationErrorKind::Internal);
    assert_eq!(out, "kept|");
}
