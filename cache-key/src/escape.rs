//! `esc`: the percent-encoding every value, name and segment goes through.
//!
//! Exactly the bytes JavaScript's `encodeURIComponent` leaves alone stay as they
//! are (`A-Z a-z 0-9 - _ . ! ~ * ' ( )`); every other byte of the UTF-8 text is
//! written `%XX` with uppercase hex. All separators of the key format (`:` `&`
//! `=` `,` `{` `}`) are therefore escaped inside values.
//!
//! The key writers use the table-driven functions here ([`push_escaped`],
//! [`escaped_len`], [`for_each_piece`]), which copy whole runs of unreserved
//! bytes at once; [`escape`] (the `percent-encoding` iterator, which implements
//! `Display`) is kept for formatting, and a test checks that both agree.

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

/// [`is_unreserved`] for every byte, as a table.
static UNRESERVED: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = is_unreserved(byte as u8);
        byte += 1;
    }
    table
};

/// `%00%01...%FF`: the escaped form of every byte, three bytes each.
static TRIPLETS: [u8; 768] = {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
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

/// Whether `byte` is written as itself.
#[inline(always)]
pub(crate) fn unreserved(byte: u8) -> bool {
    UNRESERVED[usize::from(byte)]
}

/// The three bytes `%XX` that stand for `byte`.
#[inline(always)]
pub(crate) fn triplet(byte: u8) -> &'static [u8; 3] {
    let at = 3 * usize::from(byte);
    match TRIPLETS[at..at + 3].try_into() {
        Ok(triplet) => triplet,
        Err(_) => unreachable!("three bytes"),
    }
}

/// The same triplet as text (it is ASCII).
#[inline(always)]
fn triplet_str(byte: u8) -> &'static str {
    match core::str::from_utf8(triplet(byte)) {
        Ok(text) => text,
        Err(_) => unreachable!("ASCII"),
    }
}

/// The escaped form of `text`, as runs of borrowed text and `%XX` triplets.
pub(crate) fn escape(text: &str) -> PercentEncode<'_> {
    utf8_percent_encode(text, ESCAPED)
}

/// The length in bytes of the escaped form of `text`, without writing it.
#[inline]
pub(crate) fn escaped_len(text: &str) -> usize {
    text.len()
        + 2 * text
            .bytes()
            .map(|b| usize::from(!unreserved(b)))
            .sum::<usize>()
}

/// Calls `f` with the escaped form of `bytes`, in order: runs of unreserved
/// bytes as they are, and one `%XX` triplet for each other byte.
#[inline]
pub(crate) fn for_each_piece(bytes: &[u8], mut f: impl FnMut(&[u8])) {
    let mut run = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if !unreserved(byte) {
            if run < i {
                f(&bytes[run..i]);
            }
            f(triplet(byte));
            run = i + 1;
        }
    }
    if run < bytes.len() {
        f(&bytes[run..]);
    }
}

/// Appends the escaped form of `text` to `out`.
#[inline]
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut run = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if !unreserved(byte) {
            // A run of unreserved (ASCII) bytes starts and ends on character
            // boundaries: the byte before `i` is ASCII, so `i` starts a character.
            if run < i {
                out.push_str(&text[run..i]);
            }
            out.push_str(triplet_str(byte));
            run = i + 1;
        }
    }
    if run < bytes.len() {
        out.push_str(&text[run..]);
    }
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
            assert_eq!(kept, unreserved(byte), "byte {byte:#04x}");
            if !kept {
                assert_eq!(triplet(byte), encoded.as_bytes(), "byte {byte:#04x}");
            }
        }
    }

    #[test]
    fn escapes_like_encode_uri_component() {
        let text = "Sand: Borges & co, {x}=*'()!~._-Oğuz";
        let mut out = String::new();
        push_escaped(&mut out, text);
        assert_eq!(
            out,
            "Sand%3A%20Borges%20%26%20co%2C%20%7Bx%7D%3D*'()!~._-O%C4%9Fuz"
        );
        assert_eq!(escaped_len(text), out.len());
        assert_eq!(escape(text).to_string(), out);
        let mut pieces = Vec::new();
        for_each_piece(text.as_bytes(), |piece| pieces.extend_from_slice(piece));
        assert_eq!(pieces, out.as_bytes());
    }

    #[test]
    fn the_fast_escaper_agrees_with_percent_encoding() {
        for text in [
            "",
            "a",
            "%",
            "ğ",
            "x y",
            "😀z",
            "abc%",
            "%abc",
            "a\u{0}b\u{7f}",
        ] {
            let mut out = String::new();
            push_escaped(&mut out, text);
            assert_eq!(out, escape(text).to_string(), "{text:?}");
            assert_eq!(escaped_len(text), out.len(), "{text:?}");
        }
    }
}
