//! Property tests: one query, one key. The order of criteria and of builder
//! calls, a hash set's iteration order, and every way of saying "no value"
//! leave the key unchanged.
//!
//! How the properties run, and how to replay a failure: `tests/common/properties.rs`.

mod common;

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashSet};

use cache_key::KeyBuilder;
use common::properties::{check, ensure};
use common::strategies::{input, name, short_text};
use proptest::collection::vec;
use proptest::prelude::*;

#[test]
fn insertion_order_does_not_change_the_key() {
    let strategy = (input(), any::<bool>()).prop_flat_map(|(input, reverse_too)| {
        let criteria = input.criteria.clone();
        (
            Just(input),
            Just(criteria).prop_shuffle(),
            Just(reverse_too),
        )
    });
    check(
        "insertion_order_does_not_change_the_key",
        strategy,
        |(input, shuffled, reverse_too)| {
            let mut other = input.clone();
            other.criteria = shuffled;
            if reverse_too {
                other.criteria.reverse();
            }
            let (a, b) = (input.build(), other.build());
            ensure!(a == b, "{a:?} != {b:?}");
            Ok(())
        },
    );
}

#[test]
fn call_order_does_not_change_the_key() {
    // Settings after parts and tenant parts after criteria included: the key
    // is a function of the parts, never of the order the builder got them in.
    let strategy = input().prop_flat_map(|input| {
        let steps = input.steps();
        (Just(input), Just(steps).prop_shuffle())
    });
    check(
        "call_order_does_not_change_the_key",
        strategy,
        |(input, steps)| {
            let expected = input.build();
            let mut shuffled = input.builder_calling(&steps);
            let mut out = String::from("before:");
            let written = shuffled.write_into(&mut out).map(|()| out);
            let built = shuffled.build();
            ensure!(built == expected, "{steps:?}: {built:?} != {expected:?}");
            let expected_text = expected.map(|key| format!("before:{key}"));
            ensure!(
                written == expected_text,
                "{steps:?}: {written:?} != {expected_text:?}"
            );
            Ok(())
        },
    );
}

#[test]
fn hash_sets_give_one_key_whatever_their_order() {
    let strategy = vec(short_text(), 0..6).prop_flat_map(|items| {
        let shuffled = Just(items.clone()).prop_shuffle();
        (Just(items), shuffled)
    });
    check(
        "hash_sets_give_one_key_whatever_their_order",
        strategy,
        |(items, shuffled)| {
            let key = |value: &dyn Fn(&mut KeyBuilder<'static>)| {
                let mut builder = KeyBuilder::new("ns", "op");
                value(builder.tenant("t"));
                builder.build()
            };
            let mut forward = HashSet::with_hasher(RandomState::new());
            forward.extend(items.iter().cloned());
            let mut backward = HashSet::with_hasher(RandomState::new());
            backward.extend(shuffled.iter().cloned());
            let tree: BTreeSet<String> = items.iter().cloned().collect();
            let refs: HashSet<&str> = shuffled.iter().map(String::as_str).collect();
            let a = key(&|b| {
                b.criterion("s", forward.clone());
            });
            let b = key(&|b| {
                b.criterion("s", backward.clone());
            });
            let c = key(&|b| {
                b.criterion("s", tree.clone());
            });
            let d = key(&|b| {
                b.criterion("s", refs.clone());
            });
            ensure!(a == b && b == c && c == d, "{a:?} {b:?} {c:?} {d:?}");
            let mut sorted = items.clone();
            sorted.sort();
            sorted.dedup();
            let list = key(&|b| {
                b.criterion("s", sorted.clone());
            });
            ensure!(
                a == list,
                "a set is its sorted, deduplicated list: {a:?} {list:?}"
            );
            Ok(())
        },
    );
}

/// Every way of saying "no value" that the format drops.
fn add_empty<'a>(mut builder: KeyBuilder<'a>, name: &str, how: u8) -> KeyBuilder<'a> {
    match how {
        0 => &mut builder,
        1 => builder.criterion(name, None::<String>),
        2 => builder.criterion(name, Some("")),
        3 => builder.criterion(name, ""),
        4 => builder.criterion(name, String::new()),
        5 => builder.criterion(name, Vec::<String>::new()),
        6 => builder.criterion(name, vec![""]),
        7 => builder.criterion(name, vec![None::<u8>]),
        8 => builder.criterion(name, BTreeSet::<String>::new()),
        9 => builder.criterion(name, HashSet::from([""])),
        10 => builder.criterion(name, Some(Vec::<u8>::new())),
        11 => builder.criterion(name, [""]),
        12 => builder.criterion(name, vec![Vec::<&str>::new()]),
        13 => builder.criterion(name, BTreeSet::from([None::<&str>, Some("")])),
        _ => builder.criterion(name, None::<Option<i128>>),
    };
    builder
}

#[test]
fn none_absent_and_empty_give_the_same_key() {
    let strategy = (input(), name(), 0u8..15, 0u8..15);
    check(
        "none_absent_and_empty_give_the_same_key",
        strategy,
        |(input, extra, how_a, how_b)| {
            if input.criteria.iter().any(|(name, _)| *name == extra) {
                return Ok(());
            }
            let a = add_empty(input.builder(), &extra, how_a).build();
            let b = add_empty(input.builder(), &extra, how_b).build();
            let base = input.build();
            ensure!(
                a == base && b == base,
                "empty variants {how_a} and {how_b} of {extra:?}: {a:?} {b:?} vs {base:?}"
            );
            Ok(())
        },
    );
}
