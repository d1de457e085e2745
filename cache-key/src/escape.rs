//! `esc`: the percent-encoding every value, name and segment goes through.
//!
//! Exactly the bytes JavaScript's `encodeURIComponent` leaves alone stay as they
//! are (`A-Z a-z 0-9 - _ . ! ~ * ' ( )`); every other byte of the UTF-8 text is
//! written `%XX` with uppercase hex. All separators of the key format (`:` `&`
//! `=` `,` `{` `}`) are therefore escaped inside values.
//!
//! The key writers use the table-driven functions here ([`push_escaped`],
//! [`escaped_len`], [`for_each_escaped_str`]), which copy whole runs of unreserved
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
const TRIPLETS: [u8; 768] = {
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

/// The most bytes one byte of text takes escaped: `%XX`.
pub(crate) const MAX_ESCAPED_PER_BYTE: usize = 3;

/// Whether `byte` is written as itself.
#[inline(always)]
pub(crate) fn unreserved(byte: u8) -> bool {
    UNRESERVED[usize::from(byte)]
}

/// [`TRIPLETS`] as text, checked once at compile time (it is ASCII).
const TRIPLETS_TEXT: &str = match core::str::from_utf8(&TRIPLETS) {
    Ok(text) => text,
    Err(_) => panic!("the escape table is ASCII"),
};

/// The same triplet as text.
#[inline(always)]
fn triplet_str(byte: u8) -> &'static str {
    let at = 3 * usize::from(byte);
    TRIPLETS_TEXT.get(at..at + 3).unwrap_or_default()
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

/// Calls `f` with the escaped form of `text`, in order: runs of unreserved
/// bytes as they are, and one `%XX` triplet for each other byte.
#[inline]
pub(crate) fn for_each_escaped_str<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let bytes = text.as_bytes();
    let mut run = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if !unreserved(byte) {
            // A run of unreserved (ASCII) bytes starts and ends on character
            // boundaries: the byte before `i` is ASCII, so `i` starts a character.
            if run < i {
                f(&text[run..i]);
            }
            f(triplet_str(byte));
            run = i + 1;
        }
    }
    if run < bytes.len() {
        f(&text[run..]);
    }
}

/// Appends the escaped form of `text` to `out`.
#[inline]
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    for_each_escaped_str(text, |piece| out.push_str(piece));
}

/// [`push_escaped`] for text that often needs no escaping (criterion names,
/// namespaces and operations given at run time, most values): checked inline
/// and then copied in one piece, which costs less than the call (2 to 5 ns
/// a text in the builder's benchmarks); text with something to escape goes
/// to `push_escaped`.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn push_escaped_short(out: &mut String, text: &str) {
    if text.bytes().all(unreserved) {
        out.push_str(text);
    } else {
        push_escaped(out, text);
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
                assert_eq!(triplet_str(byte), encoded, "byte {byte:#04x}");
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
        for_each_escaped_str(text, |piece| pieces.extend_from_slice(piece.as_bytes()));
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
            let mut short = String::new();
            push_escaped_short(&mut short, text);
            assert_eq!(short, out, "{text:?}");
            assert_eq!(escaped_len(text), out.len(), "{text:?}");
        }
    }
}
