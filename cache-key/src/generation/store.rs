//! Where counters live: [`GenerationStore`] (blocking) and
//! [`AsyncGenerationStore`] (futures), each with the typed entry points.

use std::future::Future;
use std::sync::Arc;

use super::counters::{Counter, Counters, GenerationSum, with_counters_of};
use super::draft::KeyDraft;
use super::error::GenerationError;
use super::scope::GenerationScope;
use crate::cache_key::CacheKey;
use crate::key::Key;
use crate::tag::{TagClock, Tags};

/// Where generation counters live: in the process
/// ([`MemoryGenerations`](super::MemoryGenerations)), in Redis
/// (`RedisGenerations`, feature `redis`), or a store of your own.
///
/// A store implements two operations on [`Counter`]s, and every typed entry
/// point (`key_for`, `invalidate`, ...) comes with the trait. An
/// implementation must keep one promise: **a counter never goes back**, not
/// even when the store drops it and makes it again. Reading a counter it
/// cannot read is an error, never 0 or a remembered value.
///
/// The typed methods are also available on `&S`, `Box<S>` and `Arc<S>`, so a
/// store can be shared as `Arc<dyn GenerationStore + Send + Sync>`.
pub trait GenerationStore {
    /// Adds the current value of each of `counters` to `sum`, in order. A
    /// counter the store has never seen is added at its starting value (which
    /// the store chooses, never below a value it could have had before).
    fn read(&self, counters: Counters<'_>, sum: &mut GenerationSum) -> Result<(), GenerationError>;

    /// Increases `counter`. When this returns `Ok`, every read that starts
    /// afterwards sees the increase. A tag's counter
    /// ([`CounterKind::Tag`](super::CounterKind::Tag)) is set to the store's
    /// tag clock, or one more than it was if that is more (see
    /// [`tag_clock`](Self::tag_clock)).
    fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError>;

    /// The tag clock now, for `counters`' tenant and namespace: read before
    /// the origin of an answer whose tags are known only from the answer.
    /// The answer stays valid while every tag's counter is below it
    /// ([`tags_unchanged`](Self::tags_unchanged)): a bump made after this
    /// read sets its tag's counter at or above it. A store that keeps no
    /// such clock answers [`GenerationErrorKind::Unsupported`]
    /// (the default), and caches then store no value-tagged answer.
    ///
    /// [`GenerationErrorKind::Unsupported`]: super::GenerationErrorKind::Unsupported
    fn tag_clock(&self, counters: Counters<'_>) -> Result<TagClock, GenerationError> {
        let _ = counters;
        Err(GenerationError::unsupported("a tag clock"))
    }

    /// Whether no tag of `tags` (a value's, in `counters`' tenant and
    /// namespace) was bumped since `since` ([`tag_clock`](Self::tag_clock)):
    /// every tag's counter below it. A tag's counter lost or never made
    /// counts as bumped now, never as old.
    fn tags_unchanged(
        &self,
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
    ) -> Result<bool, GenerationError> {
        let _ = (counters, tags, since);
        Err(GenerationError::unsupported("a tag clock"))
    }

    /// `query`'s generation: the sum of its counters.
    #[inline]
    fn generation_for<Q: CacheKey + ?Sized>(&self, query: &Q) -> Result<u64, GenerationError>
    where
        Self: Sized,
    {
        with_counters_of(query, |counters| {
            let mut sum = GenerationSum::default();
            self.read(counters, &mut sum)?;
            sum.finish(&counters)
        })
    }

    /// `query`'s key at its current generation. Read it **before** asking the
    /// origin, and store the answer under it (see [the race
    /// rule](crate::generation#the-race-rule)).
    #[inline]
    fn key_for<Q: CacheKey + ?Sized>(&self, query: &Q) -> Result<Key, GenerationError>
    where
        Self: Sized,
    {
        let mut out = String::new();
        self.write_key_for(query, &mut out)?;
        Ok(Key::from_canonical(out))
    }

    /// Appends `query`'s key at its current generation to `out` and returns
    /// the generation; on error `out` is left unchanged.
    #[inline]
    fn write_key_for<Q: CacheKey + ?Sized>(
        &self,
        query: &Q,
        out: &mut String,
    ) -> Result<u64, GenerationError>
    where
        Self: Sized,
    {
        let mut draft = KeyDraft::write(query, out)?;
        let counters = draft.counters(out);
        let mut sum = GenerationSum::default();
        let generation = self
            .read(counters, &mut sum)
            .and_then(|()| sum.finish(&counters));
        let named = generation.and_then(|generation| {
            draft.set_generation(out, generation)?;
            Ok(generation)
        });
        match named {
            Ok(_) => draft.finish(out),
            Err(_) => draft.discard(out),
        }
        named
    }

    /// Bumps `scope`'s counter: every key in the scope becomes unreachable.
    fn invalidate(&self, scope: &GenerationScope) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.bump(scope.counter())
    }

    /// Invalidates every key of `Q`'s namespace.
    fn invalidate_namespace<Q: CacheKey + ?Sized>(&self) -> Result<(), GenerationError>
    where
        Self: Sized,
    {
        self.invalidate(&GenerationScope::namespace::<Q>())
    }
}

/// Forwards every method of [`GenerationStore`] through a pointer.
macro_rules! forward_generation_store {
    ($($pointer:ty),*) => {$(
        impl<S: GenerationStore + ?Sized> GenerationStore for $pointer {
            fn read(
                &self,
                counters: Counters<'_>,
                sum: &mut GenerationSum,
            ) -> Result<(), GenerationError> {
                (**self).read(counters, sum)
            }

            fn bump(&self, counter: Counter<'_>) -> Result<(), GenerationError> {
                (**self).bump(counter)
            }

            fn tag_clock(&self, counters: Counters<'_>) -> Result<TagClock, GenerationError> {
                (**self).tag_clock(counters)
            }

            fn tags_unchanged(
                &self,
                counters: Counters<'_>,
                tags: &Tags,
                since: TagClock,
            ) -> Result<bool, GenerationError> {
                (**self).tags_unchanged(counters, tags, since)
            }
        }
    )*};
}

forward_generation_store!(&S, Box<S>, Arc<S>);

/// A [`GenerationStore`] whose reads and bumps are futures, for async code
/// (an axum handler, say) that must not block its runtime's threads on a
/// network round trip.
///
/// It keeps the same promise: **a counter never goes back**, and a counter
/// it cannot read is an error, never 0. Implemented by
/// [`MemoryGenerations`](super::MemoryGenerations) (in process: its futures
/// are ready at once) and by `AsyncRedisGenerations` (feature `redis-async`:
/// counters in Redis, shared by every process).
pub trait AsyncGenerationStore: Sync {
    /// Adds the current value of each of `counters` to `sum`, in order, as
    /// [`GenerationStore::read`] does.
    fn read<'a>(
        &'a self,
        counters: Counters<'a>,
        sum: &'a mut GenerationSum,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a;

    /// Increases `counter`, as [`GenerationStore::bump`] does.
    fn bump<'a>(
        &'a self,
        counter: Counter<'a>,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a;

    /// The tag clock now, as [`GenerationStore::tag_clock`] says.
    fn tag_clock<'a>(
        &'a self,
        counters: Counters<'a>,
    ) -> impl Future<Output = Result<TagClock, GenerationError>> + Send + 'a {
        let _ = counters;
        std::future::ready(Err(GenerationError::unsupported("a tag clock")))
    }

    /// Whether no tag of `tags` was bumped since `since`, as
    /// [`GenerationStore::tags_unchanged`] says.
    fn tags_unchanged<'a>(
        &'a self,
        counters: Counters<'a>,
        tags: &'a Tags,
        since: TagClock,
    ) -> impl Future<Output = Result<bool, GenerationError>> + Send + 'a {
        let _ = (counters, tags, since);
        std::future::ready(Err(GenerationError::unsupported("a tag clock")))
    }

    /// `query`'s generation: the sum of its counters.
    fn generation_for<'a, Q>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<u64, GenerationError>> + Send + 'a
    where
        Self: Sized,
        Q: CacheKey + Sync + ?Sized,
    {
        async move {
            let mut out = String::new();
            self.write_key_for(query, &mut out).await
        }
    }

    /// `query`'s key at its current generation, read **before** asking the
    /// origin (see [`GenerationStore::key_for`]).
    fn key_for<'a, Q>(
        &'a self,
        query: &'a Q,
    ) -> impl Future<Output = Result<Key, GenerationError>> + Send + 'a
    where
        Self: Sized,
        Q: CacheKey + Sync + ?Sized,
    {
        async move {
            let mut out = String::new();
            self.write_key_for(query, &mut out).await?;
            Ok(Key::from_canonical(out))
        }
    }

    /// Appends `query`'s key at its current generation to `out` and returns
    /// the generation; on error `out` is left unchanged.
    fn write_key_for<'a, Q>(
        &'a self,
        query: &'a Q,
        out: &'a mut String,
    ) -> impl Future<Output = Result<u64, GenerationError>> + Send + 'a
    where
        Self: Sized,
        Q: CacheKey + Sync + ?Sized,
    {
        async move {
            let mut draft = KeyDraft::write(query, out)?;
            let mut sum = GenerationSum::default();
            let read = self.read(draft.counters(out), &mut sum).await;
            let generation = read.and_then(|()| sum.finish(&draft.counters(out)));
            let named = generation.and_then(|generation| {
                draft.set_generation(out, generation)?;
                Ok(generation)
            });
            match named {
                Ok(_) => draft.finish(out),
                Err(_) => draft.discard(out),
            }
            named
        }
    }

    /// Bumps `scope`'s counter: every key in the scope becomes unreachable.
    fn invalidate<'a>(
        &'a self,
        scope: &'a GenerationScope,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a
    where
        Self: Sized,
    {
        self.bump(scope.counter())
    }

    /// Invalidates every key of `Q`'s namespace.
    fn invalidate_namespace<Q: CacheKey + ?Sized>(
        &self,
    ) -> impl Future<Output = Result<(), GenerationError>> + Send + '_
    where
        Self: Sized,
    {
        let scope = GenerationScope::namespace::<Q>();
        async move { self.invalidate(&scope).await }
    }
}

/// Forwards every method of [`AsyncGenerationStore`] through a pointer.
macro_rules! forward_async_generation_store {
    ($($pointer:ty where $($bound:path),*;)*) => {$(
        impl<S: AsyncGenerationStore $(+ $bound)* + ?Sized> AsyncGenerationStore for $pointer {
            fn read<'a>(
                &'a self,
                counters: Counters<'a>,
                sum: &'a mut GenerationSum,
            ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
                (**self).read(counters, sum)
            }

            fn bump<'a>(
                &'a self,
                counter: Counter<'a>,
            ) -> impl Future<Output = Result<(), GenerationError>> + Send + 'a {
                (**self).bump(counter)
            }

            fn tag_clock<'a>(
                &'a self,
                counters: Counters<'a>,
            ) -> impl Future<Output = Result<TagClock, GenerationError>> + Send + 'a {
                (**self).tag_clock(counters)
            }

            fn tags_unchanged<'a>(
                &'a self,
                counters: Counters<'a>,
                tags: &'a Tags,
                since: TagClock,
            ) -> impl Future<Output = Result<bool, GenerationError>> + Send + 'a {
                (**self).tags_unchanged(counters, tags, since)
            }
        }
    )*};
}

forward_async_generation_store! {
    &S where ;
    Arc<S> where Send;
}
