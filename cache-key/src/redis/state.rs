//! [`CacheState`]: what a typed Redis cache is made of whatever its driver,
//! and the exchanges of its reads and writes.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use std::convert::Infallible;

use super::counters::{Epochs, Topology};
use super::entry::Found;
use super::flight::Flights;
use super::insert::Insert;
use super::lock::LoadLock;
use super::read::{Guesses, KeyedRead, Read};
use crate::cache::{CacheError, CachedQuery, StatsCounters, Ttls};
use crate::generation::GenerationError;

/// The parts of a typed Redis cache that its sync and async drivers share.
pub(crate) struct CacheState {
    pub(crate) topology: Topology,
    pub(crate) epochs: Arc<Epochs>,
    pub(crate) guesses: Arc<Guesses>,
    pub(crate) flights: Flights,
    pub(crate) stats: StatsCounters,
    pub(crate) ttls: Ttls,
    pub(crate) lock: Option<LoadLock>,
}

impl CacheState {
    pub(crate) fn new(topology: Topology, epochs: Arc<Epochs>) -> Self {
        CacheState {
            topology,
            epochs,
            guesses: Arc::default(),
            flights: Flights::default(),
            stats: StatsCounters::default(),
            ttls: Ttls::default(),
            lock: None,
        }
    }

    /// A read of `query`'s entry at its current generation.
    pub(crate) fn keyed_read<'q, Q: CachedQuery + ?Sized>(
        &self,
        query: &'q Q,
    ) -> Result<KeyedRead<'q, Q>, GenerationError> {
        KeyedRead::new(
            query,
            self.topology,
            self.epochs.clone(),
            self.guesses.clone(),
        )
        .inspect_err(|_| self.stats.error())
    }

    /// A write of `value` as `query`'s entry at its current generation.
    pub(crate) fn insert<'q, 'v, Q>(
        &self,
        query: &'q Q,
        value: &'v Q::Value,
    ) -> Result<Insert<'q, 'v, Q>, GenerationError>
    where
        Q: CachedQuery + ?Sized,
        Q::Value: Serialize + DeserializeOwned,
    {
        Insert::new(
            query,
            value,
            self.ttls.get::<Q>(),
            self.topology,
            self.epochs.clone(),
        )
        .inspect_err(|_| self.stats.error())
    }

    /// Counts what a read found, and hands its value on.
    pub(crate) fn count_read<V>(
        &self,
        read: Result<Read<V>, CacheError<Infallible>>,
    ) -> Result<Option<V>, CacheError<Infallible>> {
        let stats = &self.stats;
        match read {
            Ok(Read { found, .. }) => Ok(match found {
                Found::Value(value) => {
                    stats.hit();
                    Some(value)
                }
                Found::Absent => {
                    stats.miss();
                    None
                }
                Found::Rejected(reason) => {
                    stats.reject(reason);
                    stats.miss();
                    None
                }
            }),
            Err(error) => {
                stats.error();
                Err(error)
            }
        }
    }
}
