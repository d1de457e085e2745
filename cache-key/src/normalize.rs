//! `#[criterion(trim)]` and `#[criterion(lowercase)]`: text normalized before
//! it reaches the key.
//!
//! Normalizing is only correct when the origin treats the variants as the same
//! query (a search that ignores case and surrounding spaces); otherwise two
//! different answers would share one key.

use crate::canonical::CanonicalWriter;
use crate::canonical::CriterionValue;

/// Text that `trim` and `lowercase` apply to.
#[diagnostic::on_unimplemented(
    message = "`trim` and `lowercase` apply to text, and `{Self}` is not text",
    label = "not text",
    note = "they accept str, String, Cow<str>, Box<str>, and Option or Vec of these; for other types, use #[criterion(with = path::to::function)]"
)]
pub trait NormalizeText {
    /// Writes the normalized text.
    fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool);
}

impl NormalizeText for str {
    fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool) {
        let text = if trim { self.trim() } else { self };
        if lowercase
            && text
                .chars()
                .any(|c| c.to_lowercase().ne(std::iter::once(c)))
        {
            out.write_str(&text.to_lowercase());
        } else {
            out.write_str(text);
        }
    }
}

macro_rules! forward {
    ($($ty:ty),*) => {$(
        impl NormalizeText for $ty {
            fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool) {
                str::write_normalized(self, out, trim, lowercase);
            }
        }
    )*};
}
forward!(String, std::borrow::Cow<'_, str>, Box<str>);

impl<T: NormalizeText + ?Sized> NormalizeText for &T {
    fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool) {
        (**self).write_normalized(out, trim, lowercase);
    }
}

impl<T: NormalizeText> NormalizeText for Option<T> {
    fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool) {
        if let Some(text) = self {
            text.write_normalized(out, trim, lowercase);
        }
    }
}

impl<T: NormalizeText> NormalizeText for Vec<T> {
    fn write_normalized(&self, out: &mut CanonicalWriter<'_>, trim: bool, lowercase: bool) {
        out.write_list(
            self.iter()
                .map(|text| Normalized::new(text, trim, lowercase)),
        );
    }
}

/// A field's value with `trim` / `lowercase` applied, as a criterion value.
///
/// Not generic: the derive casts the field to `&dyn NormalizeText` on its
/// type, so a field that is not text gets exactly one error, there.
pub struct Normalized<'a> {
    value: &'a dyn NormalizeText,
    trim: bool,
    lowercase: bool,
}

impl<'a> Normalized<'a> {
    /// `value` with `trim` / `lowercase` applied.
    #[inline]
    pub fn new(value: &'a dyn NormalizeText, trim: bool, lowercase: bool) -> Self {
        Normalized {
            value,
            trim,
            lowercase,
        }
    }
}

impl CriterionValue for Normalized<'_> {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        self.value.write_normalized(out, self.trim, self.lowercase);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalize<T: NormalizeText>(value: &T, trim: bool, lowercase: bool) -> String {
        let mut out = String::new();
        Normalized::new(value, trim, lowercase)
            .write_canonical(&mut CanonicalWriter::escaped(&mut out));
        out
    }

    #[test]
    fn trims_and_lowercases_text() {
        assert_eq!(normalize(&"  Sand ", true, false), "Sand");
        assert_eq!(normalize(&"  Sand ", false, true), "%20%20sand%20");
        assert_eq!(normalize(&" İSTANBUL ", true, true), "i%CC%87stanbul");
        assert_eq!(normalize(&Some(" x ".to_owned()), true, false), "x");
        assert_eq!(normalize(&None::<String>, true, true), "");
        assert_eq!(normalize(&vec![" A", "b "], true, true), "a%2Cb");
    }
}
