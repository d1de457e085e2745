//! The criteria segment of a key: written into a 48-byte stack buffer, and
//! streamed into SHA-256 as soon as it outgrows it.
//!
//! The format keeps criteria of at most [`MAX_PLAIN_CRITERIA`] bytes as they are
//! and replaces longer ones with `c_` and 16 hex digits of their SHA-256. Since
//! every byte passes through here once, in order, the summary never needs the
//! criteria as a string: no allocation, whatever their length.

use sha2::{Digest, Sha256};

use crate::canonical::CanonicalWriter;
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
        let bytes = escaped.as_bytes();
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
            None => {
                let mut digest = Sha256::new();
                digest.update(&self.buf[..self.len]);
                digest.update(bytes);
                self.digest = Some(digest);
            }
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

    /// The finished segment: the criteria themselves, or their summary.
    pub(crate) fn finish(self) -> FinishedTail {
        let mut finished = FinishedTail {
            buf: self.buf,
            len: self.len,
        };
        if let Some(digest) = self.digest {
            let hash = digest.finalize();
            const HEX: &[u8; 16] = b"0123456789abcdef";
            finished.buf[..2].copy_from_slice(b"c_");
            for (i, byte) in hash.iter().take(8).enumerate() {
                finished.buf[2 + 2 * i] = HEX[usize::from(byte >> 4)];
                finished.buf[3 + 2 * i] = HEX[usize::from(byte & 0xf)];
            }
            finished.len = SUMMARY_LEN;
        }
        finished
    }
}

/// A criteria segment ready to be copied into a key.
pub(crate) struct FinishedTail {
    buf: [u8; MAX_PLAIN_CRITERIA],
    len: usize,
}

impl FinishedTail {
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
        tail.finish().as_str().to_owned()
    }

    #[test]
    fn forty_eight_bytes_stay_plain_and_forty_nine_are_summarized() {
        let plain = format!("q={}", "x".repeat(46));
        assert_eq!(tail_of(&[&plain]), plain);
        let long = format!("q={}", "x".repeat(47));
        assert_eq!(tail_of(&[&long]), "c_48ea661053f0f610");
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
