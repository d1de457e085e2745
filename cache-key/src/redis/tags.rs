//! Value tags in Redis: when a fill starts, on the servers' clock
//! ([`ClockRead`]), and whether an entry's tags were bumped since
//! ([`TagCheck`]).
//!
//! A bump sets its counter to the server's clock (microseconds since 2020)
//! or one more than it was, the larger (the counter script's `b`). A fill
//! of an answer tagged from its value reads that clock before the origin is
//! asked, on the server holding the tags' counters, and the entry keeps it.
//! The entry is served while every tag's counter is below it:
//!
//! - a bump that returned before the fill started set its counter below
//!   the start (the server's clock moved on), and the origin, asked after,
//!   saw its change: the entry is served;
//! - a bump that had not returned when the fill started sets its counter at
//!   or above the start: the entry is never served again, whether its
//!   origin saw the change or not.
//!
//! A tag's counter that is missing (never bumped, evicted) or written by
//! another instance (a restart from a snapshot, a promoted replica) is
//! raised to the clock when read, as every counter is, and so ends every
//! entry filled before: an entity's first fill after such a loss is stored
//! and never served, the next one is. Tags inside a tenant share the
//! tenant's hash tag, and so its slot's server and clock; the tags of every
//! tenant of a namespace share one slot of their own: on a Redis Cluster a
//! fill reads both clocks, each compared only with its own server's
//! counters.

use ::redis::{Cmd, Value, cmd};
use smallvec::SmallVec;

use super::batch::Exchange;
use super::batch::{Answers, Batch, Sent};
use super::counters::{CounterExchange, CounterSource, Topology};
use super::tracking::Tracked;
use crate::cache::BackendError;
use crate::generation::{Counters, GenerationError, tag_counters};
use crate::tag::{TagClock, TagScope, TagStamp, Tags};

/// The server's clock as the counter script reads it: microseconds since
/// 2020-01-01, in decimal.
const CLOCK_SCRIPT: &str = "\
local now = redis.call('TIME')
return string.format('%d%06d', tonumber(now[1]) - 1577836800, tonumber(now[2]))
";

/// `EVAL <clock> 1 <name>`: the clock of the server holding `name`'s slot.
fn clock_of(name: &str) -> Cmd {
    cmd("EVAL").arg(CLOCK_SCRIPT).arg(1).arg(name).take()
}

/// A name in the slot of `counters`' tags of `scope` (a tag's counter name
/// without the tag): where that scope's clock is read.
fn slot_name(counters: Counters<'_>, scope: TagScope) -> String {
    let mut tags = Tags::new();
    // A placeholder tag: only the slot of its counter's name matters.
    let _ = tags.push(scope, "clock", "clock", &1u8);
    let (counter, _) = tag_counters(counters, &tags)
        .next()
        .expect("one tag was pushed");
    counter.name()
}

/// Reads the tag clock of a query's tenant and namespace: one command on a
/// server, one per slot on a cluster, in one round trip.
#[derive(Debug)]
pub(crate) struct ClockRead {
    /// The commands, the tenant's first.
    commands: Vec<Cmd>,
    /// Where they sit in the batch in flight.
    sent: Option<usize>,
}

impl ClockRead {
    pub(crate) fn new(counters: Counters<'_>, topology: Topology) -> Self {
        let tenant = clock_of(&slot_name(counters, TagScope::Tenant));
        let commands = match topology {
            Topology::Server => vec![tenant],
            Topology::Cluster => vec![tenant, clock_of(&slot_name(counters, TagScope::Global))],
        };
        ClockRead {
            commands,
            sent: None,
        }
    }

    pub(crate) fn send(&mut self, batch: &mut Batch) {
        let mut first = None;
        for command in &self.commands {
            let at = batch.push(command.clone());
            first.get_or_insert(at);
        }
        self.sent = first;
    }

    /// The clock in the replies to the batch [`send`](Self::send) filled.
    pub(crate) fn receive(&mut self, replies: &mut Answers) -> Result<TagClock, GenerationError> {
        let at = self.sent.take().unwrap_or_default();
        let mut read = |i: usize| {
            let reply = std::mem::replace(&mut replies[at + i], Ok(Value::Nil));
            let value =
                reply.map_err(|error| GenerationError::store(BackendError::refused(error)))?;
            clock_value(&value)
        };
        let tenant = read(0)?;
        let global = match self.commands.len() {
            1 => tenant,
            _ => read(1)?,
        };
        Ok(TagClock { tenant, global })
    }
}

impl Exchange for ClockRead {
    type Output = Result<TagClock, GenerationError>;

    fn send(&mut self, batch: &mut Batch) {
        ClockRead::send(self, batch);
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        Some(
            replies
                .map_err(GenerationError::store)
                .and_then(|mut replies| ClockRead::receive(self, &mut replies)),
        )
    }
}

/// The clock script's reply.
fn clock_value(value: &Value) -> Result<u64, GenerationError> {
    let text = match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(text) => Some(text.as_str()),
        _ => None,
    };
    text.and_then(|text| text.parse().ok()).ok_or_else(|| {
        GenerationError::store(BackendError::protocol(format!(
            "the clock script answered {value:?}, not a number of microseconds"
        )))
    })
}

/// Whether a value's tags were bumped since its fill started: their
/// counters read (after the failed bumps waiting to be sent again), each
/// compared with the start on its own scope's clock.
#[derive(Debug)]
pub(crate) struct TagCheck {
    counters: CounterExchange,
    since: TagClock,
    /// Each tag's scope, in order.
    scopes: SmallVec<[TagScope; 8]>,
}

impl TagCheck {
    /// Checks `tags`, in `counters`' tenant and namespace, against `since`.
    pub(crate) fn new(
        counters: Counters<'_>,
        tags: &Tags,
        since: TagClock,
        source: &CounterSource,
    ) -> Self {
        TagCheck {
            counters: CounterExchange::read_tags(counters, tags, source),
            since,
            scopes: tags.iter().map(|(scope, _)| scope).collect(),
        }
    }

    /// Checks `stamp`.
    pub(crate) fn of(counters: Counters<'_>, stamp: &TagStamp, source: &CounterSource) -> Self {
        Self::new(counters, &stamp.tags, stamp.since, source)
    }

    /// The same check against `since`: for counters read before the
    /// value's start was known (with its entry).
    pub(crate) fn since(mut self, since: TagClock) -> Self {
        self.since = since;
        self
    }

    pub(crate) fn is_done(&self) -> bool {
        self.counters.is_done()
    }

    pub(crate) fn send(&mut self, batch: &mut Batch) {
        self.counters.send(batch);
    }

    pub(crate) fn receive(&mut self, replies: &mut Answers) -> Result<(), GenerationError> {
        self.counters.receive(replies)
    }

    /// Whether no tag was bumped since the fill started, once
    /// [`is_done`](Self::is_done): every counter below the start on its
    /// scope's clock.
    pub(crate) fn unchanged(&self) -> bool {
        let mut values = self.counters.values();
        let below = (self.scopes.iter())
            .zip(values.by_ref())
            .all(|(&scope, value)| value < self.since.of(scope));
        below && values.next().is_none()
    }

    /// Whether the tags that failed the check all failed it only because
    /// this check made their counters (see `RejectReason::NewTagCounter`).
    pub(crate) fn failed_on_new_counters(&self) -> bool {
        let mut failed = (self.scopes.iter())
            .zip(self.counters.values().zip(self.counters.raised()))
            .filter(|&(&scope, (value, _))| value >= self.since.of(scope))
            .peekable();
        failed.peek().is_some() && failed.all(|(_, (_, raised))| raised)
    }
}

/// The tag checks of several values, sent together: one batch per step
/// for all that are not done (a sweep's, for the entries of one `SCAN`).
pub(crate) struct TagChecks {
    checks: Vec<TagCheck>,
    /// The checks in the batch in flight.
    sent: Vec<usize>,
}

impl TagChecks {
    pub(crate) fn new(checks: Vec<TagCheck>) -> Self {
        TagChecks {
            checks,
            sent: Vec::new(),
        }
    }
}

impl Exchange for TagChecks {
    /// Whether each value's tags are unchanged, in order.
    type Output = Result<Vec<bool>, GenerationError>;

    fn send(&mut self, batch: &mut Batch) {
        self.sent.clear();
        for (i, check) in self.checks.iter_mut().enumerate() {
            if !check.is_done() {
                check.send(batch);
                self.sent.push(i);
            }
        }
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        let mut replies = match replies {
            Ok(replies) => replies,
            Err(error) => return Some(Err(GenerationError::store(error))),
        };
        // Each check finds its replies where it put its commands.
        for &i in &self.sent {
            if let Err(error) = self.checks[i].receive(&mut replies) {
                return Some(Err(error));
            }
        }
        (self.checks.iter().all(TagCheck::is_done))
            .then(|| Ok(self.checks.iter().map(TagCheck::unchanged).collect()))
    }
}

/// Whether no tag of `stamp` (in `counters`' tenant and namespace) was
/// bumped since its fill began, by the counters kept in process; `None`
/// when one of them is not kept (or the subscription is not alive).
pub(crate) fn tracked_unchanged(
    tracked: &Tracked,
    counters: Counters<'_>,
    stamp: &TagStamp,
) -> Option<bool> {
    let mut names = String::with_capacity(64 * stamp.tags.len());
    let mut ends: SmallVec<[usize; 8]> = SmallVec::new();
    for (counter, _) in tag_counters(counters, &stamp.tags) {
        counter.write_name(&mut names);
        ends.push(names.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let values = tracked.values(
        starts
            .zip(ends.iter())
            .map(|(start, &end)| &names[start..end]),
    )?;
    let scopes = stamp.tags.iter().map(|(scope, _)| scope);
    Some(
        scopes
            .zip(values)
            .all(|(scope, value)| value < stamp.since.of(scope)),
    )
}

impl Exchange for TagCheck {
    type Output = Result<bool, GenerationError>;

    fn send(&mut self, batch: &mut Batch) {
        TagCheck::send(self, batch);
    }

    fn receive(&mut self, replies: Sent) -> Option<Self::Output> {
        let judged = replies
            .map_err(GenerationError::store)
            .and_then(|mut replies| TagCheck::receive(self, &mut replies));
        match judged {
            Err(error) => Some(Err(error)),
            Ok(()) if self.is_done() => Some(Ok(self.unchanged())),
            Ok(()) => None,
        }
    }
}
