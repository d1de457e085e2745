//! Property tests: keys are, byte for byte, the spec model's text.
//!
//! | property | what it proves |
//! | --- | --- |
//! | `the_key_is_the_models_text`, `the_summary_starts_at_49_escaped_bytes` | builder keys are byte for byte the model's key, on both sides of the summary threshold |
//! | `the_builder_never_panics_and_reports_the_right_mistake` | any calls in any order give the model's key or one of the mistakes the model sees, never a panic |
//! | `the_derive_equals_the_builder_and_never_panics`, `derived_field_names_are_what_the_builder_uses` | a derived key is the builder's key for the same parts |
//!
//! How the properties run, and how to replay a failure: `tests/common/properties.rs`.

mod common;

use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};
use std::fmt::Debug;

use cache_key::{CacheKey, KeyBuilder, KeyError, decode};
use common::inputs::{Input, Part, Value, model_pairs};
use common::properties::{CASES, check, ensure};
use common::spec_model::{self, Canonical};
use common::strategies::{
    f32s, f64s, generation, i128s, input, name, part, schema, short_text, text, unique, value,
};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

#[test]
fn the_key_is_the_models_text() {
    let summarized = Cell::new(0);
    check("the_key_is_the_models_text", input(), |input| {
        let model = input.canonical();
        summarized.set(summarized.get() + usize::from(model.summarized()));
        let key = input
            .build()
            .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
        let expected = model.key();
        ensure!(key.as_str() == expected, "key {key:?}, model {expected:?}");
        Ok(())
    });
    eprintln!(
        "the_key_is_the_models_text: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn the_summary_starts_at_49_escaped_bytes() {
    // Criteria strings of 30 to 70 bytes, with escapes straddling the boundary.
    let piece = select(&["x", "xx", "xxxx", "é", ",", "%", "😀", "="][..]);
    let criterion = (
        select(&["q", "a:b", "Ω"][..]).prop_map(str::to_owned),
        vec(piece, 1..20).prop_map(|p| Value::Str(p.concat())),
    );
    let near = vec(criterion, 1..3)
        .prop_map(unique)
        .prop_filter("criteria around 48 bytes", |criteria| {
            (30..=70).contains(&spec_model::criteria(&model_pairs(criteria)).len())
        });
    let lengths = Cell::new([0usize; 2]);
    check("the_summary_starts_at_49_escaped_bytes", near, |criteria| {
        let input = Input::global(criteria);
        let model = input.canonical();
        let mut seen = lengths.get();
        seen[usize::from(model.summarized())] += 1;
        lengths.set(seen);
        let key = input
            .build()
            .map_err(|e| TestCaseError::fail(format!("no key: {e:?}")))?;
        ensure!(
            key.as_str() == model.key(),
            "{} criteria bytes: key {key:?}, model {:?}",
            model.criteria().len(),
            model.key()
        );
        Ok(())
    });
    let [plain, summarized] = lengths.get();
    eprintln!("the_summary_starts_at_49_escaped_bytes: {plain} plain, {summarized} summarized");
    assert!(
        plain > 1000 && summarized > 1000,
        "{plain} plain, {summarized} summarized"
    );
}

/// Builder calls in any order, valid or not.
#[derive(Debug, Clone)]
enum Call {
    Tenant(Part),
    EmptyTenant,
    /// An integer tenant left at 0, not declared real.
    ZeroTenant,
    Global,
    Criterion(String, Value),
    EmptyName(Value),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => part().prop_map(Call::Tenant),
        1 => Just(Call::EmptyTenant),
        1 => Just(Call::ZeroTenant),
        1 => Just(Call::Global),
        6 => (
            prop_oneof![
                3 => select(&["a", "b", "a:b"][..]).prop_map(str::to_owned),
                1 => name(),
            ],
            value(),
        )
            .prop_map(|(n, v)| Call::Criterion(n, v)),
        1 => value().prop_map(Call::EmptyName),
    ]
}

#[test]
fn the_builder_never_panics_and_reports_the_right_mistake() {
    let strategy = (
        text(),
        text(),
        schema(),
        generation(),
        any::<bool>(),
        vec(call(), 0..6),
        proptest::option::of(0usize..120),
    );
    check(
        "the_builder_never_panics_and_reports_the_right_mistake",
        strategy,
        |(namespace, operation, schema, generation, hash_tag, calls, max_len)| {
            let mut builder = KeyBuilder::new(namespace.as_str(), operation.as_str());
            builder
                .schema(schema)
                .generation(generation)
                .hash_tag(hash_tag);
            if let Some(max) = max_len {
                builder.max_len(max);
            }
            let (mut parts, mut global, mut criteria) = (Vec::new(), false, Vec::new());
            let mut possible = Vec::new(); // the mistakes the model sees
            for call in &calls {
                match call {
                    Call::Tenant(part) => {
                        if !global {
                            parts.push(part.model());
                        }
                        if part.model().is_empty() && !global {
                            possible.push("EmptyTenant");
                        }
                        if global {
                            possible.push("TenantAndGlobal");
                        }
                        part.add_to(&mut builder);
                    }
                    Call::EmptyTenant => {
                        if global {
                            possible.push("TenantAndGlobal");
                        } else {
                            possible.push("EmptyTenant");
                            parts.push(String::new());
                        }
                        builder.tenant("");
                    }
                    Call::ZeroTenant => {
                        if global {
                            possible.push("TenantAndGlobal");
                        } else {
                            possible.push("EmptyTenant");
                            parts.push("0".to_owned());
                        }
                        builder.tenant(0u32);
                    }
                    Call::Global => {
                        global = true;
                        if !parts.is_empty() {
                            possible.push("TenantAndGlobal");
                        }
                        builder.global();
                    }
                    Call::Criterion(name, value) => {
                        if criteria.iter().any(|(n, _): &(String, Value)| n == name) {
                            possible.push("DuplicateCriterion");
                        }
                        criteria.push((name.clone(), value.clone()));
                        value.add_to(&mut builder, name);
                    }
                    Call::EmptyName(value) => {
                        possible.push("EmptyCriterionName");
                        value.add_to(&mut builder, "");
                    }
                }
            }
            if parts.is_empty() && !global {
                possible.push("MissingTenant");
            }
            if namespace.is_empty() {
                possible.push("EmptyNamespace");
            }
            if operation.is_empty() {
                possible.push("EmptyOperation");
            }
            let result = builder.build();
            if possible.is_empty() {
                let model = Canonical {
                    namespace: namespace.clone(),
                    operation: operation.clone(),
                    schema,
                    generation,
                    tenant: if global { None } else { Some(parts) },
                    hash_tag,
                    pairs: model_pairs(&criteria),
                };
                let expected = model.key();
                match (result, max_len) {
                    (Err(KeyError::TooLong { len, max }), Some(limit)) => ensure!(
                        max == limit && len == expected.len() && len > limit,
                        "TooLong {{ len: {len}, max: {max} }} for {expected:?}"
                    ),
                    (Ok(key), limit) => {
                        ensure!(key.as_str() == expected, "{key:?} vs model {expected:?}");
                        ensure!(
                            limit.is_none_or(|limit| key.as_str().len() <= limit),
                            "{key:?} is over max_len {limit:?}"
                        );
                    }
                    (Err(error), _) => {
                        return Err(TestCaseError::fail(format!("unexpected {error:?}")));
                    }
                }
            } else {
                let name = match &result {
                    Ok(key) => {
                        return Err(TestCaseError::fail(format!(
                            "expected one of {possible:?}, got {key:?}"
                        )));
                    }
                    Err(KeyError::EmptyTenant { .. }) => "EmptyTenant",
                    Err(KeyError::DuplicateCriterion { .. }) => "DuplicateCriterion",
                    Err(KeyError::EmptyCriterionName { .. }) => "EmptyCriterionName",
                    Err(KeyError::MissingTenant) => "MissingTenant",
                    Err(KeyError::TenantAndGlobal) => "TenantAndGlobal",
                    Err(KeyError::EmptyNamespace) => "EmptyNamespace",
                    Err(KeyError::EmptyOperation) => "EmptyOperation",
                    Err(other) => {
                        return Err(TestCaseError::fail(format!(
                            "expected one of {possible:?}, got {other:?}"
                        )));
                    }
                };
                ensure!(
                    possible.contains(&name),
                    "expected one of {possible:?}, got {result:?}"
                );
            }
            Ok(())
        },
    );
}

/// A derived struct with a compound tenant, every kind of criterion and
/// names that need escaping (and sort differently escaped).
#[derive(CacheKey, Debug, Clone)]
#[cache_key(namespace = "prop:ns", operation = "q&a x")]
struct Derived {
    #[tenant]
    org: String,
    #[tenant]
    role: i64,
    #[criterion]
    title: String,
    #[criterion(rename = "a:b")]
    author: Option<String>,
    #[criterion(rename = "p&q")]
    tags: Vec<String>,
    #[criterion(rename = "Ω")]
    labels: BTreeSet<String>,
    #[criterion(rename = "é")]
    seen: HashSet<String>,
    #[criterion(rename = "Z")]
    score: f64,
    #[criterion]
    big: Option<i128>,
    #[criterion(rename = "e\u{301}")]
    nested: Vec<Option<Vec<String>>>,
    #[criterion(rename = "%")]
    ratio: Option<f32>,
    #[skip]
    #[allow(dead_code)]
    request_id: u64,
}

fn mostly_empty<T: Debug + Clone + Default>(
    strategy: impl Strategy<Value = T>,
) -> impl Strategy<Value = T> {
    prop_oneof![2 => Just(T::default()), 1 => strategy]
}

fn derived() -> impl Strategy<Value = Derived> {
    (
        (
            text(),
            any::<i64>(),
            mostly_empty(short_text()),
            proptest::option::of(short_text()),
        ),
        (
            mostly_empty(vec(short_text(), 0..3)),
            mostly_empty(btree_set(short_text(), 0..3)),
            mostly_empty(vec(short_text(), 0..3)),
        ),
        (
            f64s(),
            proptest::option::weighted(0.3, i128s()),
            mostly_empty(vec(proptest::option::of(vec(short_text(), 0..2)), 0..2)),
            proptest::option::weighted(0.3, f32s()),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (org, role, title, author),
                (tags, labels, seen),
                (score, big, nested, ratio, id),
            )| {
                Derived {
                    org,
                    role,
                    title,
                    author,
                    tags,
                    labels,
                    seen: seen.into_iter().collect(),
                    score,
                    big,
                    nested,
                    ratio,
                    request_id: id,
                }
            },
        )
}

#[test]
fn the_derive_equals_the_builder_and_never_panics() {
    let summarized = Cell::new(0);
    check(
        "the_derive_equals_the_builder_and_never_panics",
        (derived(), generation()),
        |(query, generation)| {
            let derived = query.cache_key(generation);
            let mut out = String::from("prefix|");
            let written = query.write_key(generation, &mut out);
            let reference = KeyBuilder::new("prop:ns", "q&a x")
                .generation(generation)
                .tenant(query.org.as_str())
                .tenant(query.role)
                .criterion("title", query.title.as_str())
                .criterion("a:b", query.author.as_deref())
                .criterion("p&q", &query.tags)
                .criterion("Ω", &query.labels)
                .criterion("é", &query.seen)
                .criterion("Z", query.score)
                .criterion("big", query.big)
                .criterion("e\u{301}", &query.nested)
                .criterion("%", query.ratio)
                .build();
            match (&derived, &reference) {
                (Ok(a), Ok(b)) => {
                    ensure!(a == b, "derive {a:?}, builder {b:?}");
                    ensure!(
                        written.is_ok() && out == format!("prefix|{a}"),
                        "write_key wrote {out:?}"
                    );
                    let decoded = decode(a.as_str())
                        .map_err(|e| TestCaseError::fail(format!("{a:?}: {e}")))?;
                    summarized
                        .set(summarized.get() + usize::from(decoded.criteria().digest().is_some()));
                    ensure!(decoded.to_string() == a.as_str(), "{a:?}");
                }
                (Err(KeyError::EmptyTenant { field }), Err(KeyError::EmptyTenant { .. })) => {
                    ensure!(field == "org", "the empty tenant is named {field:?}");
                    ensure!(
                        written.is_err() && out == "prefix|",
                        "write_key wrote {out:?}"
                    );
                }
                _ => {
                    return Err(TestCaseError::fail(format!(
                        "derive {derived:?}, builder {reference:?}"
                    )));
                }
            }
            Ok(())
        },
    );
    eprintln!(
        "the_derive_equals_the_builder_and_never_panics: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn derived_field_names_are_what_the_builder_uses() {
    let names: Vec<&str> = Derived::KEY_SCHEMA.criteria().map(|c| c.name()).collect();
    let mut expected = vec!["title", "a:b", "p&q", "Ω", "é", "Z", "big", "e\u{301}", "%"];
    expected.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(names, expected);
}
