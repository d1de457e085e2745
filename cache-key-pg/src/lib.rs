//! Invalidation from PostgreSQL's commit log: a committed row change bumps
//! the cache-key scopes it ends, with no invalidation code on any write
//! path (the admin tool, the batch job, the migration, another service).
//!
//! [`ChangeMap`] says, per table, which scopes a row ends (its entity's
//! tag, its tenant's scopes), with the typed scopes the derives write;
//! [`ChangeLog`] follows a logical replication slot (`pgoutput`) and, for
//! each committed transaction, bumps those scopes in a generation store
//! (`AsyncRedisGenerations`, or any [`AsyncGenerationStore`]), then
//! confirms the transaction's end to PostgreSQL:
//!
//! - **at least once**: a position is confirmed only after the bumps of
//!   every change before it returned; killed at any point, the consumer
//!   gets the unconfirmed transactions again and bumps them again (a miss
//!   more, never a stale read). A rolled-back transaction is never sent.
//! - **none lost**: a slot missing or lost (`max_slot_wal_keep_size`) is
//!   made anew and every declared namespace bumped before it is read (made
//!   as `<slot>_owed`, renamed by a copy once the bumps landed, so that a
//!   consumer killed in between leaves the bumps owed to the next, in
//!   PostgreSQL); a bump that fails
//!   (Redis down) is tried again while the slot keeps the WAL; a truncate
//!   ends the declared namespaces; a change the map cannot read (a missing
//!   column, a replica identity too narrow for an UPDATE's old row) stops
//!   the consumer with the table and column, never a silent skip.
//! - **read-your-writes** on request: [`Applied::wait_for`] an LSN read
//!   after a commit (`pg_current_wal_lsn()`).
//!
//! Built on `pgwire-replication`: pure tokio, the position reported to
//! PostgreSQL only when the consumer says (`update_applied_lsn`), no TLS
//! stack unless feature `tls` asks for one, and `pgoutput` left to the
//! caller, who needs five messages of it (decoded here, `pgoutput.rs`).
//! `pg_walstream` decodes all of `pgoutput` (protocol 1 to 4) but brings a
//! TLS backend by default (aws-lc-rs, or libpq in its other backend),
//! weight a cache invalidator does not use; supabase `etl` is a whole
//! pipeline (sources, destinations, its own state store) and is not
//! published on crates.io.
//!
//! [`AsyncGenerationStore`]: cache_key::generation::AsyncGenerationStore

mod consumer;
mod error;
mod map;
mod pgoutput;

pub use consumer::{Applied, ChangeLog, Options, Stats};
pub use error::{Error, ErrorKind};
pub use map::{Bumps, ChangeMap, Image, MapError, Row, RowError, RowErrorKind};
pub use pgoutput::Malformed;
pub use pgwire_replication::{Lsn, ReplicationConfig, TlsConfig};
