//! The criteria segment of a key: written into a 48-byte stack buffer, and
//! streamed into SHA-256 as soon as it outgrows it.
//!
//! The format keeps criteria of at most [`MAX_PLAIN_CRITERIA`] bytes as they are
//! and replaces longer ones with `c_` and 16 hex digits of their SHA-256. Since
//! every byte passes through here once, in order, the summary never needs the
//! criteria as a string: no allocation, whatever their length.

use sha2::{Digest, Sha256};

use crate::canonical::CanonicalWriter;
use crate::escape;
use crate::value::CriterionValue;

/// Criteria up to this many bytes are written as they are; longer ones are summarized.
pub const MAX_PLAIN_CRITERIA: usize = 48;

/// The length of a summarized tail: `c_` and 16 hex digits.
pub const SUMMARY_LEN: usize = 18;

/// The criteria segment being written.
#[doc(hidden)]
pub struct Tail {
    buf: [u8; MAX_PLAIN_CRITERIA],
    len: usize,
    /// Set once the criteria are longer than the buffer: everything so far was fed to it.
    digest: Option<Sha256>,
}

impl Default for Tail {
    fn default() -> Self {
        Self::new()
    }
}

impl Tail {
    /// An empty criteria segment.
    #[inline]
    pub fn new() -> Self {
        Tail {
            buf: [0; MAX_PLAIN_CRITERIA],
            len: 0,
            digest: None,
        }
    }

    /// Whether nothing has been written yet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.digest.is_none()
    }

    /// Appends the criterion `escaped_name=value`, or nothing when the value's
    /// canonical string is empty. Derived keys call this in name order.
    #[inline]
    pub fn criterion<V: CriterionValue + ?Sized>(&mut self, escaped_name: &str, value: &V) {
        value.write_canonical(&mut CanonicalWriter::criterion(self, escaped_name));
    }

    /// Appends already escaped text.
    #[inline]
    pub(crate) fn push(&mut self, escaped: &str) {
        self.push_bytes(escaped.as_bytes());
    }

    /// Appends already escaped bytes (ASCII).
    #[inline]
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) {
        if let Some(digest) = &mut self.digest {
            digest.update(bytes);
            return;
        }
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dest) => {
                dest.copy_from_slice(bytes);
                self.len = end;
            }
            None => self.overflow(bytes),
        }
    }

    /// The criteria outgrew the buffer: from now on everything goes to SHA-256.
    #[cold]
    #[inline(never)]
    fn overflow(&mut self, bytes: &[u8]) {
        let mut digest = Sha256::new();
        digest.update(&self.buf[..self.len]);
        digest.update(bytes);
        self.digest = Some(digest);
    }

    /// Appends the escaped form of `text`, byte by byte into the buffer while
    /// it has room.
    #[inline]
    pub(crate) fn push_escaped(&mut self, text: &str) {
        let bytes = text.as_bytes();
        if self.digest.is_none() {
            let mut len = self.len;
            for (i, &byte) in bytes.iter().enumerate() {
                if escape::unreserved(byte) {
                    if let Some(slot) = self.buf.get_mut(len) {
                        *slot = byte;
                        len += 1;
                        continue;
                    }
                } else if let Some(dest) = self.buf.get_mut(len..len + 3) {
                    dest.copy_from_slice(escape::triplet(byte));
                    len += 3;
                    continue;
                }
                // No room for this byte: the rest goes through the digest.
                self.len = len;
                escape::for_each_piece(&bytes[i..], |piece| self.push_bytes(piece));
                return;
            }
            self.len = len;
        } else {
            escape::for_each_piece(bytes, |piece| self.push_bytes(piece));
        }
    }

    /// Starts a `name=value` pair, with the `&` that separates it from the previous one.
    #[inline]
    pub(crate) fn begin_pair<'s>(&mut self, escaped_name: impl IntoIterator<Item = &'s str>) {
        if !self.is_empty() {
            self.push("&");
        }
        for piece in escaped_name {
            self.push(piece);
        }
        self.push("=");
    }

    /// Starts a `name=value` pair whose name is escaped here.
    #[inline]
    pub(crate) fn begin_escaped_pair(&mut self, name: &str) {
        if !self.is_empty() {
            self.push("&");
        }
        self.push_escaped(name);
        self.push("=");
    }

    /// Finishes the segment: replaces criteria longer than the buffer with
    /// their summary, in place. Read it with [`as_str`](Self::as_str).
    #[inline]
    pub(crate) fn finish(&mut self) {
        if let Some(digest) = self.digest.take() {
            self.summarize(digest);
        }
    }

    #[cold]
    #[inline(never)]
    fn summarize(&mut self, digest: Sha256) {
        let hash = digest.finalize();
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.buf[..2].copy_from_slice(b"c_");
        for (i, byte) in hash.iter().take(8).enumerate() {
            self.buf[2 + 2 * i] = HEX[usize::from(byte >> 4)];
            self.buf[3 + 2 * i] = HEX[usize::from(byte & 0xf)];
        }
        self.len = SUMMARY_LEN;
    }

    /// The finished segment (after [`finish`](Self::finish)): the criteria
    /// themselves, or their summary.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        // The buffer holds whole escaped (ASCII) pieces or hex digits.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(pieces: &[&str]) -> String {
        let mut tail = Tail::new();
        for piece in pieces {
            tail.push(piece);
        }
        tail.finish();
        tail.as_str().to_owned()
    }

    #[test]
    fn forty_eight_bytes_stay_plain_and_forty_nine_are_summarized() {
        let plain = format!("q={}", "x".repeat(46));
        assert_eq!(tail_of(&[&plain]), plain);
        let long = format!("q={}", "x".repeat(47));
        assert_eq!(tail_of(&[&long]), "c_48ea661053f0f610");
    }

    #[test]
    fn escaped_text_overflowing_the_buffer_is_summarized_like_text_escaped_before() {
        for prefix in 0..=48 {
            let raw = format!(
                "{}Oğuz Atay: {}",
                "x".repeat(prefix),
                "y".repeat(prefix % 7)
            );
            let mut escaped = String::new();
            crate::escape::push_escaped(&mut escaped, &raw);
            let mut tail = Tail::new();
            tail.push("q=");
            tail.push_escaped(&raw);
            tail.finish();
            assert_eq!(tail.as_str(), tail_of(&["q=", &escaped]), "{raw}");
        }
    }

    #[test]
    fn the_summary_does_not_depend_on_how_the_text_was_split() {
        let long = format!("q={}", "x".repeat(47));
        let (a, b) = long.split_at(30);
        assert_eq!(tail_of(&[a, b]), tail_of(&[&long]));
        let (a, b) = long.split_at(48);
        assert_eq!(tail_of(&[a, b]), tail_of(&[&long]));
    }
}
