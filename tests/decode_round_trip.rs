//! Property tests: every key decodes back into its parts, and whatever
//! `decode` accepts is a key the format makes.
//!
//! | property | what it proves |
//! | --- | --- |
//! | `every_key_decodes_to_its_parts` | the key splits into escaped atoms exactly where the model puts separators, and `decode` gives back the model's parts |
//! | `decode_never_panics_*` | on any text or mutated key, `decode` errs at a position in the text or accepts a key that writes out as itself and is what `KeyBuilder` makes from its parts |
//! | `an_empty_namespace_or_operation_is_refused_or_decodes` | every key the builder makes decodes |
//!
//! How the properties run, and how to replay a failure: `tests/common/properties.rs`.

mod common;

use std::cell::Cell;

use cache_key::{DecodedCriteria, DecodedKey, DecodedTenant, Key, KeyBuilder, KeyError, decode};
use common::properties::{CASES, built, check, ensure};
use common::spec_model::{Canonical, digest32, esc, is_escaped};
use common::strategies::input;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;

/// The key's text splits at its separators into exactly the model's parts,
/// each an escaped atom: no value added or removed a separator.
fn check_layout(key: &str, model: &Canonical) -> Result<(), TestCaseError> {
    let segments: Vec<&str> = key.split(':').collect();
    let has_tail = !model.pairs.is_empty();
    let colons = key.matches(':').count();
    ensure!(
        segments.len() == if has_tail { 6 } else { 5 } && colons == segments.len() - 1,
        "{key:?} has {} segments, expected {}",
        segments.len(),
        if has_tail { 6 } else { 5 }
    );
    ensure!(
        is_escaped(segments[0]) && segments[0] == esc(&model.namespace),
        "namespace segment {:?}",
        segments[0]
    );
    ensure!(
        segments[1] == format!("s{}", model.schema),
        "schema segment"
    );
    ensure!(
        segments[2] == format!("g{}", model.generation),
        "generation segment"
    );
    let mut tenant = segments[3]
        .strip_prefix('t')
        .ok_or_else(|| TestCaseError::fail("tenant segment without `t`"))?;
    if model.hash_tag {
        tenant = tenant
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(|| TestCaseError::fail("hash tag not `{...}`"))?;
    }
    ensure!(
        !tenant.contains(['{', '}']),
        "a brace inside the tenant segment of {key:?}"
    );
    match &model.tenant {
        None => ensure!(tenant.is_empty(), "a global key with tenant {tenant:?}"),
        Some(parts) => {
            let atoms: Vec<&str> = tenant.split(',').collect();
            ensure!(
                atoms.len() == parts.len(),
                "{} tenant atoms for {} parts in {key:?}",
                atoms.len(),
                parts.len()
            );
            for atom in atoms {
                ensure!(
                    !atom.is_empty() && is_escaped(atom),
                    "tenant atom {atom:?} in {key:?}"
                );
            }
        }
    }
    ensure!(
        is_escaped(segments[4]) && !segments[4].is_empty(),
        "operation segment {:?}",
        segments[4]
    );
    if has_tail {
        let tail = segments[5];
        if model.summarized() {
            let digest = tail.strip_prefix("c_").unwrap_or("");
            ensure!(
                digest.len() == 32
                    && digest
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "summary {tail:?}"
            );
        } else {
            let pairs: Vec<&str> = tail.split('&').collect();
            ensure!(
                pairs.len() == model.pairs.len(),
                "{} pairs in {tail:?}, expected {}",
                pairs.len(),
                model.pairs.len()
            );
            for pair in pairs {
                let atoms: Vec<&str> = pair.split('=').collect();
                ensure!(
                    atoms.len() == 2 && atoms.iter().all(|a| !a.is_empty() && is_escaped(a)),
                    "pair {pair:?} in {key:?}"
                );
            }
        }
    }
    Ok(())
}

/// `decode(key)` gives back exactly the model's parts, and writes out as `key`.
fn check_decodes(key: &str, model: &Canonical) -> Result<(), TestCaseError> {
    let decoded = decode(key).map_err(|e| TestCaseError::fail(format!("{key:?}: {e}")))?;
    ensure!(
        decoded.namespace() == model.namespace,
        "namespace of {key:?}"
    );
    ensure!(decoded.schema() == model.schema, "schema of {key:?}");
    ensure!(
        decoded.generation() == model.generation,
        "generation of {key:?}"
    );
    ensure!(decoded.hash_tag() == model.hash_tag, "hash tag of {key:?}");
    let tenant = match &model.tenant {
        None => DecodedTenant::Global,
        Some(parts) => DecodedTenant::Parts(parts.clone()),
    };
    ensure!(
        *decoded.tenant() == tenant,
        "tenant of {key:?}: {:?}",
        decoded.tenant()
    );
    ensure!(
        decoded.operation() == model.operation,
        "operation of {key:?}"
    );
    let criteria = if model.pairs.is_empty() {
        DecodedCriteria::None
    } else if model.summarized() {
        DecodedCriteria::Digest(digest32(&model.criteria()))
    } else {
        DecodedCriteria::Pairs(model.pairs.clone())
    };
    ensure!(
        *decoded.criteria() == criteria,
        "criteria of {key:?}: {:?}, expected {criteria:?}",
        decoded.criteria()
    );
    ensure!(
        decoded.to_string() == key,
        "{key:?} writes out as {decoded}"
    );
    Ok(())
}

/// A decoded key built again with `KeyBuilder`, when its criteria are not
/// summarized.
fn rebuild(decoded: &DecodedKey) -> Option<Result<Key, KeyError>> {
    let mut builder = KeyBuilder::new(decoded.namespace(), decoded.operation());
    builder
        .schema(decoded.schema())
        .generation(decoded.generation())
        .hash_tag(decoded.hash_tag());
    match decoded.tenant() {
        DecodedTenant::Global => {
            builder.global();
        }
        DecodedTenant::Parts(parts) => {
            for part in parts {
                builder.tenant(part.as_str());
            }
        }
    }
    match decoded.criteria() {
        DecodedCriteria::Digest(_) => return None,
        DecodedCriteria::None => {}
        DecodedCriteria::Pairs(pairs) => {
            for (name, value) in pairs {
                builder.criterion(name.as_str(), value.as_str());
            }
        }
    }
    Some(builder.build())
}

/// Whatever `decode` accepts is a key the format can produce: it writes out
/// as itself, and `KeyBuilder` makes the same key from its parts.
fn check_accepted(text: &str) -> Result<(), TestCaseError> {
    let decoded = match decode(text) {
        Ok(decoded) => decoded,
        Err(error) => {
            let offset = error.offset();
            ensure!(
                offset <= text.len() && text.is_char_boundary(offset),
                "error offset {offset} is not a position in {text:?}: {error}"
            );
            ensure!(!error.to_string().is_empty(), "an empty error message");
            return Ok(());
        }
    };
    {
        ensure!(
            decoded.to_string() == text,
            "decode accepted {text:?} but writes it as {decoded}"
        );
        if let Some(rebuilt) = rebuild(&decoded) {
            let rebuilt = rebuilt.map_err(|e| {
                TestCaseError::fail(format!(
                    "decode accepted {text:?} ({decoded:?}) but its parts give {e:?}"
                ))
            })?;
            ensure!(
                rebuilt.as_str() == text,
                "decode accepted {text:?} but its parts build {rebuilt:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn every_key_decodes_to_its_parts() {
    let summarized = Cell::new(0);
    check("every_key_decodes_to_its_parts", input(), |input| {
        let (model, key, is_summarized) = built(&input)?;
        summarized.set(summarized.get() + usize::from(is_summarized));
        check_layout(key.as_str(), &model)?;
        check_decodes(key.as_str(), &model)
    });
    eprintln!(
        "every_key_decodes_to_its_parts: {} of {CASES} summarized",
        summarized.get()
    );
}

#[test]
fn decode_never_panics_on_arbitrary_text() {
    let strategy = prop_oneof![
        2 => any::<String>(),
        2 => vec(any::<char>(), 0..40).prop_map(String::from_iter),
        3 => vec(
            select(&[
                ":", "s", "g", "t", "1", "0", "a", "%", "%2", "%2C", "%2c", "%41", "%C3%A9",
                "%C3", "%FF", "{", "}", ",", "&", "=", "c_", "0123456789abcdef", "é", "\0",
            ][..]),
            0..16,
        )
        .prop_map(|pieces| pieces.concat()),
        3 => vec(
            select(&[
                "x", ":s1", ":g1", ":t", ":tb", ":t{", "}", ":op", ":a=1", "&b=2", ":c_",
                "0123456789abcdef", "%", ",", "=",
            ][..]),
            0..10,
        )
        .prop_map(|pieces| pieces.concat()),
    ];
    check("decode_never_panics_on_arbitrary_text", strategy, |text| {
        check_accepted(&text)
    });
}

/// An edit of a valid key.
#[derive(Debug, Clone)]
enum Mutation {
    FlipByte { at: usize, mask: u8 },
    Truncate { at: usize },
    Insert { at: usize, text: &'static str },
    Remove { at: usize },
    Swap { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        2 => (at, 1u8..).prop_map(|(at, mask)| Mutation::FlipByte { at, mask }),
        1 => at.prop_map(|at| Mutation::Truncate { at }),
        3 => (
            at,
            select(&[
                "%", ":", "{", "}", ",", "&", "=", "%2", "%25", "%3A", "%41", "%e9", "0", "c_",
                "\u{feff}",
            ][..]),
        )
            .prop_map(|(at, text)| Mutation::Insert { at, text }),
        1 => at.prop_map(|at| Mutation::Remove { at }),
        1 => at.prop_map(|at| Mutation::Swap { at }),
    ]
}

impl Mutation {
    fn apply(&self, key: &str) -> String {
        let mut bytes = key.as_bytes().to_vec();
        let index = |at: usize, len: usize| if len == 0 { 0 } else { at % len };
        match *self {
            Mutation::FlipByte { at, mask } => {
                if !bytes.is_empty() {
                    let i = index(at, bytes.len());
                    bytes[i] ^= mask;
                }
            }
            Mutation::Truncate { at } => bytes.truncate(index(at, bytes.len() + 1)),
            Mutation::Insert { at, text } => {
                let i = index(at, bytes.len() + 1);
                bytes.splice(i..i, text.bytes());
            }
            Mutation::Remove { at } => {
                if !bytes.is_empty() {
                    bytes.remove(index(at, bytes.len()));
                }
            }
            Mutation::Swap { at } => {
                if bytes.len() >= 2 {
                    let i = index(at, bytes.len() - 1);
                    bytes.swap(i, i + 1);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[test]
fn decode_never_panics_on_mutated_keys() {
    let accepted = Cell::new(0);
    check(
        "decode_never_panics_on_mutated_keys",
        (input(), vec(mutation(), 1..4)),
        |(input, mutations)| {
            let key = input
                .build()
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            let mutated = mutations
                .iter()
                .fold(key.as_str().to_owned(), |text, m| m.apply(&text));
            if decode(&mutated).is_ok() {
                accepted.set(accepted.get() + 1);
            }
            check_accepted(&mutated)
        },
    );
    eprintln!(
        "decode_never_panics_on_mutated_keys: {} of {CASES} mutated keys still decode",
        accepted.get()
    );
}

/// Every key the builder makes decodes: an empty namespace or operation,
/// which `decode` rejects, is refused when building instead.
#[test]
fn an_empty_namespace_or_operation_is_refused_or_decodes() {
    for (namespace, operation) in [("", "op"), ("ns", ""), ("", "")] {
        let built = KeyBuilder::new(namespace, operation).global().build();
        assert!(
            matches!(
                built,
                Err(KeyError::EmptyNamespace | KeyError::EmptyOperation)
            ),
            "KeyBuilder::new({namespace:?}, {operation:?}) gave {built:?}"
        );
    }
}
