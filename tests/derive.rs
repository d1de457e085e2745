//! Keys produced by `#[derive(CacheKey)]`: the seed examples of the key format,
//! exactly, and agreement with the runtime builder.

mod common;

use std::collections::{BTreeSet, HashSet};

use cache_key::{CacheKey, Key, KeyBuilder, KeyError, KeyPart};
use common::fixtures::{BranchList, FullSearch, Search};

/// The same query as `Search`, fields in another order.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct SearchReordered<'a> {
    #[criterion(rename = "yearFrom")]
    year_from: Option<u16>,
    #[criterion]
    author: Option<&'a str>,
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
}

fn search<'a>(title: &'a str, author: Option<&'a str>) -> Search<'a> {
    Search {
        branch: "branch-2",
        title,
        author,
        year_from: None,
        request_id: 1,
    }
}

#[test]
fn seed_search_keys() {
    let key = search("Sand", Some("Borges")).cache_key(4).unwrap();
    assert_eq!(
        key.as_str(),
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand"
    );
    let key = search("Sand: Borges", Some("")).cache_key(4).unwrap();
    assert_eq!(
        key.as_str(),
        "library:s1:g4:tbranch-2:search:title=Sand%3A%20Borges"
    );
}

#[test]
fn the_tenant_separates_branches() {
    let list = |branch: &str| {
        BranchList {
            branch: branch.into(),
            page: 1,
        }
        .cache_key(4)
        .unwrap()
    };
    assert_eq!(
        list("branch-2").as_str(),
        "library:s1:g4:tbranch-2:list:page=1"
    );
    assert_eq!(
        list("branch-3").as_str(),
        "library:s1:g4:tbranch-3:list:page=1"
    );
}

#[test]
fn field_order_does_not_change_the_key() {
    let reordered = SearchReordered {
        year_from: Some(1970),
        author: Some("Borges"),
        branch: "branch-2",
        title: "Sand",
    };
    let original = Search {
        year_from: Some(1970),
        ..search("Sand", Some("Borges"))
    };
    assert_eq!(
        reordered.cache_key(4).unwrap(),
        original.cache_key(4).unwrap()
    );
    assert_eq!(
        original.cache_key(4).unwrap().as_str(),
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand&yearFrom=1970"
    );
}

#[test]
fn eight_criteria_are_summarized() {
    let query = FullSearch {
        branch: "branch-1".into(),
        title: "The Disconnected".into(),
        author: "Oğuz Atay".into(),
        year_from: 1970,
        year_to: 1980,
        lang: "tr",
        status: "on_shelf",
        sort: "title",
        page: 3,
    };
    assert_eq!(
        query.cache_key(4).unwrap().as_str(),
        "library:s1:g4:tbranch-1:search:c_648d4755bc125b8edc4087542d254b21"
    );
}

#[test]
fn an_empty_tenant_is_an_error_never_a_key() {
    let err = BranchList {
        branch: String::new(),
        page: 1,
    }
    .cache_key(4)
    .unwrap_err();
    assert_eq!(
        err,
        KeyError::EmptyTenant {
            field: "branch".into()
        }
    );
    assert!(err.to_string().contains("`branch`"), "{err}");
}

#[test]
fn write_key_appends_and_leaves_the_buffer_alone_on_error() {
    let mut out = String::from("prefix|");
    BranchList {
        branch: "b".into(),
        page: 2,
    }
    .write_key(7, &mut out)
    .unwrap();
    assert_eq!(out, "prefix|library:s1:g7:tb:list:page=2");
    let before = out.clone();
    assert!(
        BranchList {
            branch: String::new(),
            page: 2
        }
        .write_key(7, &mut out)
        .is_err()
    );
    assert_eq!(out, before);
}

#[derive(CacheKey)]
#[cache_key(namespace = "a:b", operation = "op x")]
struct Escaped {
    #[tenant]
    org: u64,
    #[criterion(rename = "p&q")]
    pq: Vec<Option<String>>,
    #[criterion(rename = "name with space")]
    spaced: HashSet<&'static str>,
    #[criterion(rename = "Ω")]
    omega: f64,
    #[criterion]
    z: BTreeSet<i64>,
}

#[test]
fn derived_keys_equal_builder_keys_for_escaped_names_and_collections() {
    let query = Escaped {
        org: 42,
        pq: vec![Some("a,b".into()), None, Some("50%".into())],
        spaced: ["x y", "a", "b"].into(),
        omega: 1e21,
        z: [10, -2, 3].into(),
    };
    let built = KeyBuilder::new("a:b", "op x")
        .tenant(42u64)
        .criterion("z", &query.z)
        .criterion("Ω", query.omega)
        .criterion("p&q", &query.pq)
        .criterion("name with space", &query.spaced)
        .build()
        .unwrap();
    assert_eq!(query.cache_key(1).unwrap(), built);
}

#[derive(CacheKey)]
#[cache_key(namespace = NAMESPACE)]
struct FromConst<T> {
    #[tenant]
    account: T,
    #[criterion]
    filter: Option<T>,
}

const NAMESPACE: &str = "shop svc";

#[test]
fn generic_structs_and_namespace_constants() {
    let key = FromConst {
        account: 7u32,
        filter: Some(9u32),
    }
    .cache_key(2)
    .unwrap();
    assert_eq!(key.as_str(), "shop%20svc:s1:g2:t7:from_const:filter=9");
    let key = FromConst {
        account: "acme",
        filter: None,
    }
    .cache_key(2)
    .unwrap();
    assert_eq!(key.as_str(), "shop%20svc:s1:g2:tacme:from_const");
}

/// `max_len` exactly at the longest possible key: accepted at compile time.
#[derive(CacheKey)]
#[cache_key(
    namespace = "a-rather-long-application-namespace",
    operation = "list_books_of_a_branch",
    max_len = 165
)]
struct Longest {
    #[tenant]
    organization: u64,
    #[tenant]
    branch: u32,
    #[criterion]
    q: String,
}

#[test]
fn the_compile_time_bound_of_max_len_is_the_longest_real_key() {
    let longest = Longest {
        organization: u64::MAX,
        branch: u32::MAX,
        q: "x".repeat(46),
    };
    assert_eq!(longest.cache_key(u64::MAX).unwrap().as_str().len(), 165);
}

/// A text tenant has no bound: `max_len` is checked when the key is built.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list", max_len = 40)]
struct Bounded<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    page: u32,
}

#[test]
fn a_key_over_max_len_is_an_error_never_truncated() {
    let fits = Bounded {
        branch: "branch-2",
        page: 1,
    }
    .cache_key(4)
    .unwrap();
    assert_eq!(fits.as_str(), "library:s1:g4:tbranch-2:list:page=1");
    let err = Bounded {
        branch: "a-branch-with-a-long-name",
        page: 1,
    }
    .cache_key(4)
    .unwrap_err();
    assert_eq!(err, KeyError::TooLong { len: 52, max: 40 });
}

#[test]
fn write_tenant_writes_the_keys_tenant_segment() {
    #[derive(CacheKey)]
    #[cache_key(namespace = "crm", operation = "list", hash_tag)]
    struct Compound<'a> {
        #[tenant]
        org: &'a str,
        #[tenant]
        repo: u32,
        #[criterion]
        page: u32,
    }

    let mut out = String::from("x");
    let query = Compound {
        org: "a,b:c",
        repo: 7,
        page: 2,
    };
    query.write_tenant(&mut out).unwrap();
    assert_eq!(out, "xa%2Cb%3Ac,7");
    assert!(
        query
            .cache_key(3)
            .unwrap()
            .as_str()
            .contains(":t{a%2Cb%3Ac,7}:")
    );

    let empty = Compound {
        org: "",
        repo: 7,
        page: 2,
    };
    let mut out = String::from("x");
    assert_eq!(
        empty.write_tenant(&mut out),
        Err(KeyError::EmptyTenant {
            field: "org".into()
        })
    );
    assert_eq!(out, "x");
}

#[test]
fn a_manual_impl_writes_its_tenant_through_the_builder() {
    struct Manual;
    impl CacheKey for Manual {
        const KEY_SCHEMA: cache_key::KeySchema = cache_key::KeySchema::new(
            "crm",
            "list",
            1,
            cache_key::Scope::Tenant {
                fields: &["org", "repo"],
            },
        );
        type Tenant<'a> = (&'a &'a str, &'a u32);
        fn write_key_part(
            &self,
            generation: u64,
            out: &mut String,
            part: KeyPart,
        ) -> Result<(), KeyError> {
            KeyBuilder::new("crm", "list")
                .generation(generation)
                .tenant("a,b")
                .tenant(7)
                .hash_tag(true)
                .write_part_into(out, part)
        }
    }
    let mut out = String::from("x|");
    Manual.write_tenant(&mut out).unwrap();
    assert_eq!(out, "x|a%2Cb,7");
    assert_eq!(
        Manual.cache_key(2).unwrap().as_str(),
        "crm:s1:g2:t{a%2Cb,7}:list"
    );
}

/// Two criteria strings with the same 64-bit summary, found by a birthday
/// search: under format 1 both keyed `library:s1:g1:t2:search:c_7bdf0a02b74739b1`.
#[test]
fn a_64_bit_summary_collision_gives_two_keys() {
    #[derive(CacheKey)]
    #[cache_key(namespace = "library", operation = "search")]
    struct Search2 {
        #[tenant]
        branch: u32,
        #[criterion]
        q: String,
    }

    let pair = [
        "0cdbfc5044e45ad8-------------------------------",
        "2a6b3a82aea4fa5c-------------------------------",
    ];
    let derived = pair.map(|q| {
        Search2 {
            branch: 2,
            q: q.to_owned(),
        }
        .cache_key(1)
        .unwrap()
    });
    let built = pair.map(|q| {
        KeyBuilder::new("library", "search")
            .tenant(2)
            .criterion("q", q)
            .build()
            .unwrap()
    });
    assert_eq!(derived, built);
    assert_ne!(derived[0], derived[1]);
    // The first 16 digits still collide: only the 128-bit summary tells them apart.
    let digests = derived.map(|key| key.as_str().rsplit_once("c_").unwrap().1.to_owned());
    assert_eq!(digests[0][..16], digests[1][..16]);
    assert_eq!(&digests[0][..16], "7bdf0a02b74739b1");
    assert_eq!(digests[0].len(), 32);
}

/// A tenant left at its type's default (`..Default::default()`, a
/// `#[derive(Default)]`) is refused like an empty one, unless declared real.
#[test]
fn a_tenant_left_at_its_default_is_refused() {
    // An integer tenant that `Default` leaves at 0: not `fixtures::Search`.
    #[derive(CacheKey, Default)]
    #[cache_key(namespace = "shop", operation = "search")]
    struct Search {
        #[tenant]
        shop_id: u64,
        #[criterion]
        q: String,
    }

    #[derive(cache_key::CriterionValue, cache_key::TenantValue, Default)]
    struct ShopId(u32);

    #[derive(CacheKey, Default)]
    #[cache_key(namespace = "shop", operation = "list")]
    struct List {
        #[tenant]
        shop: ShopId,
        #[criterion]
        page: u32,
    }

    #[derive(CacheKey, Default)]
    #[cache_key(namespace = "shop", operation = "stock")]
    struct Stock {
        #[tenant(allow_zero = "warehouse 0 is the central warehouse")]
        warehouse: u32,
        #[criterion]
        sku: String,
    }

    let forgotten = Search {
        q: "dune".into(),
        ..Default::default()
    };
    assert_eq!(
        forgotten.cache_key(1),
        Err(KeyError::EmptyTenant {
            field: "shop_id".into()
        })
    );
    let mut out = String::from("x");
    assert!(forgotten.write_tenant(&mut out).is_err());
    assert_eq!(out, "x");
    assert_eq!(
        List::default().cache_key(1),
        Err(KeyError::EmptyTenant {
            field: "shop".into()
        })
    );
    assert_eq!(
        List {
            shop: ShopId(7),
            page: 1
        }
        .cache_key(1)
        .unwrap()
        .as_str(),
        "shop:s1:g1:t7:list:page=1"
    );
    assert_eq!(
        Stock {
            sku: "a".into(),
            ..Default::default()
        }
        .cache_key(1)
        .unwrap()
        .as_str(),
        "shop:s1:g1:t0:stock:sku=a"
    );
    assert_eq!(
        KeyBuilder::new("shop", "search").tenant(0u64).build(),
        Err(KeyError::EmptyTenant {
            field: "tenant".into()
        })
    );
    assert_eq!(
        KeyBuilder::new("shop", "search")
            .tenant("acme")
            .tenant(0i32)
            .build(),
        Err(KeyError::EmptyTenant {
            field: "tenant part 2".into()
        })
    );
}

/// A readable key is the key with its criteria in full: the key's summary is
/// the SHA-256 of exactly those criteria, from the derive (direct and
/// flattened) and from the builder (given out of name order).
#[test]
fn a_readable_key_holds_what_the_summary_hides() {
    use sha2::{Digest, Sha256};

    #[derive(cache_key::Criteria)]
    struct Page {
        #[criterion]
        page: u32,
    }

    // A `max_len` under test: not `fixtures::Search`.
    #[derive(CacheKey)]
    #[cache_key(namespace = "library", operation = "search", max_len = 100)]
    struct Search {
        #[tenant]
        branch: u32,
        #[criterion]
        title: &'static str,
        #[criterion]
        author: &'static str,
    }

    #[derive(CacheKey)]
    #[cache_key(namespace = "library", operation = "search")]
    struct Paged {
        #[tenant]
        branch: u32,
        #[criterion]
        title: &'static str,
        #[criterion]
        author: &'static str,
        #[criterion(flatten)]
        paging: Page,
    }

    let check = |key: Key, readable: cache_key::ReadableKey| {
        let (body, criteria) = readable.as_str().rsplit_once(':').unwrap();
        let digest: String = Sha256::digest(criteria.as_bytes())[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(criteria.len() > 48, "{criteria}");
        assert_eq!(key.as_str(), format!("{body}:c_{digest}"));
    };
    let search = Search {
        branch: 2,
        title: "Tutunamayanlar II",
        author: "Oğuz Atay",
    };
    check(
        search.cache_key(4).unwrap(),
        search.readable_key(4).unwrap(),
    );
    let paged = Paged {
        branch: 2,
        title: "Tutunamayanlar",
        author: "Oğuz Atay",
        paging: Page { page: 3 },
    };
    assert_eq!(
        paged.readable_key(4).unwrap().as_str(),
        "library:s1:g4:t2:search:author=O%C4%9Fuz%20Atay&page=3&title=Tutunamayanlar"
    );
    check(paged.cache_key(4).unwrap(), paged.readable_key(4).unwrap());

    let mut builder = KeyBuilder::new("library", "search");
    builder
        .generation(4)
        .tenant(2)
        .criterion("title", "Tutunamayanlar")
        .criterion("page", 3)
        .criterion("author", "Oğuz Atay");
    let readable = builder.readable_key().unwrap();
    assert_eq!(readable, paged.readable_key(4).unwrap());
    check(builder.build().unwrap(), readable);

    // `max_len` bounds keys, not readable keys.
    let long = Search {
        branch: 2,
        title: "Ince Memed: a novel in four volumes, of which this query asks for the first",
        author: "Yaşar Kemal",
    };
    assert!(long.readable_key(1).unwrap().as_str().len() > 100);
    check(long.cache_key(1).unwrap(), long.readable_key(1).unwrap());

    // Short criteria: the readable key is the key.
    let short = Search {
        branch: 2,
        title: "Sand",
        author: "Borges",
    };
    assert_eq!(
        short.readable_key(1).unwrap().as_str(),
        short.cache_key(1).unwrap().as_str()
    );
}
