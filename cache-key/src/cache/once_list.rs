//! [`OnceList`]: an append-only list whose readers take no lock, for the
//! few things a cache makes on first use and finds again on every call (the
//! moka cache of each value type, the counters of each query type).

use std::sync::OnceLock;

/// How many items one chunk holds; the list grows a chunk at a time.
const CHUNK: usize = 8;

/// An append-only list: items are set once and never change, so a reader
/// needs no lock.
///
/// Every caller scans in the same order and claims the first empty place
/// with `OnceLock::get_or_init`; an item never changes once set, so two
/// callers after one item always meet at the same place.
pub(crate) struct OnceList<T> {
    first: Chunk<T>,
}

struct Chunk<T> {
    items: [OnceLock<T>; CHUNK],
    next: OnceLock<Box<Chunk<T>>>,
}

impl<T> Default for Chunk<T> {
    fn default() -> Self {
        Chunk {
            items: std::array::from_fn(|_| OnceLock::new()),
            next: OnceLock::new(),
        }
    }
}

impl<T> Default for OnceList<T> {
    fn default() -> Self {
        OnceList {
            first: Chunk::default(),
        }
    }
}

impl<T> OnceList<T> {
    /// The first item `is` accepts, made by `make` (and then accepted by
    /// `is`) if there is none.
    pub(crate) fn find(&self, is: impl Fn(&T) -> bool, make: impl Fn() -> T) -> &T {
        let mut chunk = &self.first;
        loop {
            for cell in &chunk.items {
                let item = match cell.get() {
                    Some(item) => item,
                    None => cell.get_or_init(&make),
                };
                if is(item) {
                    return item;
                }
            }
            chunk = chunk.next.get_or_init(Box::default);
        }
    }

    /// Every item made so far.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        let mut chunk = Some(&self.first);
        std::iter::from_fn(move || {
            let current = chunk?;
            chunk = current.next.get().map(|next| &**next);
            Some(current)
        })
        .flat_map(|chunk| chunk.items.iter().filter_map(|cell| cell.get()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_made_once_and_found_again_past_the_first_chunk() {
        let list = OnceList::default();
        for n in 0..20u32 {
            assert_eq!(*list.find(|&item| item == n, || n), n);
        }
        assert_eq!(list.iter().count(), 20);
        assert_eq!(*list.find(|&item| item == 13, || 99), 13);
        assert_eq!(list.iter().count(), 20, "found, not made again");
    }
}
