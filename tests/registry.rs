//! `cache_key::registry`: two query types that share a namespace and an
//! operation are found, with both full paths. The registry is the whole
//! binary's, so this test binary holds exactly two such pairs: two modules'
//! `Search`, and two functions' local `Lookup` (other test binaries call
//! `check()` on their own types and expect `Ok`).

use cache_key::CacheKey;

mod books {
    #[derive(cache_key::CacheKey)]
    #[cache_key(namespace = "library")]
    pub struct Search {
        #[tenant]
        pub branch: u32,
        #[criterion]
        pub q: &'static str,
    }
}

mod members {
    #[derive(cache_key::CacheKey)]
    #[cache_key(namespace = "library")]
    pub struct Search<'a> {
        #[tenant]
        pub branch: u32,
        #[criterion]
        pub q: &'a str,
    }

    /// Same name, own operation: no clash.
    pub mod archive {
        #[derive(cache_key::CacheKey)]
        #[cache_key(namespace = "library", operation = "archive_search")]
        pub struct Search {
            #[tenant]
            pub branch: u32,
        }
    }
}

#[test]
fn two_types_with_one_default_operation_share_keys() {
    // What the check is for: both key `library:s1:g1:t1:search:q=dune`.
    let books = books::Search {
        branch: 1,
        q: "dune",
    }
    .cache_key(1)
    .unwrap();
    let members = members::Search {
        branch: 1,
        q: "dune",
    }
    .cache_key(1)
    .unwrap();
    assert_eq!(books, members);
}

/// Two functions' own `Lookup`, one key space: `module_path!()` would name
/// both `registry::Lookup`.
fn first_lookup() -> cache_key::Key {
    #[derive(cache_key::CacheKey)]
    #[cache_key(namespace = "crm")]
    struct Lookup {
        #[tenant]
        account: u32,
    }
    Lookup { account: 1 }.cache_key(1).unwrap()
}

fn second_lookup() -> cache_key::Key {
    #[derive(cache_key::CacheKey)]
    #[cache_key(namespace = "crm")]
    struct Lookup {
        #[tenant]
        account: u32,
    }
    Lookup { account: 1 }.cache_key(1).unwrap()
}

#[test]
fn check_names_both_types_and_the_fix() {
    assert_eq!(first_lookup(), second_lookup());
    let err = cache_key::registry::check().unwrap_err();
    let paths: Vec<(&str, &str)> = err
        .pairs()
        .iter()
        .map(|(a, b)| (a.type_path(), b.type_path()))
        .collect();
    assert_eq!(
        paths,
        [
            ("registry::books::Search", "registry::members::Search"),
            (
                "registry::first_lookup::Lookup",
                "registry::second_lookup::Lookup"
            ),
        ]
    );
    let message = err.to_string();
    assert!(
        message.contains("`registry::books::Search` and `registry::members::Search`"),
        "{message}"
    );
    assert!(
        message.contains("namespace `library`, operation `search`"),
        "{message}"
    );
    assert!(message.contains("operation = \"...\""), "{message}");
}

#[test]
fn all_lists_every_concrete_derived_type() {
    let paths: Vec<&str> = cache_key::registry::all()
        .iter()
        .map(|registered| registered.type_path())
        .collect();
    assert_eq!(
        paths,
        [
            "registry::books::Search",
            "registry::first_lookup::Lookup",
            "registry::members::Search",
            "registry::members::archive::Search",
            "registry::second_lookup::Lookup",
        ]
    );
    let archive = cache_key::registry::all()[3];
    assert_eq!(archive.schema().operation(), "archive_search");
}
