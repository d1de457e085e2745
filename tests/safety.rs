//! Reviewer-grade safety at run time: compound tenants, global data, set
//! criteria that never leak iteration order, and the look-alike names that
//! the secret and volatile checks must let through.

use std::collections::HashSet;
use std::collections::hash_map::RandomState;

use cache_key::{CacheKey, CriterionField, KeyBuilder, KeyError, Scope, SkippedField};

/// The scope is the organization, the role and the visibility level together.
#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "deals")]
struct Deals<'a> {
    #[tenant]
    organization: &'a str,
    #[criterion]
    stage: &'a str,
    #[tenant]
    role: &'a str,
    #[tenant]
    visibility: u8,
    #[skip(reason = "tracing only")]
    #[allow(dead_code)]
    trace: u64,
}

#[derive(CacheKey)]
#[cache_key(
    namespace = "library",
    global = "the branch directory is public and the same for everyone"
)]
struct BranchDirectory<'a> {
    #[criterion]
    city: &'a str,
}

/// Names that merely contain a sensitive word, or qualify it, compile.
#[derive(CacheKey)]
#[cache_key(namespace = "library", rename_all = "camelCase")]
#[allow(dead_code)]
struct LookAlikes {
    #[tenant]
    branch: u32,
    #[criterion]
    author_name: String,
    #[criterion]
    tokenizer_lang: String,
    #[criterion]
    session_year: u16,
    #[criterion]
    auth_method: String,
    #[criterion(rename = "keyword")]
    q: String,
    #[criterion(allow = "the page nonce is a public, stable seed for shuffling, not a secret")]
    nonce: u64,
}

/// Flags and facets whose words are not personal data or request metadata.
#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "contacts")]
struct ContactFilters {
    #[tenant]
    account: u32,
    #[criterion]
    email_verified: bool,
    #[criterion]
    phone_country: &'static str,
    #[criterion]
    address_type: &'static str,
    #[criterion]
    birth_year: u16,
    #[criterion]
    card_type: &'static str,
    #[criterion]
    agent_name: &'static str,
    #[criterion(allow = "the support desk searches tickets by the sender's address on purpose")]
    sender_email: &'static str,
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "tagged")]
struct Tagged {
    #[tenant]
    branch: u32,
    #[criterion]
    tags: HashSet<String, RandomState>,
}

#[test]
fn compound_tenants_join_in_declaration_order() {
    let deals = Deals {
        organization: "acme, inc",
        stage: "won",
        role: "sales",
        visibility: 2,
        trace: 9,
    };
    assert_eq!(
        deals.cache_key(3).unwrap().as_str(),
        "crm:s1:g3:tacme%2C%20inc,sales,2:deals:stage=won"
    );
}

#[test]
fn a_compound_tenant_is_not_a_tenant_with_a_comma() {
    let compound = Deals {
        organization: "a",
        stage: "",
        role: "b",
        visibility: 1,
        trace: 0,
    };
    let single = Deals {
        organization: "a,b",
        stage: "",
        role: "x",
        visibility: 1,
        trace: 0,
    };
    assert_eq!(
        compound.cache_key(1).unwrap().as_str(),
        "crm:s1:g1:ta,b,1:deals"
    );
    assert_eq!(
        single.cache_key(1).unwrap().as_str(),
        "crm:s1:g1:ta%2Cb,x,1:deals"
    );
}

#[test]
fn an_empty_part_of_a_compound_tenant_is_an_error_naming_it() {
    let deals = Deals {
        organization: "acme",
        stage: "won",
        role: "",
        visibility: 2,
        trace: 0,
    };
    assert_eq!(
        deals.cache_key(1),
        Err(KeyError::EmptyTenant {
            field: "role".into()
        })
    );
}

#[test]
fn global_keys_have_the_empty_tenant_segment() {
    let key = BranchDirectory { city: "Ankara" }.cache_key(2).unwrap();
    assert_eq!(key.as_str(), "library:s1:g2:t:branch_directory:city=Ankara");
}

#[test]
fn flags_and_facets_near_personal_words_are_ordinary_criteria() {
    let query = ContactFilters {
        account: 3,
        email_verified: true,
        phone_country: "TR",
        address_type: "billing",
        birth_year: 1980,
        card_type: "debit",
        agent_name: "Ayla",
        sender_email: "a@b.example",
    };
    let built = KeyBuilder::new("crm", "contacts")
        .tenant(3)
        .criterion("email_verified", true)
        .criterion("phone_country", "TR")
        .criterion("address_type", "billing")
        .criterion("birth_year", 1980)
        .criterion("card_type", "debit")
        .criterion("agent_name", "Ayla")
        .criterion("sender_email", "a@b.example")
        .build()
        .unwrap();
    assert_eq!(query.cache_key(1).unwrap(), built);
}

#[test]
fn look_alike_names_are_ordinary_criteria() {
    let query = LookAlikes {
        branch: 1,
        author_name: "Borges".into(),
        tokenizer_lang: "tr".into(),
        session_year: 2026,
        auth_method: "sso".into(),
        q: "sand".into(),
        nonce: 7,
    };
    let built = KeyBuilder::new("library", "look_alikes")
        .tenant(1u32)
        .criterion("authorName", "Borges")
        .criterion("tokenizerLang", "tr")
        .criterion("sessionYear", 2026)
        .criterion("authMethod", "sso")
        .criterion("keyword", "sand")
        .criterion("nonce", 7)
        .build()
        .unwrap();
    assert_eq!(query.cache_key(1).unwrap(), built);
    let names: Vec<&str> = LookAlikes::KEY_SCHEMA
        .criteria()
        .map(|c| c.name())
        .collect();
    assert_eq!(
        names,
        [
            "authMethod",
            "authorName",
            "keyword",
            "nonce",
            "sessionYear",
            "tokenizerLang"
        ]
    );
}

#[test]
fn a_hash_set_gives_one_key_whatever_its_seed_and_insertion_order() {
    let words = [
        "sand",
        "borges",
        "mirror",
        "labyrinth",
        "tiger",
        "a,b",
        "50%",
    ];
    let expected = Tagged {
        branch: 2,
        tags: words.iter().map(|w| w.to_string()).collect(),
    }
    .cache_key(1)
    .unwrap();
    // The same set through the builder's general path.
    let built = KeyBuilder::new("library", "tagged")
        .tenant(2u32)
        .criterion(
            "tags",
            words.iter().collect::<std::collections::BTreeSet<_>>(),
        )
        .build()
        .unwrap();
    assert_eq!(expected, built);
    let mut orders = HashSet::new();
    for seed in 0..100 {
        // Every `RandomState` has its own keys: each set iterates in its own order.
        let mut tags = HashSet::with_hasher(RandomState::new());
        for i in 0..words.len() {
            tags.insert(words[(i + seed) % words.len()].to_string());
        }
        orders.insert(tags.iter().cloned().collect::<Vec<_>>());
        let key = Tagged { branch: 2, tags }.cache_key(1).unwrap();
        assert_eq!(key, expected, "seed {seed}");
    }
    assert!(
        orders.len() > 1,
        "the sets should have iterated in different orders"
    );
}

#[test]
fn the_key_schema_describes_every_field() {
    let schema = Deals::KEY_SCHEMA;
    assert_eq!(schema.namespace(), "crm");
    assert_eq!(schema.operation(), "deals");
    assert_eq!(schema.schema(), 1);
    assert_eq!(
        schema.scope(),
        Scope::Tenant {
            fields: &["organization", "role", "visibility"]
        }
    );
    assert_eq!(
        schema.criteria().collect::<Vec<_>>(),
        [CriterionField::new("stage", "stage")]
    );
    assert_eq!(
        schema.skipped().collect::<Vec<_>>(),
        [SkippedField::new("trace", Some("tracing only"))]
    );
    assert_eq!(
        BranchDirectory::KEY_SCHEMA.scope(),
        Scope::Global {
            reason: "the branch directory is public and the same for everyone"
        }
    );
    let allowed = LookAlikes::KEY_SCHEMA
        .criteria()
        .find(|c| c.name() == "nonce")
        .unwrap();
    assert!(allowed.allow().unwrap().contains("not a secret"));
    let printed = format!("{:#?}", Deals::KEY_SCHEMA);
    assert!(
        printed.contains("organization") && printed.contains("tracing only"),
        "{printed}"
    );
}

/// A name with a NUL cannot be one of the schema's text entries: the derive
/// writes that schema's list as an array, and both read alike.
#[test]
fn the_key_schema_keeps_names_its_text_form_cannot_hold() {
    #[derive(CacheKey)]
    #[cache_key(namespace = "crm", operation = "odd")]
    struct OddNames {
        #[tenant]
        org: u32,
        #[criterion(rename = "a\0b")]
        a: u32,
        #[criterion]
        z: u32,
        #[skip(reason = "nul \0 inside")]
        #[allow(dead_code)]
        s: u8,
    }
    let schema = OddNames::KEY_SCHEMA;
    assert_eq!(
        schema.criteria().collect::<Vec<_>>(),
        [
            CriterionField::new("a\0b", "a"),
            CriterionField::new("z", "z")
        ]
    );
    assert_eq!(
        schema.skipped().collect::<Vec<_>>(),
        [SkippedField::new("s", Some("nul \0 inside"))]
    );
    let query = OddNames {
        org: 1,
        a: 2,
        z: 3,
        s: 0,
    };
    assert_eq!(
        query.cache_key(1).unwrap().as_str(),
        "crm:s1:g1:t1:odd:a%00b=2&z=3"
    );
}
