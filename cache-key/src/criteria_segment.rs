//! [`CriteriaSegment`]: the criteria of a key being written, in place after
//! the operation until they outgrow [`MAX_PLAIN_CRITERIA`] bytes, then
//! streamed into SHA-256 and written as their summary.

#[cfg(doc)]
use cache_key_format::MAX_PLAIN_CRITERIA;
use cache_key_format::escape::{MAX_ESCAPED_PER_BYTE, for_each_escaped_str, push_escaped_short};
use cache_key_format::{CRITERIA_SEPARATOR, SUMMARY_HEX_DIGITS, SUMMARY_PREFIX};
use sha2::{Digest, Sha256};

use crate::number::push_digits;

// `inline(always)` only in optimized builds: see the note in key_writer.rs.

/// The criteria limit of a readable key: never summarized.
pub(crate) const READABLE: usize = usize::MAX;

/// The criteria segment of a key being written: the text after `start` in
/// `out` while it fits in `limit` bytes, and `digest` once it does not.
/// Values write themselves here through a
/// [`CanonicalWriter`](crate::CanonicalWriter).
pub(crate) struct CriteriaSegment<'w> {
    pub(crate) out: &'w mut String,
    pub(crate) start: usize,
    pub(crate) digest: &'w mut Option<Sha256>,
    pub(crate) limit: usize,
}

impl CriteriaSegment<'_> {
    /// Starts a pair: `&` unless it is the first, then `name=` (escaped).
    #[inline]
    pub(crate) fn begin_pair(&mut self, escaped_name_eq: &str) {
        if self.digest.is_some() || self.out.len() > self.start {
            self.push_ascii(CRITERIA_SEPARATOR);
        }
        self.push(escaped_name_eq);
    }

    /// Appends text, escaped.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push_text(&mut self, text: &str) {
        if self.has_room_for(text.len() * MAX_ESCAPED_PER_BYTE) {
            // Even escaped at its longest, the text stays in the plain form.
            push_escaped_short(self.out, text);
        } else {
            for_each_escaped_str(text, |piece| self.push(piece));
        }
    }

    /// Appends an integer's digits.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push_digits(&mut self, digits: &str) {
        if self.has_room_for(digits.len()) {
            push_digits(self.out, digits);
        } else {
            self.push(digits);
        }
    }

    /// Appends escaped text.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn push(&mut self, escaped: &str) {
        if let Some(digest) = self.digest {
            digest.update(escaped.as_bytes());
        } else if self.out.len() - self.start + escaped.len() <= self.limit {
            self.out.push_str(escaped);
        } else {
            *self.digest = Some(spill(self.out, self.start, escaped));
        }
    }

    /// Appends one ASCII character: a separator.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn push_ascii(&mut self, ascii: char) {
        if self.digest.is_none() && self.out.len() - self.start < self.limit {
            self.out.push(ascii);
        } else {
            self.push(ascii.encode_utf8(&mut [0; 4]));
        }
    }

    /// Whether `len` more bytes keep the criteria in the plain form.
    #[inline]
    fn has_room_for(&self, len: usize) -> bool {
        self.digest.is_none() && self.out.len() - self.start + len <= self.limit
    }
}

/// The criteria from `start` in `out` and then `escaped` outgrew the plain
/// form: they are taken out and continue in SHA-256. (A function of the
/// segment's parts, not a method: a segment whose address is never taken
/// stays in registers, and so do the constant names written into it.)
#[cold]
#[inline(never)]
fn spill(out: &mut String, start: usize, escaped: &str) -> Sha256 {
    let mut digest = Sha256::new();
    digest.update(out.as_bytes().get(start..).unwrap_or_default());
    digest.update(escaped.as_bytes());
    out.truncate(start);
    digest
}

/// Appends the summary of the criteria hashed into `digest`: `c_` and the
/// first [`SUMMARY_HEX_DIGITS`] hex digits of their SHA-256.
#[cold]
#[inline(never)]
pub(crate) fn summarize(out: &mut String, digest: Sha256) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str(SUMMARY_PREFIX);
    for byte in digest.finalize().iter().take(SUMMARY_HEX_DIGITS / 2) {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
}
