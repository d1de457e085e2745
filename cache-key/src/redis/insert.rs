//! [`Insert`]: storing a value as a query's entry at the generation its
//! counters give now.

use std::convert::Infallible;
use std::sync::Arc;

use serde::Serialize;

use super::batch::Exchange;
use super::batch::{Batch, Sent};
use super::counters::{CounterExchange, CounterSource, keep_tags};
use super::entry::{Entry, Lifetime, Stored, Validated};
use super::read::LocalCache;
use super::tags::ClockRead;
use crate::cache::value_tags;
use crate::cache::{BackendError, CacheError, CachedQuery};
use crate::generation::{GenerationError, GenerationSum, KeyDraft};
use crate::key::Key;
use crate::tag::{DEFAULT_MAX_TAGS, TagClock, TagStamp};

/// Reads the query's counters (and, for an answer tagged from its value,
/// the tag clock, in the same round trip), then `SET`s its entry.
pub(crate) struct Insert<'q, 'v, 'l, Q: CachedQuery + ?Sized> {
    query: &'q Q,
    value: &'v Q::Value,
    out: String,
    draft: KeyDraft,
    counters: CounterExchange,
    lifetime: Lifetime,
    local: LocalCache<'l, Q::Value>,
    /// The entry's `SET`, once the counters are read, and the commands
    /// that keep its tag counters as long as it (with a tag lifetime).
    set: Option<(::redis::Cmd, Vec<::redis::Cmd>)>,
    keeps_tags: bool,
    /// Whether the `SET` is in the batch in flight.
    set_sent: bool,
    /// When the insert began, on the invalidations' clock.
    since: u64,
    /// The tag clock's read, for `Q::VALUE_TAGS`, and what it gave.
    clock: Option<ClockRead>,
    tag_clock: Option<TagClock>,
    max_tags: usize,
}

impl<'q, 'v, 'l, Q> Insert<'q, 'v, 'l, Q>
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize,
{
    pub(crate) fn new(
        query: &'q Q,
        value: &'v Q::Value,
        lifetime: Lifetime,
        source: &CounterSource,
        local: LocalCache<'l, Q::Value>,
    ) -> Result<Self, GenerationError> {
        // Room for most keys, so that writing one does not grow it.
        let mut out = String::with_capacity(128);
        let draft = KeyDraft::write(query, &mut out)?;
        let since = source.invalidations.now();
        let counters = CounterExchange::read(draft.counters(&out), source);
        let clock = Q::VALUE_TAGS.then(|| ClockRead::new(draft.counters(&out), source.topology));
        Ok(Insert {
            query,
            value,
            out,
            draft,
            counters,
            lifetime,
            local,
            set: None,
            keeps_tags: source.tag_lifetime.is_some(),
            set_sent: false,
            since,
            clock,
            tag_clock: None,
            max_tags: DEFAULT_MAX_TAGS,
        })
    }

    pub(crate) fn with_max_tags(mut self, max_tags: usize) -> Self {
        self.max_tags = max_tags;
        self
    }

    /// The value's tags and the clock read before the insert, if `Q`'s
    /// answers carry tags: an error for tags that cannot be taken.
    fn stamp(&self) -> Result<Option<Arc<TagStamp>>, CacheError<Infallible>> {
        let Some(since) = self.tag_clock else {
            return Ok(None);
        };
        let tags = value_tags::<Q>(self.value, self.max_tags).map_err(CacheError::Unstorable)?;
        Ok((!tags.is_empty()).then(|| Arc::new(TagStamp { tags, since })))
    }

    /// The entry's `SET` at the generation the counters gave.
    fn make_set(&mut self) -> Result<(::redis::Cmd, Vec<::redis::Cmd>), CacheError<Infallible>> {
        let mut sum = GenerationSum::default();
        self.counters.add_to(&mut sum);
        let generation = sum.finish(&self.draft.counters(&self.out))?;
        // The in-process level's key: the draft's, before its generation is set.
        let zero = self.local.map(|_| self.draft.key(&self.out).to_owned());
        self.draft.set_generation(&mut self.out, generation)?;
        let (key, query_tags) = (self.draft.key(&self.out), self.draft.tags_text(&self.out));
        let entry = Entry::new(self.query, key, query_tags, generation, None)?;
        let tags = self.stamp()?;
        let (set, fresh_until) = entry
            .set(self.value, self.lifetime, tags.as_deref())
            .map_err(|error| CacheError::Unstorable(Box::new(error)))?;
        let keeps = match self.keeps_tags {
            true => {
                let value_tags = tags.as_deref().map(|stamp| &stamp.tags);
                keep_tags(
                    self.draft.counters(&self.out),
                    value_tags,
                    self.lifetime.kept(),
                )
            }
            false => Vec::new(),
        };
        if let (Some(local), Some(zero)) = (self.local, zero) {
            let stored = Stored {
                value: self.value.clone(),
                fresh_until,
                tags,
            };
            let validated = Validated {
                generation,
                since: self.since,
            };
            local.insert(Key::from_canonical(zero), validated, stored);
        }
        Ok((set, keeps))
    }
}

impl<Q> Exchange for Insert<'_, '_, '_, Q>
where
    Q: CachedQuery + ?Sized,
    Q::Value: Serialize,
{
    type Output = Result<(), CacheError<Infallible>>;

    fn send(&mut self, batch: &mut Batch) {
        match self.set.take() {
            Some((set, keeps)) => {
                // The `SET` first: its reply is the insert's.
                batch.push(set);
                for keep in keeps {
                    batch.push(keep);
                }
                self.set_sent = true;
            }
            None => {
                CounterExchange::send(&mut self.counters, batch);
                if let Some(clock) = &mut self.clock
                    && self.tag_clock.is_none()
                {
                    clock.send(batch);
                }
            }
        }
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        if self.set_sent {
            let stored =
                replies.and_then(|mut replies| replies.remove(0).map_err(BackendError::refused));
            return Some(stored.map(drop).map_err(CacheError::Backend));
        }
        let judged = replies
            .map_err(GenerationError::store)
            .and_then(|mut replies| {
                CounterExchange::receive(&mut self.counters, &mut replies)?;
                if let Some(clock) = &mut self.clock
                    && self.tag_clock.is_none()
                {
                    self.tag_clock = Some(clock.receive(&mut replies)?);
                }
                Ok(())
            });
        if let Err(error) = judged {
            return Some(Err(error.into()));
        }
        if !self.counters.is_done() {
            return None;
        }
        // A value that cannot be stored, or a key too long at this
        // generation, ends the insert before anything is sent.
        match self.make_set() {
            Ok(set) => {
                self.set = Some(set);
                None
            }
            Err(error) => Some(Err(error)),
        }
    }
}
