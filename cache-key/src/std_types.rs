//! The canonical strings of the standard types (the table in the key
//! format): text, integers, `bool`, floats, `Option`, lists, sets, pointers.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::num::NonZero;
use std::rc::Rc;
use std::sync::Arc;

use cache_key_format::MAX_INTEGER_LEN;
use cache_key_format::escape::MAX_ESCAPED_PER_BYTE;

use crate::canonical::{CanonicalWriter, CriterionValue, Seal, TenantValue};
use crate::number::js_number;

// `inline(always)` only in optimized builds: see the note in key_writer.rs.

macro_rules! text {
    ($($ty:ty),*) => {$(
        impl CriterionValue for $ty {
            #[cfg_attr(debug_assertions, inline)]
            #[cfg_attr(not(debug_assertions), inline(always))]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                out.write_str(self);
            }

            #[inline]
            fn __canonical_text(&self, _: Seal) -> Option<&str> {
                Some(self)
            }
        }
        impl TenantValue for $ty {
            #[inline]
            fn max_escaped_len(&self) -> usize {
                self.len() * MAX_ESCAPED_PER_BYTE
            }

            #[inline]
            fn is_empty_value(&self) -> bool {
                self.is_empty()
            }
        }
    )*};
}
text!(str, String, Cow<'_, str>);

impl CriterionValue for char {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_str(self.encode_utf8(&mut [0; 4]));
    }
}
impl TenantValue for char {
    #[inline]
    fn max_escaped_len(&self) -> usize {
        self.len_utf8() * MAX_ESCAPED_PER_BYTE
    }
}

macro_rules! integers {
    ($($ty:ty),*) => {$(
        impl CriterionValue for $ty {
            #[cfg_attr(debug_assertions, inline)]
            #[cfg_attr(not(debug_assertions), inline(always))]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                out.write_integer(*self);
            }
        }
        impl TenantValue for $ty {
            #[inline]
            fn max_escaped_len(&self) -> usize {
                MAX_INTEGER_LEN
            }

            #[inline]
            fn is_empty_value(&self) -> bool {
                *self == 0
            }
        }
        impl CriterionValue for NonZero<$ty> {
            #[inline]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                out.write_integer(self.get());
            }
        }
        impl TenantValue for NonZero<$ty> {
            #[inline]
            fn max_escaped_len(&self) -> usize {
                MAX_INTEGER_LEN
            }
        }
    )*};
}
integers!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize
);

impl CriterionValue for bool {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_unreserved(if *self { "true" } else { "false" });
    }
}

/// Written as JavaScript writes the number: the shortest text that reads
/// back as the same `f64` (`0.30000000000000004`, `1e%2B21` once escaped),
/// `NaN`, `Infinity`, and `-0` as `0`. A float computed by arithmetic keys
/// by its exact value; see [floats](crate#floats) for when to key an integer.
impl CriterionValue for f64 {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        js_number(*self, |text| out.write_str(text));
    }
}

/// Written as JavaScript writes the number: the shortest text that reads
/// back as the same `f32` (`0.30000000000000004`, `1e%2B21` once escaped),
/// `NaN`, `Infinity`, and `-0` as `0`. A float computed by arithmetic keys
/// by its exact value; see [floats](crate#floats) for when to key an integer.
impl CriterionValue for f32 {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        js_number(*self, |text| out.write_str(text));
    }
}

impl<T: CriterionValue> CriterionValue for Option<T> {
    /// `None` writes nothing, which drops the criterion (or, inside a list,
    /// is an empty element).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        if let Some(value) = self {
            value.write_canonical(out);
        }
    }

    #[inline]
    fn __canonical_text(&self, seal: Seal) -> Option<&str> {
        match self {
            Some(value) => value.__canonical_text(seal),
            None => Some(""),
        }
    }
}

macro_rules! pointers {
    ($($ty:ty),*) => {$(
        impl<T: CriterionValue + ?Sized> CriterionValue for $ty {
            #[cfg_attr(debug_assertions, inline)]
            #[cfg_attr(not(debug_assertions), inline(always))]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                (**self).write_canonical(out);
            }

            #[inline]
            fn __canonical_text(&self, seal: Seal) -> Option<&str> {
                (**self).__canonical_text(seal)
            }
        }
        impl<T: TenantValue + ?Sized> TenantValue for $ty {
            #[inline]
            fn max_escaped_len(&self) -> usize {
                (**self).max_escaped_len()
            }

            #[inline]
            fn is_empty_value(&self) -> bool {
                (**self).is_empty_value()
            }
        }
    )*};
}
pointers!(&T, &mut T, Box<T>, Rc<T>, Arc<T>);

impl<T: CriterionValue> CriterionValue for [T] {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_slice(self);
    }
}

impl<T: CriterionValue, const N: usize> CriterionValue for [T; N] {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_slice(self);
    }
}

impl<T: CriterionValue> CriterionValue for Vec<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_slice(self);
    }
}

impl<T: CriterionValue> CriterionValue for VecDeque<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_list(self);
    }
}

impl<T: CriterionValue> CriterionValue for BTreeSet<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_set_of(self);
    }
}

impl<T: CriterionValue, S: BuildHasher> CriterionValue for HashSet<T, S> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_set_of(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical<V: CriterionValue + ?Sized>(value: &V) -> String {
        let mut out = String::new();
        value.write_canonical(&mut CanonicalWriter::escaped(&mut out));
        out
    }

    #[test]
    fn scalars() {
        assert_eq!(canonical("Sand: Borges"), "Sand%3A%20Borges");
        assert_eq!(canonical(&'ğ'), "%C4%9F");
        assert_eq!(canonical(&-42i8), "-42");
        assert_eq!(canonical(&NonZero::new(7u16).unwrap()), "7");
        assert_eq!(canonical(&true), "true");
        assert_eq!(canonical(&1e21), "1e%2B21");
        assert_eq!(canonical(&None::<u8>), "");
        assert_eq!(canonical(&Some("x")), "x");
    }

    #[test]
    fn integers_are_exact_decimal() {
        assert_eq!(canonical(&0u8), "0");
        assert_eq!(canonical(&1970u16), "1970");
        assert_eq!(
            canonical(&u128::MAX),
            "340282366920938463463374607431768211455"
        );
        assert_eq!(
            canonical(&i128::MIN),
            "-170141183460469231731687303715884105728"
        );
        assert_eq!(canonical(&-5isize), "-5");
        for n in [0, 1, 9, 10, 99, 100, 101, 999, 1000, 1970, 65535, u64::MAX] {
            assert_eq!(canonical(&n), n.to_string());
        }
        for n in [i64::MIN, -100, -10, -1, 0, 5, 42, i64::MAX] {
            assert_eq!(canonical(&n), n.to_string());
        }
    }

    #[test]
    fn lists_escape_their_separators_so_they_stay_injective() {
        assert_eq!(canonical(&["a,b"]), "a%252Cb");
        assert_eq!(canonical(&["a", "b"]), "a%2Cb");
        assert_eq!(canonical(&["50%"]), "50%2525");
        assert_eq!(canonical(&[None, Some(1)]), "%2C1");
        assert_eq!(canonical(&[""]), "");
        assert_eq!(canonical(&Vec::<u8>::new()), "");
    }

    #[test]
    fn nested_lists_escape_once_per_level() {
        // Inner canonical strings "a,b" and "c"; as elements "a%2Cb" and "c";
        // the outer canonical string "a%2Cb,c", escaped.
        assert_eq!(canonical(&vec![vec!["a", "b"], vec!["c"]]), "a%252Cb%2Cc");
        assert_eq!(canonical(&vec![vec!["a,b"]]), "a%25252Cb");
        assert_ne!(
            canonical(&vec![vec!["a", "b"]]),
            canonical(&vec![vec!["a,b"]])
        );
    }

    #[test]
    fn sets_sort_by_canonical_bytes_and_deduplicate() {
        let numbers: BTreeSet<u32> = [10, 2, 33].into();
        assert_eq!(canonical(&numbers), "10%2C2%2C33");
        let words: HashSet<&str> = ["b", "a", "x y"].into();
        assert_eq!(canonical(&words), "a%2Cb%2Cx%20y");
        let options: BTreeSet<Option<&str>> = [None, Some("")].into();
        assert_eq!(canonical(&options), "");
    }

    #[test]
    fn large_sets_are_sorted_like_small_ones() {
        // More elements than the stack buffer holds, then longer text.
        let many: HashSet<u32> = (0..100).collect();
        let mut sorted: Vec<String> = (0..100).map(|n: u32| n.to_string()).collect();
        sorted.sort();
        assert_eq!(canonical(&many), sorted.join("%2C"));
        let long: HashSet<String> = ["b", "a,%", "c"].iter().map(|s| s.repeat(60)).collect();
        let expected = format!(
            "{}%2C{}%2C{}",
            "a%252C%2525".repeat(60),
            "b".repeat(60),
            "c".repeat(60)
        );
        assert_eq!(canonical(&long), expected);
    }
}
