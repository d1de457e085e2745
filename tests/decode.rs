//! Decoding keys: every conformance vector's key decodes back into the parts
//! it was built from, and malformed or mutated keys give errors, never panics.

mod common;

use cache_key::{DecodeErrorKind, DecodedCriteria, DecodedTenant, KeyBuilder, decode};
use common::spec_model::{self, js_number};
use common::vectors::{canonical, vectors};

/// The keys of every non-error vector.
fn vector_keys() -> Vec<String> {
    vectors()
        .iter()
        .filter_map(|case| case["key"].as_str().map(str::to_owned))
        .collect()
}

#[test]
// The ties are written exactly: each literal is the double itself.
#[allow(clippy::excessive_precision)]
fn the_js_number_oracle_agrees_with_the_format() {
    for (x, expected) in [
        (1.5, "1.5"),
        (-0.0, "0"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (123456789.125, "123456789.125"),
        (0.000001, "0.000001"),
        (100.0, "100"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (1459304523984103.25, "1459304523984103.2"),
        (-269703634025409.625, "-269703634025409.62"),
        (137516221151617.875, "137516221151617.88"),
    ] {
        assert_eq!(js_number(x), expected);
    }
}

#[test]
fn every_vector_key_decodes_to_its_parts() {
    let cases = vectors();
    assert_eq!(cases.len(), 400);
    let (mut plain, mut summarized) = (0, 0);
    for (i, case) in cases.iter().enumerate() {
        let Some(key) = case["key"].as_str() else {
            continue;
        };
        let decoded = decode(key).unwrap_or_else(|err| panic!("case {i}: {key:?}: {err}"));
        let context = format!("case {i}: {key}");
        assert_eq!(
            decoded.namespace(),
            case["namespace"].as_str().unwrap(),
            "{context}"
        );
        assert_eq!(
            u64::from(decoded.schema()),
            case["schema"].as_u64().unwrap(),
            "{context}"
        );
        assert_eq!(
            decoded.generation(),
            case["generation"].as_u64().unwrap(),
            "{context}"
        );
        let tenant = match case["tenant"].as_str() {
            Some(tenant) => DecodedTenant::Parts(vec![tenant.to_owned()]),
            None => DecodedTenant::Global,
        };
        assert_eq!(decoded.tenant(), &tenant, "{context}");
        assert!(!decoded.hash_tag(), "{context}");
        assert_eq!(
            decoded.operation(),
            case["operation"].as_str().unwrap(),
            "{context}"
        );

        let pairs = spec_model::pairs(
            case["criteria"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c[0].as_str().unwrap().to_owned(), canonical(&c[1]))),
        );
        let tail = key.splitn(6, ':').nth(5);
        match tail {
            Some(tail) if tail.starts_with("c_") && !tail.contains('=') => {
                summarized += 1;
                assert_eq!(
                    decoded.criteria(),
                    &DecodedCriteria::Digest(tail[2..].to_owned())
                );
            }
            _ => {
                plain += 1;
                let expected = if pairs.is_empty() {
                    DecodedCriteria::None
                } else {
                    DecodedCriteria::Pairs(pairs)
                };
                assert_eq!(decoded.criteria(), &expected, "{context}");
            }
        }
        assert_eq!(decoded.to_string(), key, "{context}");
        assert_eq!(key.parse().as_ref(), Ok(&decoded));
    }
    assert!(
        plain > 100 && summarized > 100,
        "{plain} plain, {summarized} summarized"
    );
}

#[test]
fn decoded_pairs_rebuild_the_same_key() {
    for key in vector_keys() {
        let decoded = decode(&key).unwrap();
        if decoded.criteria().digest().is_some() {
            continue;
        }
        let mut builder = KeyBuilder::new(decoded.namespace(), decoded.operation());
        builder
            .schema(decoded.schema())
            .generation(decoded.generation());
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
        for (name, value) in decoded.criteria().pairs() {
            builder.criterion(name.as_str(), value.as_str());
        }
        assert_eq!(builder.build().unwrap().as_str(), key);
    }
}

#[test]
fn hash_tagged_and_compound_tenants() {
    let key = KeyBuilder::new("crm", "list")
        .tenant("a,b")
        .tenant("{x}")
        .hash_tag(true)
        .criterion("page", 2)
        .build()
        .unwrap();
    assert_eq!(key.as_str(), "crm:s1:g1:t{a%2Cb,%7Bx%7D}:list:page=2");
    let decoded = decode(key.as_str()).unwrap();
    assert_eq!(decoded.tenant().parts(), ["a,b", "{x}"]);
    assert!(decoded.hash_tag());
    assert_eq!(decoded.to_string(), key.as_str());
}

#[test]
fn malformed_keys_give_the_expected_error() {
    use DecodeErrorKind::*;
    let cases: &[(&str, DecodeErrorKind, usize)] = &[
        ("library:s1:g4:tbranch-2", MissingSegment, 23),
        ("library:s1:g4", MissingSegment, 13),
        ("library", MissingSegment, 7),
        ("library:1:g4:tbranch-2:list", MissingMarker, 8),
        ("library:sx:g4:tbranch-2:list", InvalidNumber, 8),
        ("library:s1:g4x:tbranch-2:list", InvalidNumber, 11),
        ("library:s1:g007:tbranch-2:list", InvalidNumber, 11),
        ("library:s99999999999:g4:tbranch-2:list", NumberOverflow, 8),
        ("library:s1:g4:tbranch%2:list", TruncatedEscape, 21),
        ("library:s1:g4:tbranch-2:list:q=a%", TruncatedEscape, 32),
        ("library:s1:g4:tbranch%zz:list", InvalidEscape, 21),
        (
            "library:s1:g4:tbranch-2:list:q=Sand%3a",
            LowercaseEscape,
            35,
        ),
        ("library:s1:g4:tbranch%2D2:list", NeedlessEscape, 21),
        ("library:s1:g4:tbranch 2:list", UnescapedByte, 21),
        (
            "library:s1:g4:tbranch-2:list:q=Sand: Borges",
            TrailingSegment,
            35,
        ),
        ("library:s1:g4:tbranch-2:list:q=a,b", UnescapedByte, 32),
        ("libr@ry:s1:g4:tbranch-2:list", UnescapedByte, 4),
        ("library:s1:g4:tbranch-2:list:q=%FF", InvalidUtf8, 31),
        ("library:s1:g4:tacme,:list", EmptyTenantPart, 20),
        ("library:s1:g4:tbranch-2:", EmptyOperation, 24),
        ("library:s1:g4:t{branch-2:list", UnclosedHashTag, 15),
        ("library:s1:g4:tbranch-2:list:", EmptyCriteria, 29),
        ("library:s1:g4:tbranch-2:list:page", InvalidCriterion, 29),
        ("library:s1:g4:tbranch-2:list:=2", EmptyCriterionName, 29),
        (
            "library:s1:g4:tbranch-2:list:author=",
            EmptyCriterionValue,
            36,
        ),
        (
            "library:s1:g4:tbranch-2:list:title=x&author=y",
            UnsortedCriteria,
            37,
        ),
        (
            "library:s1:g4:tbranch-2:list:page=1&page=2",
            DuplicateCriterion,
            36,
        ),
        (
            "library:s1:g4:tbranch-2:list:c_48EA661053F0F610",
            InvalidDigest,
            29,
        ),
        (
            "library:s1:g4:tbranch-2:list:c_48ea661053f0f6",
            InvalidDigest,
            29,
        ),
        (
            "library:s1:g4:tbranch-2:list:q=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            CriteriaTooLong,
            29,
        ),
    ];
    for &(key, kind, offset) in cases {
        let err = decode(key).expect_err(key);
        assert_eq!((err.kind(), err.offset()), (kind, offset), "{key:?}: {err}");
        assert!(err.to_string().starts_with(&format!("at byte {offset}: ")));
    }
}

/// Decoding either fails or gives a key that writes back as the same text:
/// the parser accepts exactly the canonical keys.
fn check_no_panic(key: &str) {
    match decode(key) {
        Ok(decoded) => assert_eq!(decoded.to_string(), key),
        Err(err) => assert!(err.offset() <= key.len(), "{key:?}: {err}"),
    }
}

#[test]
fn every_prefix_of_every_vector_key_decodes_or_errs() {
    for key in vector_keys() {
        for (end, _) in key.char_indices().chain([(key.len(), ' ')]) {
            check_no_panic(&key[..end]);
        }
    }
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mutated_vector_keys_decode_or_err() {
    const BYTES: &[u8] = b":%{},&=_-*aAzZ09fF sgtc.";
    const CHARS: &[char] = &['é', '中', '\u{0}', '\n', '🔑'];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    for key in vector_keys() {
        for _ in 0..60 {
            let mut mutated: Vec<char> = key.chars().collect();
            for _ in 0..=rng.below(3) {
                let at = rng.below(mutated.len() + 1);
                let replacement = if rng.below(6) == 0 {
                    CHARS[rng.below(CHARS.len())]
                } else {
                    char::from(BYTES[rng.below(BYTES.len())])
                };
                match rng.below(3) {
                    0 => mutated.insert(at, replacement),
                    1 if at < mutated.len() => {
                        mutated.remove(at);
                    }
                    _ if at < mutated.len() => mutated[at] = replacement,
                    _ => mutated.push(replacement),
                }
            }
            let mutated: String = mutated.into_iter().collect();
            check_no_panic(&mutated);
            accepted += usize::from(decode(&mutated).is_ok());
        }
    }
    assert!(accepted > 0, "some mutations are still keys");
}
