//! [`ChangeLog`]: follows a logical replication slot and bumps, for each
//! committed transaction, the scopes its row changes end, then confirms the
//! transaction's end to PostgreSQL. Nothing is confirmed before its bumps
//! returned, so a consumer stopped at any point, a lost connection or a
//! Redis outage costs bumps made twice (a miss more), never one missed.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cache_key::GenerationScope;
use cache_key::generation::AsyncGenerationStore;
use futures_util::stream::{self, StreamExt as _};
use pgwire_replication::{
    Lsn, PgWireError, ReplicationClient, ReplicationConfig, ReplicationEvent,
};
use tokio::sync::watch;

use crate::error::{Error, ErrorKind};
use crate::map::{Bumps, ChangeMap, Image, Row, RowScopes};
use crate::pgoutput::{self, Message, Old, Relation};

/// How the consumer retries and bounds its work.
#[derive(Debug, Clone)]
pub struct Options {
    /// The first pause after a failed connection or bump; doubled on each
    /// failure in a row, up to `retry_max`.
    pub retry_min: Duration,
    /// The longest pause between attempts.
    pub retry_max: Duration,
    /// Distinct scopes listed per transaction before its tables' changes are
    /// taken as "anything may have changed" and the declared namespaces
    /// bumped instead (a bulk UPDATE of millions of rows).
    pub max_scopes_per_transaction: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry_min: Duration::from_millis(100),
            retry_max: Duration::from_secs(2),
            max_scopes_per_transaction: 10_000,
        }
    }
}

/// What the consumer did, counted since it was made.
#[derive(Debug, Default)]
pub struct Stats {
    transactions: AtomicU64,
    bumps: AtomicU64,
    failed_bumps: AtomicU64,
    connections: AtomicU64,
    slots_made: AtomicU64,
    namespace_bumps: AtomicU64,
}

impl Stats {
    /// Transactions whose bumps returned and whose end was confirmed.
    pub fn transactions(&self) -> u64 {
        self.transactions.load(Ordering::Relaxed)
    }
    /// Scopes bumped, namespaces included: each once per batch of
    /// transactions read together (a burst of commits).
    pub fn bumps(&self) -> u64 {
        self.bumps.load(Ordering::Relaxed)
    }
    /// Bumps that failed and were tried again.
    pub fn failed_bumps(&self) -> u64 {
        self.failed_bumps.load(Ordering::Relaxed)
    }
    /// Replication sessions opened (the first, and each after a failure).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
    /// Times the slot was made, because it was missing or lost; each was
    /// followed by a bump of every declared namespace.
    pub fn slots_made(&self) -> u64 {
        self.slots_made.load(Ordering::Relaxed)
    }
    /// Times every declared namespace was bumped (slot made, a truncate, a
    /// transaction past `max_scopes_per_transaction`).
    pub fn namespace_bumps(&self) -> u64 {
        self.namespace_bumps.load(Ordering::Relaxed)
    }
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The position up to which every committed change's bumps returned, for
/// read-your-writes: a writer reads `pg_current_wal_lsn()` after its commit
/// and [`wait_for`](Self::wait_for)s it before its next read.
///
/// From another process, the slot's `confirmed_flush_lsn`
/// (`pg_replication_slots`) is such a position too: the consumer confirms
/// a position only after the bumps before it returned, and reports it
/// within the config's `status_interval`, so it trails this one by that.
#[derive(Debug, Clone)]
pub struct Applied {
    receiver: watch::Receiver<Lsn>,
}

impl Applied {
    /// The position now.
    pub fn lsn(&self) -> Lsn {
        *self.receiver.borrow()
    }

    /// Returns once every change committed at or before `lsn` has had its
    /// scopes bumped. Cancel-safe: it only watches.
    ///
    /// # Errors
    ///
    /// The [`ChangeLog`] was dropped before reaching `lsn`.
    pub async fn wait_for(&mut self, lsn: Lsn) -> Result<Lsn, Error> {
        match self.receiver.wait_for(|applied| *applied >= lsn).await {
            Ok(applied) => Ok(*applied),
            Err(_) => Err(Error::new(ErrorKind::Stopped, None)),
        }
    }
}

/// A consumer of one logical replication slot (`pgoutput`), bumping the
/// scopes of [`ChangeMap`] in a generation store.
///
/// The slot is made when missing (or when PostgreSQL lost it, past
/// `max_slot_wal_keep_size`), and every declared namespace is bumped before
/// it is used: changes from before the new slot's start may never be sent.
/// The slot is first made as `<slot>_owed`, the bumps made, and only then
/// copied to its name (`pg_copy_logical_replication_slot`, the same start)
/// and the staging one dropped: a consumer killed, dropped or failed
/// before the bumps landed leaves `<slot>_owed`, never `<slot>`, and the
/// next one bumps the namespaces before it reads. The publication is made
/// when missing, over the mapped tables; an existing one must publish all
/// of them.
pub struct ChangeLog {
    config: ReplicationConfig,
    map: Arc<ChangeMap>,
    options: Options,
    applied: watch::Sender<Lsn>,
    stats: Arc<Stats>,
}

/// What the staging slot of `slot` is named: a slot whose start the
/// namespaces' bumps have not yet covered.
fn staging(slot: &str) -> String {
    format!("{slot}{STAGING}")
}

const STAGING: &str = "_owed";

/// The longest name PostgreSQL keeps for a slot or a publication.
const MAX_NAME: usize = 63;

impl std::fmt::Debug for ChangeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeLog")
            .field("slot", &self.config.slot)
            .field("map", &self.map)
            .field("applied", &*self.applied.borrow())
            .finish_non_exhaustive()
    }
}

/// A slot or publication name: what PostgreSQL accepts for a slot, checked
/// here because the replication protocol takes it unquoted.
fn check_name(what: &'static str, name: &str, max: usize) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    match ok {
        true => Ok(()),
        false => Err(Error::new(
            ErrorKind::Config(format!(
                "{what} `{name}` must be 1 to {max} lowercase letters, digits or `_`"
            )),
            None,
        )),
    }
}

/// Whether slot `name` exists and can be read: a slot PostgreSQL lost is
/// dropped (`false`), one decoding with another plugin is an error.
async fn usable_slot(client: &mut ReplicationClient, name: &str) -> Result<bool, Error> {
    let rows = client
        .simple_query(&format!(
            "SELECT wal_status, plugin FROM pg_replication_slots WHERE slot_name = '{name}'"
        ))
        .await
        .map_err(Error::postgres)?;
    let Some(row) = rows.first() else {
        return Ok(false);
    };
    let text = |i: usize| {
        row.get(i)
            .and_then(Option::as_ref)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let (wal_status, plugin) = (text(0), text(1));
    if wal_status == "lost" {
        drop_slot(client, name).await?;
        return Ok(false);
    }
    if plugin != "pgoutput" {
        return Err(Error::new(
            ErrorKind::Config(format!(
                "slot `{name}` decodes with `{plugin}`, not `pgoutput`: drop it or name another"
            )),
            None,
        ));
    }
    Ok(true)
}

async fn drop_slot(client: &mut ReplicationClient, name: &str) -> Result<(), Error> {
    client
        .simple_query(&format!("SELECT pg_drop_replication_slot('{name}')"))
        .await
        .map_err(Error::postgres)?;
    Ok(())
}

impl ChangeLog {
    /// A consumer of `config`'s slot and publication (its start position is
    /// always the slot's confirmed one), bumping `map`'s scopes.
    ///
    /// # Errors
    ///
    /// A slot or publication name PostgreSQL would refuse, more than one
    /// publication, a map of no table or no namespace.
    pub fn new(
        mut config: ReplicationConfig,
        map: ChangeMap,
        options: Options,
    ) -> Result<Self, Error> {
        // Room for the staging slot's name (`<slot>_owed`).
        check_name("the slot", &config.slot, MAX_NAME - STAGING.len())?;
        let [publication] = config.publication.names() else {
            return Err(Error::new(
                ErrorKind::Config("the consumer reads one publication".into()),
                None,
            ));
        };
        check_name("the publication", publication, MAX_NAME)?;
        if map.tables().next().is_none() || map.namespaces().is_empty() {
            return Err(Error::new(
                ErrorKind::Config(
                    "the map needs a table and a namespace (`ChangeMap::namespace`), bumped when changes may have been missed".into(),
                ),
                None,
            ));
        }
        // From the slot's confirmed position, in text: what the decoder reads.
        config.start_lsn = Lsn(0);
        config.ack_lsn = None;
        config.stop_at_lsn = None;
        config.binary = false;
        Ok(ChangeLog {
            config,
            map: Arc::new(map),
            options,
            applied: watch::channel(Lsn(0)).0,
            stats: Arc::default(),
        })
    }

    /// The applied position, for read-your-writes.
    pub fn applied(&self) -> Applied {
        Applied {
            receiver: self.applied.subscribe(),
        }
    }

    /// What the consumer did so far.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Follows the slot until an error the consumer cannot get past:
    /// connections lost, PostgreSQL restarted or the slot dropped are
    /// retried (pausing `retry_min` to `retry_max`), and so are bumps
    /// until they return; a change the map cannot read is returned, after
    /// every declared namespace was bumped, its transaction unconfirmed (the
    /// slot keeps it, and it comes again on the next run).
    ///
    /// Cancel-safe: dropped at any point, nothing unapplied was confirmed
    /// (the next `run` reads it again), and a slot it made whose namespaces
    /// it had not bumped yet has them bumped by the next `run` of this
    /// `ChangeLog`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Row`], [`ErrorKind::Unmapped`], [`ErrorKind::Malformed`],
    /// [`ErrorKind::Publication`].
    pub async fn run<S: AsyncGenerationStore>(&self, store: &S) -> Result<Infallible, Error> {
        let mut pause = self.options.retry_min;
        loop {
            let mut session = Session {
                log: self,
                store,
                relations: HashMap::new(),
                transaction: None,
                committed: Committed::default(),
                bumped: false,
            };
            let error = session.follow().await;
            if !error.is_transient() {
                if error.may_have_missed() {
                    self.bump_namespaces(store).await;
                }
                return Err(error);
            }
            if session.bumped {
                pause = self.options.retry_min;
            }
            #[cfg(feature = "tracing")]
            tracing::warn!(%error, ?pause, "change log: session ended, opening another");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(self.options.retry_max);
        }
    }

    /// Bumps `scope` until it returns.
    async fn bump<S: AsyncGenerationStore>(&self, store: &S, scope: &GenerationScope) {
        let mut pause = self.options.retry_min;
        loop {
            match store.invalidate(scope).await {
                Ok(()) => {
                    count(&self.stats.bumps);
                    return;
                }
                Err(_error) => {
                    count(&self.stats.failed_bumps);
                    #[cfg(feature = "tracing")]
                    tracing::warn!(error = %_error, ?pause, "change log: a bump failed, trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(self.options.retry_max);
                }
            }
        }
    }

    async fn bump_namespaces<S: AsyncGenerationStore>(&self, store: &S) {
        for scope in self.map.namespaces() {
            self.bump(store, scope).await;
        }
        count(&self.stats.namespace_bumps);
    }

    fn advance(&self, lsn: Lsn) {
        self.applied.send_if_modified(|applied| {
            let raised = lsn > *applied;
            if raised {
                *applied = lsn;
            }
            raised
        });
    }
}

/// The scopes of the transaction being read.
#[derive(Default)]
struct Transaction {
    scopes: Vec<GenerationScope>,
    seen: HashSet<GenerationScope>,
    /// Past the bound, or a truncate: the declared namespaces instead.
    everything: bool,
}

/// Committed transactions read and not yet applied: their scopes, each
/// once, and the end of the last.
#[derive(Default)]
struct Committed {
    scopes: Transaction,
    end: Option<Lsn>,
    transactions: u64,
}

impl Committed {
    fn add(&mut self, transaction: Transaction, end: Lsn) {
        if transaction.everything {
            self.scopes.everything = true;
        }
        if !self.scopes.everything {
            for scope in transaction.scopes {
                if !self.scopes.seen.contains(&scope) {
                    self.scopes.seen.insert(scope.clone());
                    self.scopes.scopes.push(scope);
                }
            }
        }
        self.end = Some(end);
        self.transactions += 1;
    }
}

/// Distinct scopes of committed transactions applied together at most.
const BATCH: usize = 1_024;

/// Bumps in flight at once.
const CONCURRENT: usize = 64;

/// A row image of a change: which, the new tuple, the old one.
type Tuples<'m> = (Image, Option<&'m [pgoutput::Value]>, Option<&'m Old>);

/// One replication session.
struct Session<'a, S> {
    log: &'a ChangeLog,
    store: &'a S,
    relations: HashMap<u32, Relation>,
    transaction: Option<Transaction>,
    committed: Committed,
    /// Whether a transaction was applied in this session.
    bumped: bool,
}

impl<S: AsyncGenerationStore> Session<'_, S> {
    /// Runs one session until it ends; always an error.
    async fn follow(&mut self) -> Error {
        match self.stream().await {
            Ok(never) => match never {},
            Err(error) => error,
        }
    }

    async fn stream(&mut self) -> Result<Infallible, Error> {
        let log = self.log;
        count(&log.stats.connections);
        let mut client = ReplicationClient::connect_gated(log.config.clone())
            .await
            .map_err(Error::postgres)?;
        self.prepare(&mut client).await?;
        client.start().await.map_err(Error::postgres)?;
        loop {
            let next = match self.committed.end {
                // Bumps to send: first the events already here, so that a
                // burst of commits is applied together.
                Some(_) => match tokio::time::timeout(Duration::ZERO, client.recv()).await {
                    Ok(next) => next,
                    Err(_) => {
                        self.apply(&client).await;
                        continue;
                    }
                },
                None => client.recv().await,
            };
            let Some(event) = next.map_err(Error::postgres)? else {
                return Err(Error::new(ErrorKind::Ended, None));
            };
            match event {
                ReplicationEvent::Begin { .. } => self.transaction = Some(Transaction::default()),
                ReplicationEvent::XLogData { data, .. } => {
                    if let Err(error) = self.change(&data) {
                        // The transactions before it are whole: applied and
                        // confirmed, so that the next run starts at this one.
                        self.apply(&client).await;
                        return Err(error);
                    }
                }
                ReplicationEvent::Commit { end_lsn, .. } => {
                    let transaction = self.transaction.take().unwrap_or_default();
                    self.committed.add(transaction, end_lsn);
                    if self.committed.scopes.scopes.len() >= BATCH {
                        self.apply(&client).await;
                    }
                }
                // Every transaction that ends before `wal_end` was sent before
                // this message; none is open here, so once those read are
                // applied, all of them are.
                ReplicationEvent::KeepAlive { wal_end, .. } if self.transaction.is_none() => {
                    self.apply(&client).await;
                    client.update_applied_lsn(wal_end);
                    log.advance(wal_end);
                }
                ReplicationEvent::KeepAlive { .. }
                | ReplicationEvent::Message { .. }
                | ReplicationEvent::StoppedAt { .. } => {}
            }
        }
    }

    /// Bumps the scopes of the committed transactions read, each once and
    /// [`CONCURRENT`] at a time, then confirms their end: only once every
    /// bump returned.
    async fn apply(&mut self, client: &ReplicationClient) {
        let log = self.log;
        let committed = std::mem::take(&mut self.committed);
        let Some(end) = committed.end else {
            return;
        };
        if committed.scopes.everything {
            log.bump_namespaces(self.store).await;
        } else {
            stream::iter(&committed.scopes.scopes)
                .for_each_concurrent(CONCURRENT, |scope| log.bump(self.store, scope))
                .await;
        }
        client.update_applied_lsn(end);
        log.advance(end);
        log.stats
            .transactions
            .fetch_add(committed.transactions, Ordering::Relaxed);
        self.bumped = true;
    }

    /// Checks the slot (made when missing or lost, through its staging
    /// slot, the namespaces bumped in between) and the publication (made
    /// when missing).
    async fn prepare(&mut self, client: &mut ReplicationClient) -> Result<(), Error> {
        let log = self.log;
        let slot = &log.config.slot;
        let publication = &log.config.publication.names()[0];
        let staged = staging(slot);
        let make = !usable_slot(client, slot).await?;

        let tables: Vec<&str> = log.map.tables().collect();
        let published = client
            .simple_query(&format!(
                "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = '{publication}'"
            ))
            .await
            .map_err(Error::postgres)?;
        let exists = client
            .simple_query(&format!(
                "SELECT 1 FROM pg_publication WHERE pubname = '{publication}'"
            ))
            .await
            .map_err(Error::postgres)?;
        if exists.is_empty() {
            let list: Vec<String> = tables
                .iter()
                .map(|table| {
                    let (schema, name) = table.split_once('.').unwrap_or(("public", table));
                    format!("\"{schema}\".\"{name}\"")
                })
                .collect();
            client
                .simple_query(&format!(
                    "CREATE PUBLICATION {publication} FOR TABLE {}",
                    list.join(", ")
                ))
                .await
                .map_err(Error::postgres)?;
        } else {
            let published: HashSet<String> = published
                .iter()
                .filter_map(|row| row.first().and_then(Option::as_ref))
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect();
            if let Some(missing) = tables.iter().find(|table| !published.contains(**table)) {
                return Err(Error::new(
                    ErrorKind::Publication(format!(
                        "publication `{publication}` does not publish `{missing}`: its changes would never \
                         reach the consumer; run `ALTER PUBLICATION {publication} ADD TABLE {missing}`"
                    )),
                    None,
                ));
            }
        }

        // A staging slot left by a consumer stopped before its bumps
        // landed is used (its start is what they must cover), unless lost.
        let usable = usable_slot(client, &staged).await?;
        if make {
            if !usable {
                client
                    .simple_query(&format!(
                        "SELECT pg_create_logical_replication_slot('{staged}', 'pgoutput')"
                    ))
                    .await
                    .map_err(Error::postgres)?;
            }
            // After the staging slot exists: whatever committed before its
            // start is covered by these bumps, whatever after by the stream
            // of its copy, which exists only once they landed.
            log.bump_namespaces(self.store).await;
            client
                .simple_query(&format!(
                    "SELECT pg_copy_logical_replication_slot('{staged}', '{slot}')"
                ))
                .await
                .map_err(Error::postgres)?;
            count(&log.stats.slots_made);
            drop_slot(client, &staged).await?;
        } else if usable {
            // Stopped between the copy and the drop: the bumps had landed.
            drop_slot(client, &staged).await?;
        }
        Ok(())
    }

    /// Reads one message of a transaction into its scopes.
    fn change(&mut self, data: &[u8]) -> Result<(), Error> {
        let message = pgoutput::decode(data)
            .map_err(|error| Error::new(ErrorKind::Malformed, Some(Box::new(error))))?;
        let (relation, rows): (u32, Vec<Tuples<'_>>) = match &message {
            Message::Relation(relation) => {
                self.relations.insert(relation.id, relation.clone());
                return Ok(());
            }
            Message::Other => return Ok(()),
            Message::Truncate { relations } => {
                for id in relations {
                    self.table(*id)?;
                }
                let transaction = self.transaction.get_or_insert_with(Transaction::default);
                transaction.everything = true;
                return Ok(());
            }
            Message::Insert { relation, new } => (
                *relation,
                vec![(Image::Inserted, Some(new.as_slice()), None)],
            ),
            Message::Update { relation, old, new } => (
                *relation,
                vec![
                    (Image::Before, Some(new.as_slice()), Some(old)),
                    (Image::After, Some(new.as_slice()), Some(old)),
                ],
            ),
            Message::Delete { relation, old } => {
                (*relation, vec![(Image::Deleted, None, Some(old))])
            }
        };
        let (table, scopes) = self.table(relation)?;
        let columns = &self.relations[&relation].columns;
        let transaction = self.transaction.get_or_insert_with(Transaction::default);
        let mut bumps = Bumps::default();
        for (image, new, old) in rows {
            let row = Row {
                table: &table,
                columns,
                image,
                new,
                old,
            };
            scopes(&row, &mut bumps).map_err(|error| {
                Error::new(
                    ErrorKind::Row {
                        table: table.clone(),
                    },
                    Some(Box::new(error)),
                )
            })?;
        }
        if transaction.everything {
            return Ok(());
        }
        for scope in bumps.drain() {
            if transaction.seen.insert(scope.clone()) {
                transaction.scopes.push(scope);
            }
        }
        if transaction.scopes.len() > self.log.options.max_scopes_per_transaction {
            transaction.everything = true;
            transaction.scopes = Vec::new();
            transaction.seen = HashSet::new();
        }
        Ok(())
    }

    /// The mapped table of relation `id`.
    fn table(&self, id: u32) -> Result<(String, Arc<RowScopes>), Error> {
        let Some(relation) = self.relations.get(&id) else {
            return Err(Error::new(
                ErrorKind::Malformed,
                Some(format!("a change of relation {id}, never described").into()),
            ));
        };
        let name = format!("{}.{}", relation.schema, relation.name);
        match self.log.map.get(&name) {
            Some(scopes) => Ok((name, scopes.clone())),
            None => Err(Error::new(ErrorKind::Unmapped(name), None)),
        }
    }
}

impl Error {
    fn postgres(error: PgWireError) -> Self {
        // A refused login or TLS setup does not mend by waiting.
        let kind = match error {
            PgWireError::Auth(_) | PgWireError::Tls(_) => ErrorKind::Login,
            _ => ErrorKind::Postgres,
        };
        Error::new(kind, Some(Box::new(error)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_name_leaves_room_for_its_staging_slot() {
        let max = MAX_NAME - STAGING.len();
        let longest = "s".repeat(max);
        assert!(check_name("the slot", &longest, max).is_ok());
        assert_eq!(staging(&longest).len(), MAX_NAME);
        let error = check_name("the slot", &format!("{longest}s"), max).unwrap_err();
        assert!(
            matches!(error.kind(), ErrorKind::Config(why) if why.contains("1 to 58")),
            "{error}"
        );
    }
}
