//! `esc`: the percent-encoding every value, name and segment goes through.
//!
//! Exactly the bytes JavaScript's `encodeURIComponent` leaves alone stay as
//! they are (`A-Z a-z 0-9 - _ . ! ~ * ' ( )`); every other byte of the UTF-8
//! text is written `%XX` with uppercase hex. All separators of the key format
//! (`:` `&` `=` `,` `{` `}`) are therefore escaped inside values, and escaped
//! text is ASCII.

use core::fmt;

/// Whether `byte` is written as itself.
pub const fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')'
        )
}

/// [`is_unreserved`] for every byte, as a table: one load per byte.
static UNRESERVED: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = is_unreserved(byte as u8);
        byte += 1;
    }
    table
};

/// `%00%01...%FF`: the escaped form of every byte, three bytes each, as text
/// (it is ASCII), so that triplets are `&'static str` pieces.
const TRIPLETS: &str = {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    const BYTES: [u8; 768] = {
        let mut table = [0; 768];
        let mut byte = 0;
        while byte < 256 {
            table[3 * byte] = b'%';
            table[3 * byte + 1] = HEX[byte >> 4];
            table[3 * byte + 2] = HEX[byte & 0xf];
            byte += 1;
        }
        table
    };
    match core::str::from_utf8(&BYTES) {
        Ok(text) => text,
        Err(_) => panic!("the escape table is ASCII"),
    }
};

/// The most bytes one byte of text takes escaped: `%XX`.
pub const MAX_ESCAPED_PER_BYTE: usize = 3;

/// Whether `byte` is written as itself, from the table.
#[inline(always)]
pub fn unreserved(byte: u8) -> bool {
    UNRESERVED[usize::from(byte)]
}

/// The `%XX` triplet of `byte`.
#[inline(always)]
fn triplet(byte: u8) -> &'static str {
    let at = 3 * usize::from(byte);
    TRIPLETS.get(at..at + 3).unwrap_or_default()
}

/// The length in bytes of the escaped form of `text`, without writing it.
#[inline]
pub fn escaped_len(text: &str) -> usize {
    let escaped = text.bytes().filter(|&b| !unreserved(b)).count();
    text.len() + (MAX_ESCAPED_PER_BYTE - 1) * escaped
}

/// Calls `f` with the escaped form of `text`, in order: runs of unreserved
/// bytes as they are, and one `%XX` triplet for each other byte.
#[inline]
pub fn for_each_escaped_str<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let mut run = 0;
    for (i, byte) in text.bytes().enumerate() {
        if !unreserved(byte) {
            // Unreserved bytes are ASCII: a run of them starts and ends on
            // character boundaries.
            if run < i {
                f(&text[run..i]);
            }
            f(triplet(byte));
            run = i + 1;
        }
    }
    if run < text.len() {
        f(&text[run..]);
    }
}

/// Appends the escaped form of `text` to `out`.
#[inline]
pub fn push_escaped(out: &mut String, text: &str) {
    for_each_escaped_str(text, |piece| out.push_str(piece));
}

/// [`push_escaped`] for text that often needs no escaping (names, most
/// values): checked inline, then copied in one piece.
#[inline(always)]
pub fn push_escaped_short(out: &mut String, text: &str) {
    if text.bytes().all(unreserved) {
        out.push_str(text);
    } else {
        push_escaped(out, text);
    }
}

/// The escaped form of `text`, to format.
pub fn escape(text: &str) -> Escaped<'_> {
    Escaped(text)
}

/// Text written escaped by [`fmt::Display`]: see [`escape`].
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'t>(&'t str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut result = Ok(());
        for_each_escaped_str(self.0, |piece| {
            if result.is_ok() {
                result = f.write_str(piece);
            }
        });
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

    /// `encodeURIComponent`'s set, spelled with `percent-encoding`: an
    /// independent definition to check the tables against.
    const ENCODE_URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'!')
        .remove(b'~')
        .remove(b'*')
        .remove(b'\'')
        .remove(b'(')
        .remove(b')');

    #[test]
    fn every_byte_escapes_as_percent_encoding_does() {
        for byte in 0..=u8::MAX {
            let text = [byte];
            let encoded: String =
                percent_encoding::percent_encode(&text, ENCODE_URI_COMPONENT).collect();
            let kept = encoded.len() == 1;
            assert_eq!(kept, is_unreserved(byte), "byte {byte:#04x}");
            assert_eq!(kept, unreserved(byte), "byte {byte:#04x}");
            if !kept {
                assert_eq!(triplet(byte), encoded, "byte {byte:#04x}");
            }
        }
    }

    #[test]
    fn escapes_like_encode_uri_component() {
        let text = "Sand: Borges & co, {x}=*'()!~._-Oğuz";
        let expected = "Sand%3A%20Borges%20%26%20co%2C%20%7Bx%7D%3D*'()!~._-O%C4%9Fuz";
        for text in [
            text,
            "",
            "a",
            "%",
            "ğ",
            "x y",
            "😀z",
            "abc%",
            "%abc",
            "a\0b\u{7f}",
        ] {
            let reference = utf8_percent_encode(text, ENCODE_URI_COMPONENT).to_string();
            let mut out = String::new();
            push_escaped(&mut out, text);
            assert_eq!(out, reference, "{text:?}");
            let mut short = String::new();
            push_escaped_short(&mut short, text);
            assert_eq!(short, reference, "{text:?}");
            assert_eq!(escape(text).to_string(), reference, "{text:?}");
            assert_eq!(escaped_len(text), reference.len(), "{text:?}");
        }
        assert_eq!(escape(text).to_string(), expected);
    }

    #[test]
    fn markers_are_the_bytes_after_the_separator() {
        assert_eq!(crate::marker(crate::SCHEMA), 's');
        assert_eq!(crate::marker(crate::GENERATION), 'g');
        assert_eq!(crate::marker(crate::TENANT), 't');
    }
}
