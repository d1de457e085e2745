//! The inverse of [`esc`](crate::escape): text read back from a key.
//!
//! [`unescape`] is strict: it accepts exactly the text `esc` writes and says
//! what is wrong and where otherwise, for reading keys from outside.
//! [`unescape_lossy`] and [`unescaped_bytes`] are lenient, for text this
//! crate's users wrote themselves: a `%` without two hex digits stays as it
//! is, and bytes that are not UTF-8 become U+FFFD.

use std::borrow::Cow;
use std::fmt;

use crate::escape::unreserved;

/// Why text is not in the escaped form `esc` writes: what is wrong
/// ([`kind`](Self::kind)) and where ([`offset`](Self::offset)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnescapeError {
    kind: UnescapeErrorKind,
    offset: usize,
}

/// The kinds of [`UnescapeError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnescapeErrorKind {
    /// A byte `esc` always escapes appears as itself.
    UnescapedByte,
    /// A `%` is not followed by two more bytes.
    TruncatedEscape,
    /// A `%` is not followed by two hex digits.
    InvalidEscape,
    /// A `%` escape uses lowercase hex digits; `esc` writes uppercase.
    LowercaseEscape,
    /// A `%` escape encodes a byte `esc` writes as itself.
    NeedlessEscape,
    /// The escapes decode to bytes that are not UTF-8.
    InvalidUtf8,
}

impl UnescapeError {
    /// What is wrong.
    pub fn kind(&self) -> UnescapeErrorKind {
        self.kind
    }

    /// The byte offset in the text where the problem is: the byte itself, or
    /// the `%` of the escape (for [`UnescapeErrorKind::InvalidUtf8`], of the
    /// escape holding the first byte that is not UTF-8).
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl fmt::Display for UnescapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            UnescapeErrorKind::UnescapedByte => "a byte that is always escaped appears as itself",
            UnescapeErrorKind::TruncatedEscape => "`%` is not followed by two more bytes",
            UnescapeErrorKind::InvalidEscape => "`%` is not followed by two hex digits",
            UnescapeErrorKind::LowercaseEscape => "an escape uses lowercase hex digits",
            UnescapeErrorKind::NeedlessEscape => "an escape stands for a byte written as itself",
            UnescapeErrorKind::InvalidUtf8 => "the escapes do not decode to UTF-8 text",
        };
        write!(f, "at byte {}: {what}", self.offset)
    }
}

impl std::error::Error for UnescapeError {}

/// `text` unescaped, when it is exactly what `esc` writes for some text:
/// only unreserved bytes as themselves, every other byte as `%XX` with
/// uppercase hex, and the escapes UTF-8. The first problem, in the order of
/// the text, is the error (an escape's UTF-8 is checked once all of the text
/// is well-formed). Borrows `text` when it holds no escape.
pub fn unescape(text: &str) -> Result<Cow<'_, str>, UnescapeError> {
    let bytes = text.as_bytes();
    let error = |kind, offset| Err(UnescapeError { kind, offset });
    let mut decoded = Vec::new();
    let mut run = 0;
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if unreserved(byte) {
            i += 1;
            continue;
        }
        if byte != b'%' {
            return error(UnescapeErrorKind::UnescapedByte, i);
        }
        let (high, low) = match bytes.get(i + 1..i + 3) {
            Some(&[high, low]) => (high, low),
            _ => return error(UnescapeErrorKind::TruncatedEscape, i),
        };
        let (Some(h), Some(l)) = (hex_digit(high), hex_digit(low)) else {
            return error(UnescapeErrorKind::InvalidEscape, i);
        };
        if high.is_ascii_lowercase() || low.is_ascii_lowercase() {
            return error(UnescapeErrorKind::LowercaseEscape, i);
        }
        let byte = h << 4 | l;
        if unreserved(byte) {
            return error(UnescapeErrorKind::NeedlessEscape, i);
        }
        decoded.extend_from_slice(bytes.get(run..i).unwrap_or_default());
        decoded.push(byte);
        i += 3;
        run = i;
    }
    if run == 0 {
        return Ok(Cow::Borrowed(text));
    }
    decoded.extend_from_slice(bytes.get(run..).unwrap_or_default());
    match String::from_utf8(decoded) {
        Ok(decoded) => Ok(Cow::Owned(decoded)),
        Err(not_utf8) => {
            let valid = not_utf8.utf8_error().valid_up_to();
            error(UnescapeErrorKind::InvalidUtf8, escaped_offset(bytes, valid))
        }
    }
}

/// Where in well-formed escaped text the byte `decoded` of its unescaped
/// form is written: every escape is three bytes for one.
fn escaped_offset(escaped: &[u8], decoded: usize) -> usize {
    let mut offset = 0;
    for _ in 0..decoded {
        offset += if escaped.get(offset) == Some(&b'%') {
            3
        } else {
            1
        };
    }
    offset
}

/// `text` unescaped leniently: every `%` and two hex digits (of either case)
/// is the byte they spell, anything else is kept as it is, and bytes that
/// are not UTF-8 become U+FFFD. Exact for text `esc` wrote. Borrows `text`
/// when it holds no `%`.
pub fn unescape_lossy(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let decoded: Vec<u8> = unescaped_bytes(text.as_bytes()).collect();
    match String::from_utf8(decoded) {
        Ok(decoded) => Cow::Owned(decoded),
        Err(not_utf8) => Cow::Owned(String::from_utf8_lossy(not_utf8.as_bytes()).into_owned()),
    }
}

/// The bytes of `escaped` unescaped, leniently as by [`unescape_lossy`] and
/// without UTF-8 checks, one at a time: to compare escaped text with other
/// text without allocating.
pub fn unescaped_bytes(escaped: &[u8]) -> UnescapedBytes<'_> {
    UnescapedBytes { rest: escaped }
}

/// The iterator of [`unescaped_bytes`].
#[derive(Debug, Clone)]
pub struct UnescapedBytes<'t> {
    rest: &'t [u8],
}

impl Iterator for UnescapedBytes<'_> {
    type Item = u8;

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let (byte, rest) = match self.rest {
            [b'%', high, low, rest @ ..] => match (hex_digit(*high), hex_digit(*low)) {
                (Some(h), Some(l)) => (h << 4 | l, rest),
                _ => (b'%', &self.rest[1..]),
            },
            [byte, rest @ ..] => (*byte, rest),
            [] => return None,
        };
        self.rest = rest;
        Some(byte)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.rest.len().div_ceil(3), Some(self.rest.len()))
    }
}

/// The value of a hex digit of either case.
#[inline]
fn hex_digit(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::escape::{escape, is_unreserved};
    use UnescapeErrorKind::*;
    use percent_encoding::percent_decode_str;

    fn kind(text: &str) -> (UnescapeErrorKind, usize) {
        match unescape(text) {
            Ok(decoded) => panic!("{text:?} unescaped to {decoded:?}"),
            Err(err) => (err.kind(), err.offset()),
        }
    }

    #[test]
    fn unescapes_what_esc_writes() {
        for text in [
            "",
            "a",
            "Sand: Borges & co, {x}=*'()!~._-Oğuz",
            "%",
            "50%,a",
            "😀z",
            "a\0b\u{7f}",
            "\u{10ffff}",
        ] {
            let escaped = escape(text).to_string();
            assert_eq!(unescape(&escaped), Ok(Cow::Borrowed(text)), "{text:?}");
            assert_eq!(unescape_lossy(&escaped), text, "{text:?}");
            assert!(unescaped_bytes(escaped.as_bytes()).eq(text.bytes()));
        }
        assert!(matches!(unescape("abc"), Ok(Cow::Borrowed("abc"))));
        assert!(matches!(unescape_lossy("abc"), Cow::Borrowed("abc")));
    }

    #[test]
    fn every_escaped_byte_is_checked() {
        for byte in 0..=u8::MAX {
            let upper = format!("%{byte:02X}");
            if is_unreserved(byte) {
                assert_eq!(kind(&upper), (NeedlessEscape, 0), "{upper}");
            } else if byte.is_ascii() {
                let text = char::from(byte).to_string();
                assert_eq!(unescape(&upper), Ok(Cow::Owned(text.clone())), "{upper}");
                if byte != b'%' {
                    assert_eq!(kind(&text), (UnescapedByte, 0), "{text:?}");
                }
            } else {
                assert_eq!(kind(&upper), (InvalidUtf8, 0), "{upper}");
            }
            let lower = format!("%{byte:02x}");
            if lower != upper {
                assert_eq!(kind(&lower), (LowercaseEscape, 0), "{lower}");
            }
        }
    }

    #[test]
    fn errors_name_the_first_problem_and_where_it_is() {
        let cases: &[(&str, (UnescapeErrorKind, usize))] = &[
            ("x%", (TruncatedEscape, 1)),
            ("x%4", (TruncatedEscape, 1)),
            ("%G1", (InvalidEscape, 0)),
            ("%%41", (InvalidEscape, 0)),
            ("a%é", (InvalidEscape, 1)),
            ("a%3a", (LowercaseEscape, 1)),
            ("ab%41", (NeedlessEscape, 2)),
            ("%2A", (NeedlessEscape, 0)),
            ("a b", (UnescapedByte, 1)),
            ("ç", (UnescapedByte, 0)),
            ("%FF", (InvalidUtf8, 0)),
            ("ab%C3", (InvalidUtf8, 2)),
            ("%C3%A9x%C3", (InvalidUtf8, 7)),
            ("%ED%A0%80", (InvalidUtf8, 0)),
            // UTF-8 is checked after the whole text is well-formed.
            ("%FF a", (UnescapedByte, 3)),
        ];
        for &(text, expected) in cases {
            assert_eq!(kind(text), expected, "{text:?}");
        }
    }

    #[test]
    fn the_lenient_forms_decode_as_percent_encoding_does() {
        let bytes: Vec<char> = "%%4a1Fgé\u{0}:".chars().collect();
        let mut texts = Vec::new();
        for a in &bytes {
            for b in &bytes {
                for c in &bytes {
                    for d in &bytes {
                        texts.push([*a, *b, *c, *d].iter().collect::<String>());
                    }
                }
            }
        }
        texts.extend(["%C3", "%C3%A9", "%FF%FEa", "%ED%A0%80", "%e4%b8%ad"].map(String::from));
        for text in &texts {
            let reference = percent_decode_str(text);
            assert_eq!(
                unescape_lossy(text),
                reference.clone().decode_utf8_lossy(),
                "{text:?}"
            );
            assert!(unescaped_bytes(text.as_bytes()).eq(reference), "{text:?}");
        }
    }
}
