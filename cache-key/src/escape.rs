//! `esc`: the percent-encoding every value, name and segment goes through.
//!
//! Exactly the bytes JavaScript's `encodeURIComponent` leaves alone stay as they
//! are (`A-Z a-z 0-9 - _ . ! ~ * ' ( )`); every other byte of the UTF-8 text is
//! written `%XX` with uppercase hex. All separators of the key format (`:` `&`
//! `=` `,` `{` `}`) are therefore escaped inside values.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, PercentEncode, utf8_percent_encode};

/// The set of bytes that are percent-encoded: everything but the unreserved bytes.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Whether `byte` is written as itself by [`escape`].
pub(crate) const fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')'
        )
}

/// The escaped form of `text`, as runs of borrowed text and `%XX` triplets.
pub(crate) fn escape(text: &str) -> PercentEncode<'_> {
    utf8_percent_encode(text, ESCAPED)
}

/// The length in bytes of the escaped form of `text`, without writing it.
pub(crate) fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| if is_unreserved(b) { 1 } else { 3 })
        .sum()
}

/// Appends the escaped form of `text` to `out`.
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    out.extend(escape(text));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreserved_bytes_agree_with_the_escape_set() {
        for byte in 0..=u8::MAX {
            let text = [byte];
            let encoded: String = percent_encoding::percent_encode(&text, ESCAPED).collect();
            let kept = encoded.len() == 1;
            assert_eq!(kept, is_unreserved(byte), "byte {byte:#04x}");
        }
    }

    #[test]
    fn escapes_like_encode_uri_component() {
        let mut out = String::new();
        push_escaped(&mut out, "Sand: Borges & co, {x}=*'()!~._-Oğuz");
        assert_eq!(
            out,
            "Sand%3A%20Borges%20%26%20co%2C%20%7Bx%7D%3D*'()!~._-O%C4%9Fuz"
        );
        assert_eq!(
            escaped_len("Sand: Borges & co, {x}=*'()!~._-Oğuz"),
            out.len()
        );
    }
}
