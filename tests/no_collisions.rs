//! Property tests and fixed cases: different queries never share a key.
//! Equal canonical forms give equal keys and different ones give different
//! keys, and no value, tenant, namespace or operation can forge a separator.
//!
//! | property | what it proves |
//! | --- | --- |
//! | `*_are_injective` | model equal <=> keys equal (criteria, tenants, namespaces/operations, whole keys) |
//! | `a_*_cannot_forge_*`, `a_comma_*`, `derived_keys_resist_the_classic_collisions` | the classic collisions of naive key builders, fixed |
//! | `no_value_changes_the_number_of_segments` | 5 `:`-separated segments, 6 with criteria, whatever the values |
//!
//! How the properties run, and how to replay a failure: `tests/common/properties.rs`.

mod common;

use std::cell::Cell;
use std::fmt::Debug;

use cache_key::{CacheKey, Key, KeyBuilder};
use common::inputs::{Input, Part, Tenant, Value};
use common::properties::{CASES, built, check, ensure};
use common::strategies::{
    criteria, non_empty, tenant, text, tiny_criteria, tiny_input, tiny_part, tiny_tenant,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

/// Two inputs that are mostly the same: `b` is `a` with some parts taken
/// from an independent `c`, so equal canonical forms reached by different
/// routes are frequent, and so are near misses.
fn near_pair() -> impl Strategy<Value = (Input, Input)> {
    (tiny_input(), tiny_input(), any::<u32>(), any::<u32>()).prop_map(|(a, c, low, high)| {
        // Each decision is taken with probability 1/4.
        let pick = |i: u32| (low >> i) & 1 == 1 && (high >> i) & 1 == 1;
        let mut b = a.clone();
        if pick(0) {
            b.namespace = c.namespace.clone();
        }
        if pick(1) {
            b.operation = c.operation.clone();
        }
        if pick(2) {
            b.schema = c.schema;
        }
        if pick(3) {
            b.generation = c.generation;
        }
        if pick(4) {
            b.tenant = c.tenant.clone();
        }
        if pick(5) {
            b.hash_tag = c.hash_tag;
        }
        for (i, criterion) in b.criteria.iter_mut().enumerate() {
            if pick(6 + i as u32)
                && let Some((_, value)) = c.criteria.get(i)
            {
                criterion.1 = value.clone();
            }
        }
        if pick(12) {
            b.criteria = c.criteria.clone();
        }
        if pick(13) {
            b.criteria.reverse();
        }
        if pick(14) {
            b.criteria.pop();
        }
        (a, b)
    })
}

/// Counts of an injectivity property, checked at the end: both outcomes must
/// have been exercised, or the property proved little.
#[derive(Default)]
struct Outcomes {
    equal: Cell<usize>,
    different: Cell<usize>,
    summarized: Cell<usize>,
}

impl Outcomes {
    /// Checks `model_a == model_b <=> key_a == key_b`; the converse only when
    /// neither key is summarized (a summary could collide, in theory).
    fn check<M: PartialEq + Debug>(
        &self,
        (model_a, key_a, summarized_a): (M, Key, bool),
        (model_b, key_b, summarized_b): (M, Key, bool),
    ) -> Result<(), TestCaseError> {
        let same_model = model_a == model_b;
        if same_model {
            ensure!(
                key_a == key_b,
                "same canonical form {model_a:?} gave {key_a:?} and {key_b:?}"
            );
        }
        if summarized_a || summarized_b {
            self.summarized.set(self.summarized.get() + 1);
            return Ok(());
        }
        let counter = if same_model {
            &self.equal
        } else {
            &self.different
        };
        counter.set(counter.get() + 1);
        ensure!(
            same_model == (key_a == key_b),
            "COLLISION: canonical forms {model_a:?} and {model_b:?} share the key {key_a:?}"
        );
        Ok(())
    }

    fn report(&self, name: &str) {
        let (equal, different, summarized) = (
            self.equal.get(),
            self.different.get(),
            self.summarized.get(),
        );
        eprintln!(
            "{name}: {equal} equal forms, {different} different, {summarized} skipped (summarized)"
        );
        assert!(
            equal >= CASES as usize / 20 && different >= CASES as usize / 20,
            "{name} exercised too few equal ({equal}) or different ({different}) canonical forms"
        );
    }
}

#[test]
fn whole_keys_are_injective() {
    let outcomes = Outcomes::default();
    check("whole_keys_are_injective", near_pair(), |(a, b)| {
        outcomes.check(built(&a)?, built(&b)?)
    });
    outcomes.report("whole_keys_are_injective");
}

#[test]
fn criteria_are_injective() {
    let outcomes = Outcomes::default();
    let one = |criteria: &[(String, Value)]| {
        let input = Input::global(criteria.to_vec());
        let (model, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>((model.pairs, key, summarized))
    };
    // Tiny criteria collide often; a few arbitrary ones catch the rest.
    let pairs = prop_oneof![
        4 => (tiny_criteria(), tiny_criteria()),
        1 => (criteria(), criteria()),
    ];
    check("criteria_are_injective", pairs, |(a, b)| {
        outcomes.check(one(&a)?, one(&b)?)
    });
    outcomes.report("criteria_are_injective");
}

/// The same tenant, each part written as another type with the same text.
fn equivalent_tenant(tenant: &Tenant) -> Tenant {
    match tenant {
        Tenant::Global => Tenant::Global,
        Tenant::Parts(parts) => Tenant::Parts(
            parts
                .iter()
                .map(|part| {
                    let text = part.model();
                    let mut chars = text.chars();
                    match (text.parse::<u64>(), chars.next(), chars.next()) {
                        (Ok(n), _, _) if !matches!(part, Part::U64(_)) => Part::U64(n),
                        (_, Some(c), None) if !matches!(part, Part::Char(_)) => Part::Char(c),
                        _ => Part::Str(text),
                    }
                })
                .collect(),
        ),
    }
}

#[test]
fn tenants_are_injective() {
    let outcomes = Outcomes::default();
    let one = |tenant: &Tenant| {
        let input = Input {
            tenant: tenant.clone(),
            ..Input::global(vec![("q".into(), Value::Str("1".into()))])
        };
        let (model, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>((model.tenant, key, summarized))
    };
    let pairs = prop_oneof![
        3 => (tiny_tenant(), tiny_tenant()),
        1 => (tenant(), tenant()),
        // The same parts, each written as another type with the same text.
        1 => tiny_tenant().prop_map(|t| (t.clone(), equivalent_tenant(&t))),
        // A compound tenant against one part holding the parts joined by `,`.
        1 => vec(tiny_part(), 1..4).prop_map(|parts| {
            let joined = parts.iter().map(Part::model).collect::<Vec<_>>().join(",");
            (Tenant::Parts(parts), Tenant::Parts(vec![Part::Str(joined)]))
        }),
    ];
    check("tenants_are_injective", pairs, |(a, b)| {
        outcomes.check(one(&a)?, one(&b)?)
    });
    outcomes.report("tenants_are_injective");
}

#[test]
fn namespaces_and_operations_are_injective() {
    let outcomes = Outcomes::default();
    let one = |(namespace, operation): &(String, String)| {
        let input = Input {
            namespace: namespace.clone(),
            operation: operation.clone(),
            schema: 1,
            generation: 1,
            tenant: Tenant::Parts(vec![Part::Str("t".into())]),
            hash_tag: false,
            criteria: vec![],
        };
        let (_, key, summarized) = built(&input)?;
        Ok::<_, TestCaseError>(((namespace.clone(), operation.clone()), key, summarized))
    };
    let word = || {
        prop_oneof![
            4 => select(&["a", "b", "a:b", "a%3Ab", ":", "a:s1", "s1:g1"][..])
                .prop_map(str::to_owned),
            1 => non_empty(text()),
        ]
    };
    let pairs = prop_oneof![
        // Independent words from a tiny set: often equal.
        2 => ((word(), word()), (word(), word())),
        // The same words twice: one key, however they were obtained.
        1 => (word(), word()).prop_map(|pair| (pair.clone(), pair)),
        // The same three words, with the `:` moved from one side to the other.
        1 => (word(), word(), word()).prop_map(|(x, y, z)| {
            ((format!("{x}:{y}"), z.clone()), (x, format!("{y}:{z}")))
        }),
    ];
    check(
        "namespaces_and_operations_are_injective",
        pairs,
        |(a, b)| outcomes.check(one(&a)?, one(&b)?),
    );
    outcomes.report("namespaces_and_operations_are_injective");
}

// The classic collisions of naive key builders, on fixed inputs.

fn search(title: &str, author: &str) -> Key {
    KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("title", title)
        .criterion("author", author)
        .build()
        .unwrap()
}

#[test]
fn a_separator_in_a_value_cannot_forge_a_second_criterion() {
    let two = search("Sand", "Borges");
    let one = search("Sand: Borges", "");
    assert_ne!(two, one);
    assert_eq!(
        two.as_str(),
        "library:s1:g1:tbranch-2:search:author=Borges&title=Sand"
    );
    assert_eq!(
        one.as_str(),
        "library:s1:g1:tbranch-2:search:title=Sand%3A%20Borges"
    );
    // A value carrying a whole forged pair.
    let forged = KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("author", "Borges&title=Sand")
        .build()
        .unwrap();
    let real = KeyBuilder::new("library", "search")
        .tenant("branch-2")
        .criterion("author", "Borges")
        .criterion("title", "Sand")
        .build()
        .unwrap();
    assert_ne!(forged, real);
    assert_eq!(
        forged.as_str(),
        "library:s1:g1:tbranch-2:search:author=Borges%26title%3DSand"
    );
}

#[test]
fn a_comma_in_a_list_element_is_not_a_second_element() {
    let key = |list: &[&str]| {
        KeyBuilder::new("ns", "op")
            .global()
            .criterion("tags", list)
            .build()
            .unwrap()
    };
    assert_ne!(key(&["a,b"]), key(&["a", "b"]));
    assert_eq!(key(&["a,b"]).as_str(), "ns:s1:g1:t:op:tags=a%252Cb");
    assert_eq!(key(&["a", "b"]).as_str(), "ns:s1:g1:t:op:tags=a%2Cb");
    // An element that looks like an escaped comma.
    assert_ne!(key(&["a%2Cb"]), key(&["a,b"]));
    assert_ne!(key(&["a%2Cb"]), key(&["a", "b"]));
    // A text value equal to the list's canonical string is the same criterion.
    let text = KeyBuilder::new("ns", "op")
        .global()
        .criterion("tags", "a,b")
        .build()
        .unwrap();
    assert_eq!(text, key(&["a", "b"]));
}

#[test]
fn a_comma_in_a_tenant_is_not_a_compound_tenant() {
    let single = KeyBuilder::new("crm", "deals")
        .tenant("a,b")
        .build()
        .unwrap();
    let compound = KeyBuilder::new("crm", "deals")
        .tenant("a")
        .tenant("b")
        .build()
        .unwrap();
    assert_ne!(single, compound);
    assert_eq!(single.as_str(), "crm:s1:g1:ta%2Cb:deals");
    assert_eq!(compound.as_str(), "crm:s1:g1:ta,b:deals");
    let reversed = KeyBuilder::new("crm", "deals")
        .tenant("b")
        .tenant("a")
        .build()
        .unwrap();
    assert_ne!(compound, reversed, "compound tenants keep their order");
    let global = KeyBuilder::new("crm", "deals").global().build().unwrap();
    assert_ne!(global, single);
    assert_eq!(global.as_str(), "crm:s1:g1:t:deals");
}

#[test]
fn a_namespace_or_operation_cannot_forge_segments() {
    let forged = KeyBuilder::new("lib:s1:g1:tbranch-2", "search")
        .tenant("x")
        .build()
        .unwrap();
    assert_eq!(forged.as_str(), "lib%3As1%3Ag1%3Atbranch-2:s1:g1:tx:search");
    let a = KeyBuilder::new("a:b", "c").global().build().unwrap();
    let b = KeyBuilder::new("a", "b:c").global().build().unwrap();
    assert_ne!(a, b);
}

#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search")]
struct ClassicSearch<'a> {
    #[tenant]
    branch: &'a str,
    #[criterion]
    title: &'a str,
    #[criterion]
    author: Option<&'a str>,
    #[criterion]
    tags: Vec<&'a str>,
}

#[test]
fn derived_keys_resist_the_classic_collisions() {
    let key = |title, author, tags: &[&'static str]| {
        ClassicSearch {
            branch: "branch-2",
            title,
            author,
            tags: tags.to_vec(),
        }
        .cache_key(4)
        .unwrap()
    };
    let two = key("Sand", Some("Borges"), &[]);
    let one = key("Sand: Borges", None, &[]);
    let forged = key("Sand", Some("x&title=Sand"), &[]);
    assert_ne!(two, one);
    assert_ne!(two, forged);
    assert_eq!(
        two.as_str(),
        "library:s1:g4:tbranch-2:search:author=Borges&title=Sand"
    );
    assert_eq!(
        forged.as_str(),
        "library:s1:g4:tbranch-2:search:author=x%26title%3DSand&title=Sand"
    );
    assert_ne!(key("x", None, &["a,b"]), key("x", None, &["a", "b"]));
    // None, absent and "" are the same query.
    assert_eq!(key("Sand", None, &[]), key("Sand", Some(""), &[""]));
}

#[test]
fn no_value_changes_the_number_of_segments() {
    // One criterion whose value is drawn from separators only.
    let separators = vec(
        select(&[":", "&", "=", ",", "{", "}", "%", "%3A", "*"][..]),
        1..12,
    )
    .prop_map(|pieces| pieces.concat());
    let strategy = (
        separators.clone(),
        separators.clone(),
        separators,
        any::<bool>(),
    );
    check(
        "no_value_changes_the_number_of_segments",
        strategy,
        |(value, tenant, namespace, hash_tag)| {
            let with = KeyBuilder::new(namespace.as_str(), namespace.as_str())
                .tenant(tenant.as_str())
                .hash_tag(hash_tag)
                .criterion(value.as_str(), value.as_str())
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let without = KeyBuilder::new(namespace.as_str(), namespace.as_str())
                .tenant(tenant.as_str())
                .hash_tag(hash_tag)
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            // 6 segments (5 `:`) with criteria, 5 segments (4 `:`) without.
            ensure!(with.as_str().split(':').count() == 6, "{with:?}");
            ensure!(without.as_str().split(':').count() == 5, "{without:?}");
            for key in [&with, &without] {
                let braces = key.as_str().matches(['{', '}']).count();
                ensure!(braces == if hash_tag { 2 } else { 0 }, "{key:?}");
                ensure!(
                    !key.as_str().contains(['&', '=', ',']) || key == &with,
                    "{key:?}"
                );
            }
            ensure!(
                !with.as_str().contains(['&', ',']),
                "one criterion, one tenant part: {with:?}"
            );
            ensure!(with.as_str().matches('=').count() <= 1, "{with:?}");
            Ok(())
        },
    );
}
