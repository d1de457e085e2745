//! A keyed read: a query's counters and its entry in one round trip, and
//! the [`Exchange`] every step of the protocol is driven through.
//!
//! The read sends the counters together with a `GET` of the key at the
//! generation this process last saw for the query's scope, or the counters
//! alone when the in-process level holds a fresh value at that generation
//! (and nothing, [`tracked_local`], when the counters are tracked and the
//! value is here at their generation). A value here past its freshness is
//! asked of Redis all the same, where another process may have stored a
//! fresher one, and answers only when Redis has none. When the counters still
//! sum to that generation, the value came with them (or was here): one
//! round trip. When they moved (a bump, a first read, a wrong guess), the
//! in-process level, then a second `GET`, at the generation just read.
//! Either way the value served is the entry at the generation the counters
//! give, read after they were: the strict promise of [the race
//! rule](crate::generation#the-race-rule) holds, whatever the guess.
//!
//! A value with tags is served only once their counters are read, after
//! the read began ([`TagCheck`]). For a query type with value tags, the
//! first round trip also reads the counters of the tags last found under
//! the key; they stand for the check when the value found holds exactly
//! those tags (one round trip in the steady state), and are dropped
//! otherwise (the check then takes a round trip of its own).

use std::cell::RefCell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use ::redis::{RedisResult, Value};
use foldhash::fast::FixedState;
use serde::de::DeserializeOwned;

use super::batch::{Batch, Exchange, Sent};
use super::counters::{CounterExchange, CounterSource};
use super::entry::{Entry, Found, Stored, Validated};
use super::tags::{TagCheck, tracked_unchanged};
use super::tracking::Tracked;
use crate::cache::{BackendError, RejectReason};
use crate::cache::{CacheError, CachedQuery};
use crate::generation::{Counters, GenerationError, GenerationSum, KeyDraft, with_thread_buffer};
use crate::key::Key;
use crate::tag::{TagClock, TagStamp, Tags};

impl Exchange for CounterExchange {
    type Output = Result<(), GenerationError>;

    fn send(&mut self, batch: &mut Batch) {
        CounterExchange::send(self, batch);
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        let judged = replies
            .map_err(GenerationError::store)
            .and_then(|mut replies| CounterExchange::receive(self, &mut replies));
        match judged {
            Err(error) => Some(Err(error)),
            Ok(()) if self.is_done() => Some(Ok(())),
            Ok(()) => None,
        }
    }
}

/// The generation last read for each scope of one cache, in a fixed table:
/// a scope sharing a slot with another only costs a wrong guess. And the
/// tags of the value last found under each key of a query type with value
/// tags, in a fixed table too (made at its first use), so that a read sends
/// their counters with the entry's `GET`: a wrong or missing guess only
/// costs the round trip it would have saved.
#[derive(Debug)]
pub(crate) struct Guesses {
    slots: Box<[AtomicU64]>,
    hasher: FixedState,
    tags: OnceLock<Box<[RwLock<Option<TagGuess>>]>>,
}

/// The tags last found under the key whose hash is `key`.
#[derive(Debug)]
struct TagGuess {
    key: u64,
    tags: Arc<Tags>,
}

/// Slots of the table of tags guessed by key: a few KiB, and the tags.
/// Each is read-locked by every read of its key, written when they change.
const TAG_GUESSES: usize = 1024;

impl Default for Guesses {
    fn default() -> Self {
        Guesses {
            slots: (0..4096).map(|_| AtomicU64::new(0)).collect(),
            hasher: FixedState::default(),
            tags: OnceLock::new(),
        }
    }
}

impl Guesses {
    /// The slot of `counters`' scope: the generation last read for it.
    pub(crate) fn slot(&self, counters: &Counters<'_>) -> &AtomicU64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(counters.namespace().as_bytes());
        hasher.write_u8(0xff);
        hasher.write(counters.tenant().unwrap_or_default().as_bytes());
        hasher.write_u8(0xff);
        hasher.write(counters.operation().as_bytes());
        let i = (hasher.finish() as usize) & (self.slots.len() - 1);
        &self.slots[i]
    }

    /// A hash of `key` (a query's key at generation 0), never 0.
    fn key_hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key).max(1)
    }

    fn tag_slot(&self, key: u64) -> &RwLock<Option<TagGuess>> {
        let table = self
            .tags
            .get_or_init(|| (0..TAG_GUESSES).map(|_| RwLock::new(None)).collect());
        &table[(key as usize) & (TAG_GUESSES - 1)]
    }

    /// The tags last found under the key hashed to `key`, if remembered.
    fn tags_of(&self, key: u64) -> Option<Arc<Tags>> {
        let slot = self
            .tag_slot(key)
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        slot.as_ref()
            .filter(|guess| guess.key == key)
            .map(|guess| Arc::clone(&guess.tags))
    }

    /// Remembers `tags` (none: forgets) as found under the key hashed to
    /// `key`.
    fn remember_tags(&self, key: u64, tags: Option<&Tags>) {
        let mut slot = self
            .tag_slot(key)
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        match tags {
            Some(tags) if !tags.is_empty() => {
                *slot = Some(TagGuess {
                    key,
                    tags: Arc::new(tags.clone()),
                });
            }
            _ => {
                if slot.as_ref().is_some_and(|guess| guess.key == key) {
                    *slot = None;
                }
            }
        }
    }
}

/// What a keyed read found, its freshness judged once, when the value was
/// found: whoever acts on it never judges it again, so a value that expires
/// meanwhile cannot turn a hit into a miss with no entry to store under.
#[derive(Debug)]
pub(crate) enum Read<V> {
    /// A fresh value; `local` when the in-process level had it, and the
    /// entry when it was named (a value from Redis, or a read
    /// [naming its entry](KeyedRead::naming_entry)).
    Hit {
        stored: Stored<V>,
        local: bool,
        entry: Option<Entry>,
    },
    /// No fresh value: the entry at the generation read, where a load
    /// stores its answer, and what stood there instead.
    Miss { entry: Entry, missed: Missed<V> },
}

/// What a miss found under its key.
#[derive(Debug)]
pub(crate) enum Missed<V> {
    Absent,
    /// A value past its freshness (kept for the fail-safe).
    Stale(Stored<V>),
    Rejected(RejectReason),
}

/// The in-process level's cache of one value type, if the cache has one.
pub(crate) type LocalCache<'l, V> = Option<&'l dyn LocalLevel<V>>;

/// What a read needs of the in-process level (`redis/local.rs`), which
/// finds a query's value by its key at generation 0 (`key`) and serves it
/// only at the generation it was kept at.
pub(crate) trait LocalLevel<V>: Sync {
    fn get(&self, key: &str, generation: u64) -> Option<Stored<V>>;
    /// `key`'s entry whatever its generation, and the generation it was
    /// kept at, since when: what an outage may serve, once judged.
    fn kept(&self, key: &str) -> Option<(Validated, Stored<V>)>;
    /// `key`'s entry if it is fresh and its generation is the tracked
    /// counters' sum: as confirmed at `epoch` (read before this call)
    /// already, or as `current` gives it now (`None` too when a tag of the
    /// entry's was bumped since its fill), the entry then marked confirmed
    /// at `epoch`.
    fn tracked(
        &self,
        key: &str,
        epoch: u64,
        current: &mut dyn FnMut(Option<&TagStamp>) -> Option<u64>,
    ) -> Option<Stored<V>>;
    fn insert(&self, key: Key, validated: Validated, stored: Stored<V>);
}

thread_local! {
    /// Where [`tracked_local`] writes its keys, reused by the thread's reads.
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

/// `query`'s entry in the in-process level when its counters are all
/// tracked: no exchange, nothing sent. `None` leaves the read to a
/// [`KeyedRead`]: a counter not kept, the subscription not alive, no fresh entry
/// at their generation, or a key that cannot be named (which it reports).
pub(crate) fn tracked_local<Q: CachedQuery + ?Sized>(
    query: &Q,
    tracked: &Tracked,
    local: &dyn LocalLevel<Q::Value>,
) -> Option<Stored<Q::Value>> {
    // Not alive: nothing kept is used, so nothing is looked up either.
    if !tracked.is_alive() {
        return None;
    }
    // Read before the entry: a change after this load raises the epoch, so
    // an entry confirmed at it is confirmed before any such change.
    let epoch = tracked.epoch();
    let look = |out: &mut String| {
        out.clear();
        let draft = KeyDraft::write(query, out).ok()?;
        let out: &str = out;
        local.tracked(draft.key(out), epoch, &mut |tags| {
            let generation = tracked.generation(&draft.counters(out))?;
            match tags {
                Some(stamp) => tracked_unchanged(tracked, draft.counters(out), stamp)?,
                None => true,
            }
            .then_some(generation)
        })
    };
    with_thread_buffer(&KEY, look)
}

/// Reading `query`'s entry at its current generation: from the in-process
/// level when it holds the key, otherwise from Redis (and then kept in
/// process).
pub(crate) struct KeyedRead<'q, 'l, Q: CachedQuery + ?Sized> {
    query: &'q Q,
    out: String,
    draft: KeyDraft,
    counters: CounterExchange,
    /// Where the counters are: a value's tags are read there too.
    source: &'l CounterSource,
    guesses: &'l Guesses,
    /// The generation last read for the query's scope (its slot in
    /// `guesses`): the guess sent, and where the generation read is kept.
    guess: &'l AtomicU64,
    local: LocalCache<'l, Q::Value>,
    /// The key at generation 0, by which the in-process level (if any)
    /// finds the value.
    zero: Option<Box<str>>,
    /// The `GET` in the batch in flight: where, and at which generation.
    get: Option<(usize, u64)>,
    /// A value found before the counters were known, at that generation:
    /// Redis's reply, or the in-process level's fresh entry.
    early: Option<(u64, Early<Q::Value>)>,
    /// The in-process level's entry past its freshness, at that generation:
    /// Redis may hold a fresher one, so it is asked, and this is the read's
    /// answer (for the fail-safe) only when Redis has none.
    stale: Option<(u64, Stored<Q::Value>)>,
    /// Name the entry even when the value is fresh (an eager refresh
    /// stores under it).
    name_entry: bool,
    /// When the read began, on the invalidations' clock: before its
    /// counters were sent.
    since: u64,
    /// What the read found, held while its value's tags are checked.
    checking: Option<Box<Checking<Q::Value>>>,
    /// For a query type with value tags: the hash of the key at generation
    /// 0, by which the tags last found under it are remembered (0 without).
    tag_key: u64,
    /// Those tags, and their counters, read with the counters and the
    /// entry's `GET` in the first round trip: when the value found holds
    /// exactly these tags, its check needs no round trip of its own.
    guessed: Option<Box<(Arc<Tags>, TagCheck)>>,
}

/// A read's outcome whose value has tags, and the check of their counters
/// that decides whether it stands.
struct Checking<V> {
    check: TagCheck,
    read: Read<V>,
    generation: u64,
}

enum Early<V> {
    Reply(RedisResult<Value>),
    /// Judged fresh when found: a hit, whenever it is served.
    Local(Stored<V>),
}

impl<'q, 'l, Q: CachedQuery + ?Sized> KeyedRead<'q, 'l, Q> {
    pub(crate) fn new(
        query: &'q Q,
        source: &'l CounterSource,
        guesses: &'l Guesses,
        local: LocalCache<'l, Q::Value>,
    ) -> Result<Self, GenerationError> {
        // Room for most keys, so that writing one does not grow it.
        let mut out = String::with_capacity(128);
        let draft = KeyDraft::write(query, &mut out)?;
        let since = source.invalidations.now();
        let counters = CounterExchange::read(draft.counters(&out), source);
        let guess = guesses.slot(&draft.counters(&out));
        let zero = local.map(|_| draft.key(&out).into());
        let tag_key = match Q::VALUE_TAGS {
            true => guesses.key_hash(draft.key(&out)),
            false => 0,
        };
        Ok(KeyedRead {
            query,
            out,
            draft,
            counters,
            source,
            guesses,
            guess,
            local,
            zero,
            get: None,
            early: None,
            stale: None,
            name_entry: false,
            since,
            checking: None,
            tag_key,
            guessed: None,
        })
    }

    /// With `name_entry`, the read names its entry even for a fresh value.
    pub(crate) fn naming_entry(mut self, name_entry: bool) -> Self {
        self.name_entry = name_entry;
        self
    }

    /// The generation, once the counters are read.
    fn generation(&self) -> Result<u64, GenerationError> {
        let mut sum = GenerationSum::default();
        self.counters.add_to(&mut sum);
        sum.finish(&self.draft.counters(&self.out))
    }

    /// The in-process level's entry at `generation`, if it has a fresh one
    /// (a stale one is kept aside).
    fn local_at(&mut self, generation: u64) -> Option<Stored<Q::Value>> {
        let stored = self.local?.get(self.zero.as_deref()?, generation)?;
        if stored.is_fresh() {
            return Some(stored);
        }
        self.stale = Some((generation, stored));
        None
    }

    /// Looks for the entry at `generation`: in process, or with a `GET` in
    /// `batch` (the draft then left at that generation).
    fn look(&mut self, batch: &mut Batch, generation: u64) -> Result<(), GenerationError> {
        if let Some(stored) = self.local_at(generation) {
            self.early = Some((generation, Early::Local(stored)));
            return Ok(());
        }
        self.draft.set_generation(&mut self.out, generation)?;
        let at = super::entry::get(batch, self.draft.key(&self.out));
        self.get = Some((at, generation));
        Ok(())
    }

    /// Sends the counters of the tags last found under this key, if any
    /// are remembered.
    fn guess_tags(&mut self, batch: &mut Batch) {
        let Some(tags) = self.guesses.tags_of(self.tag_key) else {
            return;
        };
        // The start is the value's, known once it is found.
        let unknown = TagClock {
            tenant: 0,
            global: 0,
        };
        let mut check = TagCheck::new(self.draft.counters(&self.out), &tags, unknown, self.source);
        if !check.is_done() {
            check.send(batch);
        }
        self.guessed = Some(Box::new((tags, check)));
    }

    fn entry(&self, generation: u64) -> Result<Entry, GenerationError> {
        Entry::new(
            self.query,
            self.draft.key(&self.out),
            self.draft.tags_text(&self.out),
            generation,
            self.zero.as_deref().map(|zero| (zero, self.since)),
        )
    }
}

impl<Q> Exchange for KeyedRead<'_, '_, Q>
where
    Q: CachedQuery + ?Sized,
    Q::Value: DeserializeOwned,
{
    type Output = Result<Read<Q::Value>, CacheError<std::convert::Infallible>>;

    fn send(&mut self, batch: &mut Batch) {
        if let Some(checking) = &mut self.checking {
            checking.check.send(batch);
            return;
        }
        if !self.counters.is_done() {
            let first = self.early.is_none() && self.get.is_none();
            CounterExchange::send(&mut self.counters, batch);
            let guess = self.guess.load(Ordering::Relaxed);
            // A guess too long for `max_len` is no guess: no `GET` then.
            if first && guess != 0 && self.look(batch, guess).is_err() {
                self.get = None;
            }
            if first && self.tag_key != 0 {
                self.guess_tags(batch);
            }
            return;
        }
        // The counters are known and the value at their sum is not (a key
        // too long at that generation fails in `receive`).
        if let Ok(generation) = self.generation() {
            let _ = self.look(batch, generation);
        }
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        if let Some(mut checking) = self.checking.take() {
            let judged = replies
                .map_err(GenerationError::store)
                .and_then(|mut replies| checking.check.receive(&mut replies));
            if let Err(error) = judged {
                return Some(Err(error.into()));
            }
            if !checking.check.is_done() {
                self.checking = Some(checking);
                return None;
            }
            return Some(self.checked(*checking));
        }
        let mut replies = match replies {
            Ok(replies) => replies,
            // Counters unreadable: the key cannot be named.
            Err(error) if !self.counters.is_done() => {
                return Some(Err(GenerationError::store(error).into()));
            }
            Err(error) => return Some(Err(CacheError::Backend(error))),
        };
        if !self.counters.is_done()
            && let Err(error) = CounterExchange::receive(&mut self.counters, &mut replies)
        {
            return Some(Err(error.into()));
        }
        // A guess is sent in the first round trip alone, and kept only when
        // read in full there: it is never worth a round trip of its own.
        if let Some(guessed) = &mut self.guessed
            && !guessed.1.is_done()
            && (guessed.1.receive(&mut replies).is_err() || !guessed.1.is_done())
        {
            self.guessed = None;
        }
        if let Some((at, generation)) = self.get.take() {
            let reply = std::mem::replace(&mut replies[at], Ok(Value::Nil));
            self.early = Some((generation, Early::Reply(reply)));
        }
        if !self.counters.is_done() {
            return None;
        }
        let generation = match self.generation() {
            Ok(generation) => generation,
            Err(error) => return Some(Err(error.into())),
        };
        self.guess.store(generation, Ordering::Relaxed);
        match self.early.take() {
            Some((read_at, early)) if read_at == generation => {
                let found = self.found(generation, early);
                self.check_tags(generation, found)
            }
            // The counters moved since the guess (or no guess was sent):
            // look again at their sum, in process first.
            _ => match self.local_at(generation) {
                Some(stored) => {
                    let found = self.found(generation, Early::Local(stored));
                    self.check_tags(generation, found)
                }
                // Named at that generation now, so that a key too long for
                // it fails here rather than leaving `send` nothing to send.
                None => (self.draft.set_generation(&mut self.out, generation))
                    .err()
                    .map(|error| Err(error.into())),
            },
        }
    }
}

impl<Q> KeyedRead<'_, '_, Q>
where
    Q: CachedQuery + ?Sized,
    Q::Value: DeserializeOwned,
{
    /// `found` as it stands if its value has no tags; otherwise held while
    /// their counters are read (`None`: a next step), unless they are all
    /// known in process.
    fn check_tags(
        &mut self,
        generation: u64,
        found: <Self as Exchange>::Output,
    ) -> Option<<Self as Exchange>::Output> {
        let read = match found {
            Ok(read) => read,
            Err(error) => return Some(Err(error)),
        };
        let stamp = match &read {
            Read::Hit { stored, .. }
            | Read::Miss {
                missed: Missed::Stale(stored),
                ..
            } => stored.tags.clone(),
            Read::Miss { .. } => None,
        };
        if self.tag_key != 0 && !matches!(read, Read::Miss { .. } if stamp.is_none()) {
            let guessed = self.guessed.as_deref().map(|(tags, _)| &**tags);
            let found = stamp.as_ref().map(|stamp| &stamp.tags);
            if guessed != found {
                self.guesses.remember_tags(self.tag_key, found);
            }
        }
        let Some(stamp) = stamp else {
            return Some(Ok(read));
        };
        // Read with the entry, after the read began, as a check would.
        if let Some(guessed) = self.guessed.take()
            && *guessed.0 == stamp.tags
        {
            let (_, check) = *guessed;
            let checking = Checking {
                check: check.since(stamp.since),
                read,
                generation,
            };
            return Some(self.checked(checking));
        }
        let check = TagCheck::of(self.draft.counters(&self.out), &stamp, self.source);
        let checking = Checking {
            check,
            read,
            generation,
        };
        if checking.check.is_done() {
            return Some(self.checked(checking));
        }
        self.checking = Some(Box::new(checking));
        None
    }

    /// A held outcome once its tags' counters are read: as it was if no
    /// tag was bumped since its value's fill began, else a miss with
    /// nothing to fall back on (the fail-safe never serves such a value).
    fn checked(
        &mut self,
        checking: Checking<Q::Value>,
    ) -> Result<Read<Q::Value>, CacheError<std::convert::Infallible>> {
        if checking.check.unchanged() {
            return Ok(checking.read);
        }
        let missed = match checking.check.failed_on_new_counters() {
            true => Missed::Rejected(RejectReason::NewTagCounter),
            false => Missed::Absent,
        };
        let entry = match checking.read {
            Read::Hit {
                entry: Some(entry), ..
            }
            | Read::Miss { entry, .. } => entry,
            Read::Hit { entry: None, .. } => self.entry(checking.generation)?,
        };
        Ok(Read::Miss { entry, missed })
    }

    /// The read's outcome from what was found at `generation`, the current
    /// one, its freshness judged here once; a value from Redis is kept in
    /// process too.
    fn found(
        &mut self,
        generation: u64,
        early: Early<Q::Value>,
    ) -> Result<Read<Q::Value>, CacheError<std::convert::Infallible>> {
        self.draft.set_generation(&mut self.out, generation)?;
        let reply = match early {
            Early::Local(stored) => {
                let entry = match self.name_entry {
                    true => Some(self.entry(generation)?),
                    false => None,
                };
                return Ok(Read::Hit {
                    stored,
                    local: true,
                    entry,
                });
            }
            Early::Reply(reply) => reply,
        };
        let entry = self.entry(generation)?;
        let found = entry.judge(reply).map_err(BackendError::refused)?;
        let stale_here = self.stale.take().filter(|(at, _)| *at == generation);
        let missed = match found {
            Found::Value(stored) => {
                if let (Some(local), Some((zero, validated))) = (self.local, entry.local()) {
                    let key = Key::from_canonical(zero.to_owned());
                    local.insert(key, validated, stored.clone());
                }
                if stored.is_fresh() {
                    return Ok(Read::Hit {
                        stored,
                        local: false,
                        entry: Some(entry),
                    });
                }
                Missed::Stale(stored)
            }
            // Redis has none: the stale value here is the fail-safe's.
            Found::Absent => match stale_here {
                Some((_, stored)) => Missed::Stale(stored),
                None => Missed::Absent,
            },
            Found::Rejected(reason) => Missed::Rejected(reason),
        };
        Ok(Read::Miss { entry, missed })
    }
}
