//! The envelope's `query`: the SHA-256 (hex) of a query's readable key,
//! remembered per thread for the keys it last read. A hit checks its entry
//! against it on every read, and the digest is a pure function of the key;
//! without SHA instructions in the CPU (or under valgrind) hashing a short
//! key costs about a sixth of a whole hit's client work.

use std::cell::RefCell;

use sha2::{Digest, Sha256};

/// Slots per thread (a power of two). A key goes to one slot, by a hash of
/// its bytes; two keys sharing a slot take turns.
const SLOTS: usize = 64;

/// Longer keys are hashed every time: a slot holds its key's bytes.
const LONGEST_KEPT: usize = 256;

/// The 64 hex digits of the SHA-256 of `readable_key`.
pub(crate) fn query_digest(readable_key: &str) -> [u8; 64] {
    let key = readable_key.as_bytes();
    if key.len() > LONGEST_KEPT {
        return computed(key);
    }
    REMEMBERED.with(|remembered| {
        // Borrowed only here, and nothing here reenters it.
        let Ok(mut slots) = remembered.try_borrow_mut() else {
            return computed(key);
        };
        if slots.is_empty() {
            slots.resize_with(SLOTS, Slot::default);
        }
        let slot = &mut slots[slot_of(key)];
        // The whole key is compared: a digest is only ever its own key's.
        if slot.key != key {
            slot.key.clear();
            slot.key.extend_from_slice(key);
            slot.digest = computed(key);
        }
        slot.digest
    })
}

thread_local! {
    static REMEMBERED: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// A key and its digest (an empty key's until one is stored: `computed`
/// of nothing, so that an empty slot is right too).
struct Slot {
    key: Vec<u8>,
    digest: [u8; 64],
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            key: Vec::new(),
            digest: computed(b""),
        }
    }
}

fn computed(key: &[u8]) -> [u8; 64] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(key);
    let mut hex = [0; 64];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX[usize::from(byte >> 4)];
        pair[1] = HEX[usize::from(byte & 0xf)];
    }
    hex
}

/// Which slot `key` goes to: a multiply-rotate hash over its 8-byte words.
/// Anyone who makes keys share a slot only makes their reads hash again.
fn slot_of(key: &[u8]) -> usize {
    let mut hash = key.len() as u64;
    for word in key.chunks(8) {
        let mut bytes = [0; 8];
        bytes[..word.len()].copy_from_slice(word);
        hash =
            (hash.rotate_left(5) ^ u64::from_le_bytes(bytes)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    (hash >> (64 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(key: &str) -> String {
        Sha256::digest(key.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// Keys that share slots, long keys, the empty key and one key again,
    /// read in an order that makes them replace each other: each digest
    /// is its own key's.
    #[test]
    fn every_digest_is_its_own_keys_whichever_slot_it_shares() {
        let mut keys: Vec<String> = (0..500)
            .map(|i| format!("library:s1:g{i}:tbranch-{}:search:title=Dune", i % 7))
            .collect();
        keys.push(String::new());
        keys.push("x".repeat(LONGEST_KEPT));
        keys.push("x".repeat(LONGEST_KEPT + 1));
        let by_slot = |slot| {
            keys.iter()
                .filter(|key| slot_of(key.as_bytes()) == slot)
                .count()
        };
        assert!((0..SLOTS).any(|slot| by_slot(slot) > 1), "keys share slots");
        for round in 0..3 {
            for key in keys.iter().rev().skip(round).step_by(round + 1) {
                assert_eq!(
                    query_digest(key).as_slice(),
                    hex_of(key).as_bytes(),
                    "{key:?}"
                );
            }
        }
    }

    #[test]
    fn every_slot_is_in_range() {
        for length in 0..=40 {
            let key = vec![0xa5; length];
            assert!(slot_of(&key) < SLOTS);
        }
    }
}
