//! [`CriterionValue`] and [`TenantValue`]: the types a key can be made of, and
//! their canonical strings (the table in the key format).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::num::NonZero;
use std::rc::Rc;
use std::sync::Arc;

use crate::canonical::CanonicalWriter;
use crate::escape::MAX_ESCAPED_PER_BYTE;
use crate::number::{Decimal, js_number};
use crate::writer::CriteriaSegment;

/// A value that can be a criterion of a cache key: it has one canonical string.
///
/// Two values that mean the same query must write the same canonical string,
/// and two that mean different queries must write different ones. Writing
/// nothing (the empty string) drops the criterion from the key, as `None` does.
///
/// Implemented for the types of the key format's table: text (`str`, `String`,
/// `Cow<str>`, `char`), every integer width and `NonZero` integer, `bool`,
/// `f32`/`f64` (in JavaScript number form), `Option<T>`, lists (`Vec<T>`,
/// `VecDeque<T>`, slices, arrays), sets (`BTreeSet<T>`, `HashSet<T>`, sorted),
/// and references, `Box`, `Rc` and `Arc` of these.
///
/// Time instants (`Instant`, `SystemTime`) are deliberately not criteria: they
/// make every key unique. Bucket them first (a date, an hour) and use that.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a cache key",
    label = "`{Self}` does not implement `CriterionValue`",
    note = "accepted: text (&str, String, Cow<str>, char), integers, NonZero integers, bool, f32, f64, Option<T>, Vec<T>, slices, arrays, BTreeSet<T>, HashSet<T>, and references to these",
    note = "a time instant (Instant, SystemTime) would make every key unique: use a bucketed time such as a date, or `#[skip]` the field",
    note = "if the field does not change the response, mark it `#[skip]`; for your own type, implement `CriterionValue`"
)]
pub trait CriterionValue {
    /// Writes this value's canonical string.
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>);

    /// Writes this value as the criterion `name=value` of a key being written.
    /// Not a public API: text and integers take a shorter path than the
    /// general [`write_canonical`](Self::write_canonical); the key is the same.
    #[doc(hidden)]
    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.canonical_criterion(escaped_name_eq, self);
    }

    /// This value's canonical string when it is text the value holds (`None`
    /// otherwise): sets of text sort these without copying them. Not a
    /// public API.
    #[doc(hidden)]
    #[inline]
    fn __canonical_text(&self) -> Option<&str> {
        None
    }
}

/// A value that can identify a tenant (the authorization scope of a key): text,
/// integers and `char`.
///
/// Deliberately not implemented for `Option<T>`, collections or floats: a scope
/// cannot be optional or approximate. An empty tenant value is an error when
/// the key is built, never a key.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tenant of a cache key",
    label = "`{Self}` does not implement `TenantValue`",
    note = "a tenant is text (&str, String, Cow<str>, char) or an integer; it cannot be optional, a collection or a float",
    note = "for your own identifier type, implement `CriterionValue` and `TenantValue`"
)]
pub trait TenantValue: CriterionValue {
    /// An upper bound of the length of this value in a key (escaped), used to
    /// size the key before it is written. It never changes the key: a bound
    /// too small only costs a second allocation. The default measures exactly.
    fn max_escaped_len(&self) -> usize {
        let mut len = 0;
        self.write_canonical(&mut CanonicalWriter::count(&mut len));
        len
    }

    /// Whether this is its type's empty value: `0` for an integer, `""` for
    /// text, the nil UUID. A tenant left at its default
    /// (`..Default::default()`, a `#[derive(Default)]`, serde's `default`)
    /// has it, so a key refuses it as [`KeyError::EmptyTenant`] unless the
    /// tenant declares the value real (`#[tenant(allow_zero = "why")]`,
    /// [`KeyBuilder::tenant_allowing_zero`]). The default: `false`.
    ///
    /// [`KeyError::EmptyTenant`]: crate::KeyError::EmptyTenant
    /// [`KeyBuilder::tenant_allowing_zero`]: crate::KeyBuilder::tenant_allowing_zero
    fn is_empty_value(&self) -> bool {
        false
    }
}

/// The longest decimal integer: `i128::MIN` with its sign.
const MAX_INTEGER_LEN: usize = 40;

macro_rules! text {
    ($($ty:ty),*) => {$(
        impl CriterionValue for $ty {
            #[inline]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                out.write_str(self);
            }

            #[inline]
            fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
                criteria.text_criterion(escaped_name_eq, self);
            }

            #[inline]
            fn __canonical_text(&self) -> Option<&str> {
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
    ($($ty:ty => $decimal:ident as $wide:ty),*) => {$(
        impl CriterionValue for $ty {
            #[inline]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                out.write_decimal(Decimal::new().$decimal(<$wide>::from(*self)));
            }

            #[inline]
            fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
                criteria.decimal_criterion(escaped_name_eq, Decimal::new().$decimal(<$wide>::from(*self)));
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
                self.get().write_canonical(out);
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
    u8 => set_u64 as u64, u16 => set_u64 as u64, u32 => set_u64 as u64,
    u64 => set_u64 as u64, u128 => set_unsigned as u128,
    i8 => set_i64 as i64, i16 => set_i64 as i64, i32 => set_i64 as i64,
    i64 => set_i64 as i64, i128 => set_signed as i128
);

impl CriterionValue for usize {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        // usize is at most 128 bits on every target Rust supports.
        out.write_decimal(Decimal::new().set_unsigned(*self as u128));
    }
}
impl TenantValue for usize {
    #[inline]
    fn max_escaped_len(&self) -> usize {
        MAX_INTEGER_LEN
    }

    #[inline]
    fn is_empty_value(&self) -> bool {
        *self == 0
    }
}
impl CriterionValue for NonZero<usize> {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        self.get().write_canonical(out);
    }
}
impl TenantValue for NonZero<usize> {
    #[inline]
    fn max_escaped_len(&self) -> usize {
        MAX_INTEGER_LEN
    }
}

impl CriterionValue for isize {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_decimal(Decimal::new().set_signed(*self as i128));
    }
}
impl TenantValue for isize {
    #[inline]
    fn max_escaped_len(&self) -> usize {
        MAX_INTEGER_LEN
    }

    #[inline]
    fn is_empty_value(&self) -> bool {
        *self == 0
    }
}
impl CriterionValue for NonZero<isize> {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        self.get().write_canonical(out);
    }
}
impl TenantValue for NonZero<isize> {
    #[inline]
    fn max_escaped_len(&self) -> usize {
        MAX_INTEGER_LEN
    }
}

impl CriterionValue for bool {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_unreserved(if *self { "true" } else { "false" });
    }
}

impl CriterionValue for f64 {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        js_number(*self, |text| out.write_str(text));
    }
}

impl CriterionValue for f32 {
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        js_number(*self, |text| out.write_str(text));
    }
}

impl<T: CriterionValue> CriterionValue for Option<T> {
    /// `None` writes nothing, which drops the criterion (or, inside a list,
    /// is an empty element).
    #[inline]
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        if let Some(value) = self {
            value.write_canonical(out);
        }
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        if let Some(value) = self {
            value.__write_criterion(criteria, escaped_name_eq);
        }
    }

    #[inline]
    fn __canonical_text(&self) -> Option<&str> {
        match self {
            Some(value) => value.__canonical_text(),
            None => Some(""),
        }
    }
}

macro_rules! pointers {
    ($($ty:ty),*) => {$(
        impl<T: CriterionValue + ?Sized> CriterionValue for $ty {
            #[inline]
            fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
                (**self).write_canonical(out);
            }

            #[inline]
            fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
                (**self).__write_criterion(criteria, escaped_name_eq);
            }

            #[inline]
            fn __canonical_text(&self) -> Option<&str> {
                (**self).__canonical_text()
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
        out.write_list(self);
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.list_criterion(escaped_name_eq, self);
    }
}

impl<T: CriterionValue, const N: usize> CriterionValue for [T; N] {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_list(self);
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.list_criterion(escaped_name_eq, self);
    }
}

impl<T: CriterionValue> CriterionValue for Vec<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_list(self);
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.list_criterion(escaped_name_eq, self);
    }
}

impl<T: CriterionValue> CriterionValue for VecDeque<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_list(self);
    }
}

impl<T: CriterionValue> CriterionValue for BTreeSet<T> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_set(self);
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.set_criterion(escaped_name_eq, self, self);
    }
}

impl<T: CriterionValue, S: BuildHasher> CriterionValue for HashSet<T, S> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_set(self);
    }

    #[inline]
    fn __write_criterion(&self, criteria: &mut CriteriaSegment<'_>, escaped_name_eq: &str) {
        criteria.set_criterion(escaped_name_eq, self, self);
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
