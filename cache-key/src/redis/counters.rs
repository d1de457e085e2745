//! Generation counters in Redis, as commands and the judgement of their
//! replies (no I/O): how a read and a bump are sent, and why no counter goes
//! back when the server restarts from its files, a replica is promoted, or
//! a primary's dataset is replaced by a resync.
//!
//! # Counters tied to the instance that wrote them
//!
//! A counter's value is `<value>:<instance id>`: the number and the id of
//! the Redis primary that last wrote it, its run id then its replication id
//! (`master_replid`). A server restarted from `dump.rdb` or its AOF, a
//! replica promoted after it missed a bump, or a primary demoted with
//! `REPLICAOF` (then maybe promoted again) whose dataset a full resync
//! replaced, holds counters another instance wrote, possibly from before a
//! bump it lost. A restart changes the run id; a promotion makes a new
//! replication id, and a demoted primary takes its new primary's. Such a
//! counter is never trusted: it is **raised** to the server's clock in
//! microseconds since 2020 (or kept, if above it) and stamped with the
//! current instance id. A counter starts at the clock and grows by one per
//! bump, so the clock is above every value it had, as long as it was bumped
//! at most once per microsecond on average and the clock of the server now
//! serving it is not behind the clock of the one that wrote it (two servers
//! of one deployment: skewed by less than the failover took).
//!
//! A read trusts a counter only when the instance answering it wrote it. A
//! connection to a server learns its instance once, when it opens
//! ([`learn_instance`](super::instance::learn_instance)) and names itself
//! after it, and a read on it is a plain `MGET` judged against that id,
//! with two checks in the same pipeline: the connection still has its name
//! (a proxy that moved it to another server opened a connection without
//! one) and the server is still a primary (`WAIT 0 0`: a primary demoted by
//! `REPLICAOF` keeps its connections, its run id and its scripts while a
//! full resync replaces its counters with the new primary's; a connection
//! that found it a replica is replaced once it is a primary again, to learn
//! its new id). On a cluster, or with the instance checked per read, and
//! for every write, the command is the script of one instance (its id is
//! written into its text, so its SHA-1 names that instance), run with
//! `EVALSHA`, and on a server followed by the same `WAIT`. Redis 7 keeps scripts in memory only, per process:
//! they are neither saved in RDB or AOF files nor replicated. So `EVALSHA`
//! of instance `X`'s script succeeds only on `X`'s process: a restarted
//! server, or another one, answers `NOSCRIPT`, and the counters are read
//! again only after its own id is learned. A read in the script is one
//! `EVALSHA ... MGET` (per slot in a cluster) and costs no more round trips
//! than a plain `MGET`, but a script call of the server's CPU.
//!
//! What no read catches: a primary demoted, resynced and promoted again
//! between two reads of one connection (or of one pool's script reads):
//! only `INFO replication` shows its replication id changed, at some 15 to
//! 25 times a `GET`'s server time per read.
//!
//! Learning an instance (once per process and slot, and after each
//! `NOSCRIPT`): a fixed script returns the server's instance id, then
//! `EVAL` of that instance's script loads it and checks, in the same
//! command on the same server, that the id is its own. Should a failover
//! move the slot between the two (the script then sits on a server that is
//! not `X`), that server's scripts are flushed (`SCRIPT FLUSH`) and the
//! instance learned again: a window of one round trip in which that server
//! could answer a read with counters it did not write.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use ::redis::cluster_routing::Slot;
use ::redis::{Cmd, RedisError, RedisResult, Value, cmd};
use smallvec::SmallVec;

use super::batch::{Answers, Batch, is_error};
use super::entry::px;
use super::instance::{FIRST_VERSION, OldServer, check_primary, check_reached};
use super::invalidations::{Invalidations, Outcome, Replayed};
use super::tracking::Tracked;
use crate::cache::BackendError;
use crate::generation::{
    Counter, CounterKind, Counters, GenerationError, GenerationSum, tag_counters,
};
use crate::tag::Tags;

/// The script of one instance, after its first line `local epoch = '<id>'`
/// (its instance id: run id, then replication id).
///
/// `ARGV[2]`, when sent (a store with a tag lifetime): the milliseconds
/// that a key `x` or `b` writes lives, for each key whose character in
/// `ARGV[3]` (`0` or `1` per key) is `1`: the tag counters.
///
/// `ARGV[1]`: `r` returns `MGET KEYS`; `v` checks that this is the instance;
/// `x` raises every key not stamped with its id to the clock and returns
/// the values; `b` raises, then sets each to one more or the clock, the
/// larger, and returns the values (so that a tag's counter holds when it
/// was last bumped, see `redis/tags.rs`). Values are
/// decimal text, compared and incremented as text so that no float ever
/// holds them. Every write publishes the counter's name on
/// `cache-key:counters` ([`CHANNEL`](super::tracking::CHANNEL)), for
/// tracked counters.
const EPOCH_SCRIPT: &str = r#"
local mode, lifetime, lives = ARGV[1], ARGV[2], ARGV[3]
if mode == 'r' then
  return redis.call('MGET', unpack(KEYS))
end
local id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  .. string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
if id ~= epoch then
  return redis.error_reply('NOTME ' .. tostring(id))
end
if mode == 'v' then
  return 'OK'
end
local now = redis.call('TIME')
local clock = string.format('%d%06d', tonumber(now[1]) - 1577836800, tonumber(now[2]))
local function larger(a, b)
  if #a ~= #b then
    if #a > #b then return a end
    return b
  end
  if a > b then return a end
  return b
end
local function plus_one(s)
  local i = #s
  while i > 0 and string.sub(s, i, i) == '9' do i = i - 1 end
  if i == 0 then return '1' .. string.rep('0', #s) end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end
local out = {}
for i, key in ipairs(KEYS) do
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' then
    return redis.error_reply('NOTACOUNTER ' .. key .. ' ' .. tostring(raw.err))
  end
  local value, current = clock, false
  if raw then
    local digits, stamp = string.match(raw, '^(%d+):(%x+)$')
    if not digits then digits = string.match(raw, '^(%d+)$') end
    if not digits then
      return redis.error_reply('NOTACOUNTER ' .. key)
    end
    digits = string.match(digits, '^0*(%d.*)$')
    if stamp == epoch then
      value, current = digits, true
    else
      value = larger(digits, clock)
    end
  end
  if mode == 'b' then value = larger(plus_one(value), clock) end
  if mode == 'b' or not current then
    if lifetime and string.sub(lives, i, i) == '1' then
      redis.call('SET', key, value .. ':' .. epoch, 'PX', lifetime)
    else
      redis.call('SET', key, value .. ':' .. epoch)
    end
    redis.call('PUBLISH', 'cache-key:counters', key)
  end
  out[i] = value
end
return out
"#;

/// Returns the server's instance id (its run id, then its replication id)
/// and version, to learn which instance holds a slot. Fixed: it may be
/// cached on any server.
const INSTANCE_SCRIPT: &str = "\
local info = redis.call('INFO', 'server')
local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
return {string.match(info, 'run_id:(%x+)') .. replid, string.match(info, 'redis_version:(%d+)')}
";

/// How many steps one read or bump may take (learning an instance, loading
/// its script, raising counters) before it gives up with an error.
const MAX_STEPS: u8 = 12;

/// One Redis process as the primary of one dataset, named by its instance
/// id (its run id, then its replication id: see
/// [`Instance`](super::instance::Instance)), and its counter script.
#[derive(Debug)]
pub(crate) struct Epoch {
    id: Box<str>,
    code: Box<str>,
    sha: Box<str>,
}

impl Epoch {
    pub(crate) fn new(id: &str) -> Self {
        let code = format!("local epoch = '{id}'{EPOCH_SCRIPT}");
        let sha = ::redis::Script::new(&code).get_hash().into();
        Epoch {
            id: id.into(),
            code: code.into(),
            sha,
        }
    }

    /// `EVALSHA <this instance's script> n names... mode [lifetime lives]`:
    /// `names` with whether each is a tag's counter, which lives `lifetime`
    /// milliseconds when written.
    fn call<'n>(
        &self,
        mode: &str,
        names: impl ExactSizeIterator<Item = (&'n str, bool)>,
        lifetime: Option<u64>,
    ) -> Cmd {
        let mut call = Cmd::with_capacity(names.len() + 6, 64 + 40 * names.len());
        call.arg("EVALSHA").arg(&*self.sha).arg(names.len());
        let mut lives = String::new();
        for (name, tag) in names {
            call.arg(name);
            lives.push(if tag { '1' } else { '0' });
        }
        call.arg(mode);
        if let Some(lifetime) = lifetime
            && mode != "r"
            && lives.contains('1')
        {
            call.arg(lifetime).arg(lives);
        }
        call
    }

    /// `EVAL <this instance's script> 1 name v`: loads the script on the
    /// server owning `name` and checks that it is this instance.
    fn load(&self, name: &str) -> Cmd {
        cmd("EVAL")
            .arg(&*self.code)
            .arg(1)
            .arg(name)
            .arg("v")
            .take()
    }
}

/// The names of one exchange's counters, in one buffer.
#[derive(Debug)]
struct Names {
    text: String,
    ends: SmallVec<[usize; 5]>,
    /// Which names are a tag's counter (none when named as they are).
    tags: SmallVec<[bool; 5]>,
}

impl Names {
    /// No names: an exchange whose counters were all known in process.
    fn none() -> Self {
        Names {
            text: String::new(),
            ends: SmallVec::new(),
            tags: SmallVec::new(),
        }
    }

    /// Names as they are.
    fn named<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut named = Names {
            text: String::new(),
            ends: SmallVec::new(),
            tags: SmallVec::new(),
        };
        for name in names {
            named.text.push_str(name);
            named.ends.push(named.text.len());
        }
        named
    }

    fn of<'a>(counters: impl IntoIterator<Item = Counter<'a>>) -> Self {
        let mut names = Names {
            text: String::with_capacity(128),
            ends: SmallVec::new(),
            tags: SmallVec::new(),
        };
        for counter in counters {
            counter.write_name(&mut names.text);
            names.ends.push(names.text.len());
            names.tags.push(counter.kind() == CounterKind::Tag);
        }
        names
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    /// Name `i` and whether it is a tag's counter.
    fn tagged(&self, i: usize) -> (&str, bool) {
        (self.get(i), self.tags.get(i).copied().unwrap_or(false))
    }
}

/// Where counters go together: the whole server, or one cluster slot.
pub(crate) type Group = Option<Slot>;

/// The instance last learned for each group, shared by every store and
/// cache on one pool. A wrong entry costs a `NOSCRIPT` and a lesson, never
/// a trusted counter.
#[derive(Debug, Default)]
pub(crate) struct Epochs {
    /// Looked up on every read: hashed fast (the groups are at most the
    /// cluster's 16,384 slots, nobody's choice).
    known: RwLock<HashMap<Group, Arc<Epoch>, foldhash::fast::RandomState>>,
}

impl Epochs {
    fn get(&self, group: Group) -> Option<Arc<Epoch>> {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        known.get(&group).cloned()
    }

    fn set(&self, group: Group, epoch: Arc<Epoch>) {
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        known.insert(group, epoch);
    }

    fn forget(&self, group: Group, epoch: &Arc<Epoch>) {
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        if known
            .get(&group)
            .is_some_and(|known| Arc::ptr_eq(known, epoch))
        {
            known.remove(&group);
        }
    }
}

/// What a group of counters sends next.
#[derive(Debug)]
enum Stage {
    /// `MGET` on a connection that knows its server's instance id: values
    /// stamped with it are trusted, the others raised by the script.
    Plain,
    /// `EVALSHA` of the instance's script in this mode (`r`, `x`, `b`).
    Call(Arc<Epoch>, Mode),
    /// Ask the server for its instance id, then go on with `Mode`.
    Learn(Mode),
    /// Load and check the instance's script, then go on with `Mode`.
    Load(Arc<Epoch>, Mode),
    /// The script sits on a server that is not its instance: flush it.
    Flush(Mode),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    /// Raise the members whose values are still `None`.
    Raise,
    Bump,
}

impl Mode {
    fn argument(self) -> &'static str {
        match self {
            Mode::Read => "r",
            Mode::Raise => "x",
            Mode::Bump => "b",
        }
    }
}

#[derive(Debug)]
struct GroupState {
    group: Group,
    /// Indices of the counters in this group, in order.
    members: SmallVec<[usize; 5]>,
    stage: Stage,
    /// Where this group's command sits in the batch in flight.
    sent: Option<usize>,
}

/// Reading (or bumping) a query's counters: the commands of each step, and
/// what each reply means. A driver alternates [`send`](Self::send) and
/// [`receive`](Self::receive) until [`is_done`](Self::is_done).
#[derive(Debug)]
pub(crate) struct CounterExchange {
    epochs: Arc<Epochs>,
    /// Counters kept in process, and their change count when this began.
    tracked: Option<(Arc<Tracked>, u64)>,
    mode: Mode,
    /// The generation and the number of counters, when it was known in
    /// process (tracked counters): nothing is sent then.
    known: Option<(u64, usize)>,
    names: Names,
    values: SmallVec<[Option<u64>; 5]>,
    /// Which counters this exchange raised (found missing, or not stamped
    /// by the server process that answered), in order; empty when none
    /// was sent for.
    raised: SmallVec<[bool; 5]>,
    groups: SmallVec<[GroupState; 3]>,
    steps: u8,
    /// Bumps that failed before, sent again (and judged) before this
    /// exchange's own first step; boxed, as it is rare.
    replay: Option<Box<Replay>>,
    /// The milliseconds a tag's counter this exchange writes lives, if
    /// bounded.
    lifetime: Option<u64>,
    /// A read on one server checks, after its counters, that the server is
    /// still a primary ([`check_primary`]).
    on_server: bool,
}

/// Failed bumps sent again, and what they were.
#[derive(Debug)]
struct Replay {
    exchange: CounterExchange,
    sent: Vec<Replayed>,
    invalidations: Arc<Invalidations>,
}

/// Where an exchange's counters are: how the servers are laid out, the
/// instances learned, the counters kept in process (tracking), and the
/// invalidations this process knows of.
#[derive(Debug, Clone)]
pub(crate) struct CounterSource {
    pub(crate) topology: Topology,
    /// Reads fetch counters with a plain `MGET`, judged against the
    /// instance their connection learned when it opened
    /// ([`InstanceCheck::PerConnection`](super::InstanceCheck)).
    pub(crate) plain: bool,
    pub(crate) epochs: Arc<Epochs>,
    pub(crate) tracked: Option<Arc<Tracked>>,
    pub(crate) invalidations: Arc<Invalidations>,
    /// The milliseconds a tag counter lives after it is written, if bounded.
    pub(crate) tag_lifetime: Option<u64>,
}

impl CounterSource {
    pub(crate) fn new(topology: Topology, plain: bool) -> Self {
        CounterSource {
            topology,
            plain,
            epochs: Arc::default(),
            tracked: None,
            invalidations: Arc::default(),
            tag_lifetime: None,
        }
    }

    /// A bump of `counter` begins: the guard it returns is told how it
    /// ended, and a guard dropped untold (a cancelled future, a panic)
    /// leaves the bump pending, as one whose outcome is unknown.
    pub(crate) fn bumping(&self, counter: Counter<'_>) -> Bumping {
        Bumping {
            invalidations: self.invalidations.clone(),
            name: counter.name(),
            namespace: counter.of_namespace().name(),
            ended: false,
        }
    }

    /// The counters kept in process, if they may be used now: tracking is
    /// on and no bump of unknown outcome waits to be sent again.
    #[inline]
    pub(crate) fn tracked(&self) -> Option<&Tracked> {
        let tracked = self.tracked.as_deref()?;
        (!self.invalidations.has_unknown()).then_some(tracked)
    }
}

/// A bump on its way (see [`CounterSource::bumping`]).
#[must_use = "a bump's guard is told how it ended"]
pub(crate) struct Bumping {
    invalidations: Arc<Invalidations>,
    name: String,
    namespace: String,
    ended: bool,
}

impl Bumping {
    /// The bump returned `result`: pending unless `Ok`, refused when Redis
    /// answered it with an error (it was not made), of unknown outcome
    /// when Redis was not reached or did not answer in time.
    pub(crate) fn ended(mut self, result: &Result<(), GenerationError>) {
        self.ended = true;
        let outcome = match result {
            Ok(()) => Outcome::Done,
            Err(error) => match error.backend_error() {
                Some(backend) if !backend.is_unreachable() => Outcome::Refused,
                _ => Outcome::Unknown,
            },
        };
        (self.invalidations).ended(&self.name, &self.namespace, outcome);
    }
}

impl Drop for Bumping {
    fn drop(&mut self) {
        if !self.ended {
            (self.invalidations).ended(&self.name, &self.namespace, Outcome::Unknown);
        }
    }
}

impl CounterSource {
    /// Whether a refused bump is among the counters `names`: their
    /// read is not answered from counters kept in process, but sends the
    /// bump again first.
    fn blocked(&self, names: &Names) -> bool {
        (self.invalidations).blocks(|pending| (0..names.len()).any(|i| names.get(i) == pending))
    }
}

/// The commands that keep the tag counters an entry involves (its query's
/// tags and, given, its value's) for at least as long as the entry is
/// `kept`: `PEXPIRE name ms GT`, which only lengthens a lifetime and leaves
/// a counter without one, or a missing one, as it is. Sent with the entry's
/// `SET` by a store whose tag counters have a lifetime
/// ([`CounterSource::tag_lifetime`]), so that a counter outlives every entry
/// holding its tag.
pub(crate) fn keep_tags(
    counters: Counters<'_>,
    value_tags: Option<&Tags>,
    kept: Duration,
) -> Vec<Cmd> {
    // The entry's own `PX` runs from the same moment: a second more.
    let millis = px(kept.saturating_add(Duration::from_secs(1)));
    let query_tags = counters.iter().filter(|c| c.kind() == CounterKind::Tag);
    let value_tags = value_tags
        .into_iter()
        .flat_map(|tags| tag_counters(counters, tags).map(|(counter, _)| counter));
    (query_tags.chain(value_tags))
        .map(|counter| {
            cmd("PEXPIRE")
                .arg(counter.name())
                .arg(millis)
                .arg("GT")
                .take()
        })
        .collect()
}

/// Whether counters are spread over cluster slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    Server,
    Cluster,
}

impl Topology {
    /// The group a key belongs to.
    pub(crate) fn group(self, key: &str) -> Group {
        match self {
            Topology::Server => None,
            Topology::Cluster => Some(Slot::for_key(key)),
        }
    }
}

impl CounterExchange {
    /// Reads `counters`: at once when they are all kept in process; after
    /// the failed bumps waiting to be sent again, if any.
    pub(crate) fn read(counters: Counters<'_>, source: &CounterSource) -> Self {
        if let Some(tracked) = source.tracked()
            && let Some(generation) = tracked.generation(&counters)
            && !(source.invalidations.has_refused() && source.blocked(&Names::of(counters)))
        {
            // Nothing to send: no group, no instance to learn.
            return CounterExchange {
                epochs: source.epochs.clone(),
                tracked: None,
                mode: Mode::Read,
                known: Some((generation, counters.count())),
                names: Names::none(),
                values: SmallVec::new(),
                raised: SmallVec::new(),
                groups: SmallVec::new(),
                steps: 0,
                replay: None,
                lifetime: None,
                on_server: false,
            };
        }
        Self::new(Names::of(counters), source, Mode::Read).replaying(source)
    }

    /// This exchange, after the bumps waiting to be sent again, if any:
    /// every one of unknown outcome, and the refused ones among its own
    /// counters.
    fn replaying(mut self, source: &CounterSource) -> Self {
        if source.invalidations.has_pending() {
            let names = &self.names;
            let involves = |pending: &str| (0..names.len()).any(|i| names.get(i) == pending);
            let sent = source.invalidations.to_replay(involves);
            if !sent.is_empty() {
                let bumps = Names::named(sent.iter().map(|pending| &*pending.name));
                self.replay = Some(Box::new(Replay {
                    exchange: Self::new(bumps, source, Mode::Bump),
                    sent,
                    invalidations: source.invalidations.clone(),
                }));
            }
        }
        self
    }

    /// Reads the counters of `tags`, a value's tags in `counters`' tenant
    /// and namespace, each value apart ([`values`](Self::values)): at once
    /// when they are all kept in process; after the failed bumps waiting to
    /// be sent again, if any.
    pub(crate) fn read_tags(counters: Counters<'_>, tags: &Tags, source: &CounterSource) -> Self {
        let names = Names::of(tag_counters(counters, tags).map(|(counter, _)| counter));
        if let Some(tracked) = source.tracked()
            && let Some(values) = tracked.values((0..names.len()).map(|i| names.get(i)))
            && !source.blocked(&names)
        {
            return CounterExchange {
                epochs: source.epochs.clone(),
                tracked: None,
                mode: Mode::Read,
                known: None,
                values: values.into_iter().map(Some).collect(),
                raised: SmallVec::new(),
                names,
                groups: SmallVec::new(),
                steps: 0,
                replay: None,
                lifetime: None,
                on_server: false,
            };
        }
        Self::new(names, source, Mode::Read).replaying(source)
    }

    /// Whether each counter was raised by this exchange, in order (all
    /// `false` when it sent nothing).
    pub(crate) fn raised(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.values.len()).map(|i| self.raised.get(i).copied().unwrap_or(false))
    }

    /// Each counter's value, in order, once [`is_done`](Self::is_done) (a
    /// read that was not known in process as a sum).
    pub(crate) fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.values.iter().map(|value| value.unwrap_or(u64::MAX))
    }

    /// Bumps `counter`, after the bumps waiting to be sent again: a
    /// process that only writes sends them too.
    pub(crate) fn bump(counter: Counter<'_>, source: &CounterSource) -> Self {
        Self::new(Names::of([counter]), source, Mode::Bump).replaying(source)
    }

    fn new(names: Names, source: &CounterSource, mode: Mode) -> Self {
        let (topology, epochs) = (source.topology, source.epochs.clone());
        let mut groups: SmallVec<[GroupState; 3]> = SmallVec::new();
        for i in 0..names.len() {
            let group = topology.group(names.get(i));
            match groups.iter_mut().find(|state| state.group == group) {
                Some(state) => state.members.push(i),
                None => groups.push(GroupState {
                    group,
                    members: SmallVec::from_slice(&[i]),
                    // A plain read needs no epoch: none is looked up.
                    stage: match mode == Mode::Read && source.plain {
                        true => Stage::Plain,
                        false => match epochs.get(group) {
                            Some(epoch) => Stage::Call(epoch, mode),
                            None => Stage::Learn(mode),
                        },
                    },
                    sent: None,
                }),
            }
        }
        CounterExchange {
            epochs,
            tracked: source
                .tracked
                .as_ref()
                .map(|tracked| (tracked.clone(), tracked.changes())),
            mode,
            known: None,
            values: SmallVec::from_elem(None, names.len()),
            raised: SmallVec::from_elem(false, names.len()),
            names,
            groups,
            steps: 0,
            replay: None,
            lifetime: source.tag_lifetime,
            on_server: topology == Topology::Server,
        }
    }

    /// Whether every counter has its value.
    pub(crate) fn is_done(&self) -> bool {
        self.replay.is_none()
            && self
                .groups
                .iter()
                .all(|state| matches!(state.stage, Stage::Done))
    }

    /// Adds the commands of the next step to `batch`.
    pub(crate) fn send(&mut self, batch: &mut Batch) {
        if let Some(replay) = &mut self.replay {
            replay.exchange.send(batch);
            return;
        }
        for state in &mut self.groups {
            let first = self.names.get(state.members[0]);
            let command = match &state.stage {
                Stage::Done => {
                    state.sent = None;
                    continue;
                }
                Stage::Call(epoch, Mode::Raise) => epoch.call(
                    "x",
                    state
                        .members
                        .iter()
                        .filter(|&&i| self.values[i].is_none())
                        .map(|&i| self.names.tagged(i))
                        .collect::<SmallVec<[(&str, bool); 5]>>()
                        .into_iter(),
                    self.lifetime,
                ),
                Stage::Call(epoch, mode) => epoch.call(
                    mode.argument(),
                    state.members.iter().map(|&i| self.names.tagged(i)),
                    self.lifetime,
                ),
                Stage::Plain => {
                    let names = state.members.iter().map(|&i| self.names.get(i));
                    state.sent = Some(batch.push_args("MGET", names));
                    // The checks follow the read they vouch for.
                    batch.push_fixed(check_reached());
                    batch.push_fixed(check_primary());
                    continue;
                }
                Stage::Learn(_) => cmd("EVAL").arg(INSTANCE_SCRIPT).arg(1).arg(first).take(),
                Stage::Load(epoch, _) => epoch.load(first),
                // Routed by redis to every primary of a cluster.
                Stage::Flush(_) => cmd("SCRIPT").arg("FLUSH").take(),
            };
            state.sent = Some(batch.push(command));
            // The check follows the read it vouches for.
            if matches!(state.stage, Stage::Call(_, Mode::Read)) && self.on_server {
                batch.push_fixed(check_primary());
            }
        }
    }

    /// Judges this exchange's replies in `replies` (the batch [`send`]
    /// filled, maybe with other commands too).
    ///
    /// [`send`]: Self::send
    pub(crate) fn receive(&mut self, replies: &mut Answers) -> Result<(), GenerationError> {
        if let Some(replay) = &mut self.replay {
            match replay.exchange.receive(replies) {
                Ok(()) if replay.exchange.is_done() => {
                    replay.invalidations.replayed(&replay.sent);
                    self.replay = None;
                }
                Ok(()) => {}
                // Refused again: only the exchanges of those scopes fail
                // (their reads go to the origin); the others go on.
                Err(error) if error.backend_error().is_some_and(|e| !e.is_unreachable()) => {
                    replay.invalidations.refused(&replay.sent);
                    let names = &self.names;
                    let involved = (replay.sent.iter())
                        .any(|pending| (0..names.len()).any(|i| names.get(i) == &*pending.name));
                    self.replay = None;
                    if involved {
                        return Err(error);
                    }
                }
                Err(error) => return Err(error),
            }
            return Ok(());
        }
        self.judge(replies)?;
        if self.is_done()
            && let Some((tracked, changes)) = &self.tracked
        {
            match self.mode {
                // Dropped here before the bump returns.
                Mode::Bump => {
                    (0..self.names.len()).for_each(|i| tracked.changed(self.names.get(i)))
                }
                _ => tracked.keep(
                    *changes,
                    (0..self.names.len()).map(|i| (self.names.get(i), self.values[i].unwrap_or(0))),
                ),
            }
        }
        Ok(())
    }

    fn judge(&mut self, replies: &mut Answers) -> Result<(), GenerationError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(GenerationError::store(BackendError::protocol(
                Unsettled.to_string(),
            )));
        }
        for state in &mut self.groups {
            let Some(at) = state.sent.take() else {
                continue;
            };
            let reply = std::mem::replace(&mut replies[at], Ok(Value::Nil));
            let stage = std::mem::replace(&mut state.stage, Stage::Done);
            state.stage = match stage {
                Stage::Call(epoch, mode) => {
                    if mode == Mode::Read && self.on_server {
                        let role = std::mem::replace(&mut replies[at + 1], Ok(Value::Nil));
                        if let Err(error) = role {
                            // Learned again: once a primary, its id is another.
                            self.epochs.forget(state.group, &epoch);
                            return Err(refused(error));
                        }
                    }
                    if is_error(&reply, "NOSCRIPT") {
                        self.epochs.forget(state.group, &epoch);
                        Stage::Learn(mode)
                    } else if is_error(&reply, "NOTME") {
                        Stage::Flush(mode)
                    } else {
                        let values: SmallVec<[usize; 5]> = match mode {
                            Mode::Raise => state
                                .members
                                .iter()
                                .copied()
                                .filter(|&i| self.values[i].is_none())
                                .collect(),
                            _ => state.members.clone(),
                        };
                        let done = judge_values(
                            &self.names,
                            &mut self.values,
                            &values,
                            reply,
                            (mode == Mode::Read).then_some(&*epoch.id),
                        )?;
                        if mode == Mode::Raise {
                            values.iter().for_each(|&i| self.raised[i] = true);
                        }
                        if done {
                            Stage::Done
                        } else {
                            Stage::Call(epoch, Mode::Raise)
                        }
                    }
                }
                Stage::Plain => {
                    let Some(instance) = replies.instance.clone() else {
                        return Err(protocol(
                            "counters read with MGET on a connection of no known instance".into(),
                        ));
                    };
                    let name = std::mem::replace(&mut replies[at + 1], Ok(Value::Nil));
                    let role = std::mem::replace(&mut replies[at + 2], Ok(Value::Nil));
                    instance.still_reached(name)?;
                    instance.still_primary(role)?;
                    let done = judge_values(
                        &self.names,
                        &mut self.values,
                        &state.members,
                        reply,
                        Some(instance.id()),
                    )?;
                    if done {
                        Stage::Done
                    } else {
                        match self.epochs.get(state.group) {
                            Some(epoch) if *epoch.id == *instance.id() => {
                                Stage::Call(epoch, Mode::Raise)
                            }
                            // Its script loaded and checked on that server first.
                            _ => Stage::Load(Arc::new(Epoch::new(instance.id())), Mode::Raise),
                        }
                    }
                }
                Stage::Learn(mode) => {
                    let id = instance(reply)?;
                    Stage::Load(Arc::new(Epoch::new(&id)), mode)
                }
                Stage::Load(epoch, mode) => {
                    if is_error(&reply, "NOTME") {
                        Stage::Flush(mode)
                    } else {
                        reply.map_err(refused)?;
                        self.epochs.set(state.group, epoch.clone());
                        Stage::Call(epoch, mode)
                    }
                }
                Stage::Flush(mode) => {
                    reply.map_err(refused)?;
                    Stage::Learn(mode)
                }
                Stage::Done => Stage::Done,
            };
        }
        Ok(())
    }

    /// Adds every counter's value to `sum`, in order, once [`is_done`](Self::is_done).
    pub(crate) fn add_to(&self, sum: &mut GenerationSum) {
        if let Some((generation, counters)) = self.known {
            sum.add_total(generation, counters);
            return;
        }
        for value in self.values.iter().flatten() {
            sum.add(*value);
        }
    }

    /// How many counters the exchange reads.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.names.len()
    }
}

/// Writes the values of `reply` (an array, one per index in `at`) into
/// `values`. With `stamp` (a read), a value is taken only when stamped with
/// it; `Ok(false)` when some counter must be raised first.
fn judge_values(
    names: &Names,
    values: &mut [Option<u64>],
    at: &[usize],
    reply: RedisResult<Value>,
    stamp: Option<&str>,
) -> Result<bool, GenerationError> {
    let reply = reply.map_err(|error| counter_error(names, at, error))?;
    let Value::Array(items) = reply else {
        return Err(protocol(format!(
            "the counter script answered {reply:?}, not an array"
        )));
    };
    if items.len() != at.len() {
        return Err(protocol(format!(
            "the counter script answered {} values for {} counters",
            items.len(),
            at.len()
        )));
    }
    let mut done = true;
    for (&i, item) in at.iter().zip(&items) {
        values[i] = match stamp {
            Some(stamp) => read_value(names.get(i), item, stamp)?,
            None => Some(raised_value(names.get(i), item)?),
        };
        done &= values[i].is_some();
    }
    Ok(done)
}

/// A counter's value as a read returns it: `Some` when the current instance
/// wrote it, `None` when it must be raised (missing, another instance's, or
/// from before counters carried their instance).
fn read_value(name: &str, value: &Value, stamp: &str) -> Result<Option<u64>, GenerationError> {
    let bytes = match value {
        Value::Nil => return Ok(None),
        Value::BulkString(bytes) => bytes.as_slice(),
        Value::SimpleString(text) => text.as_bytes(),
        other => return Err(not_a_counter(name, format!("{other:?}"))),
    };
    // Bytes, not text: the digits and the instance are ASCII, and only an
    // error needs the value as text.
    let (digits, written_by) = match bytes.iter().position(|&b| b == b':') {
        Some(at) => (&bytes[..at], Some(&bytes[at + 1..])),
        None => (bytes, None),
    };
    let value = parse_digits(name, digits, bytes)?;
    Ok((written_by == Some(stamp.as_bytes())).then_some(value))
}

/// A value the script raised or bumped.
fn raised_value(name: &str, value: &Value) -> Result<u64, GenerationError> {
    match value {
        Value::BulkString(bytes) => parse_digits(name, bytes, bytes),
        other => Err(not_a_counter(name, format!("{other:?}"))),
    }
}

/// The number `digits` (part of `value`) write in decimal: bytes that are
/// not digits are not a counter, a number past `u64::MAX` an overflow.
fn parse_digits(name: &str, digits: &[u8], value: &[u8]) -> Result<u64, GenerationError> {
    let not_digits = || {
        let held = format!("{:?}", String::from_utf8_lossy(value));
        not_a_counter(name, held)
    };
    if digits.is_empty() {
        return Err(not_digits());
    }
    // Every digit checked, past an overflow too (it sticks): not digits
    // comes first.
    let (mut number, mut overflow) = (0u64, false);
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Err(not_digits());
        }
        let (times_ten, over_mul) = number.overflowing_mul(10);
        let (sum, over_add) = times_ten.overflowing_add(u64::from(digit));
        (number, overflow) = (sum, overflow | over_mul | over_add);
    }
    match overflow {
        false => Ok(number),
        true => Err(GenerationError::overflow()),
    }
}

/// The error of a counter command the server refused.
fn counter_error(names: &Names, at: &[usize], error: RedisError) -> GenerationError {
    if error.code() == Some("NOTACOUNTER") {
        let detail = error.detail().unwrap_or_default();
        let name = at
            .iter()
            .map(|&i| names.get(i))
            .find(|name| detail.starts_with(name))
            .unwrap_or_default();
        let held = detail[name.len()..].trim();
        return not_a_counter(name, held.to_owned());
    }
    refused(error)
}

/// A server's error reply to a counter command.
fn refused(error: RedisError) -> GenerationError {
    GenerationError::store(BackendError::refused(error))
}

/// A reply to a counter command this crate cannot read.
fn protocol(what: String) -> GenerationError {
    GenerationError::store(BackendError::protocol(what))
}

/// The instance id in the instance script's reply; an error for a server older
/// than Redis 7 (its scripts survive restarts or are replicated, so an
/// instance's script would not name that instance).
fn instance(reply: RedisResult<Value>) -> Result<String, GenerationError> {
    let (run_id, version): (String, u32) = ::redis::from_redis_value(reply.map_err(refused)?)
        .map_err(|error| protocol(format!("the instance script answered {error}")))?;
    if version < FIRST_VERSION {
        return Err(protocol(OldServer { version }.to_string()));
    }
    Ok(run_id)
}

/// A counter key that holds something other than a counter (a value written
/// by someone else under a counter's name): an error, never a guess.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACounter {
    name: String,
    value: String,
}

impl NotACounter {
    /// The counter's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it holds, as Redis returned it (shortened).
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for NotACounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` holds {}, not a generation counter (a non-negative integer)",
            self.name, self.value
        )
    }
}

impl Error for NotACounter {}

fn not_a_counter(name: &str, mut value: String) -> GenerationError {
    if value.len() > 80 {
        let mut end = 80;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        value.truncate(end);
        value.push_str("...");
    }
    GenerationError::store(NotACounter {
        name: name.to_owned(),
        value,
    })
}

/// An exchange that kept being sent back (`NOSCRIPT`, `NOTME`) without
/// settling: a cluster whose slots move on every step.
#[derive(Debug)]
struct Unsettled;

impl fmt::Display for Unsettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the generation counters did not settle in {MAX_STEPS} round trips \
             (their servers changed on every step)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn a_read_trusts_only_values_stamped_by_the_instance_it_ran_on() {
        let stamp = "abc1";
        assert_eq!(read_value("c", &bulk("17:abc1"), stamp).unwrap(), Some(17));
        assert_eq!(read_value("c", &bulk("17:abc2"), stamp).unwrap(), None);
        assert_eq!(read_value("c", &bulk("17"), stamp).unwrap(), None);
        assert_eq!(read_value("c", &Value::Nil, stamp).unwrap(), None);
        for garbage in ["", ":abc1", "x:abc1", "-1", "1.5", "１"] {
            let error = read_value("c", &bulk(garbage), stamp).unwrap_err();
            let store = error.store_error().unwrap();
            assert!(store.is::<NotACounter>(), "{garbage:?}: {error}");
        }
        let error = read_value("c", &bulk("18446744073709551616:abc1"), stamp).unwrap_err();
        assert_eq!(
            error.kind(),
            crate::generation::GenerationErrorKind::Overflow
        );
        let max = read_value("c", &bulk("18446744073709551615:abc1"), stamp);
        assert_eq!(max.unwrap(), Some(u64::MAX));
        // Not digits, even past an overflow: not a counter, as it says.
        let error = read_value("c", &bulk("184467440737095516160x:abc1"), stamp).unwrap_err();
        assert_eq!(
            error.store_error().unwrap().to_string(),
            "`c` holds \"184467440737095516160x:abc1\", not a generation counter (a non-negative integer)"
        );
        let error = raised_value("c", &bulk("seven")).unwrap_err();
        assert!(error.store_error().unwrap().is::<NotACounter>(), "{error}");
        assert_eq!(raised_value("c", &bulk("0017")).unwrap(), 17);
    }

    #[test]
    fn counters_of_one_slot_go_together_and_an_unknown_instance_is_learned_first() {
        let counters = Counters::new("forge", Some("acme,rocket"), "issues");
        let source = CounterSource::new(Topology::Cluster, false);
        let mut exchange = CounterExchange::read(counters, &source);
        // namespace, {acme}, {acme,rocket} twice: three slots.
        assert_eq!(exchange.groups.len(), 3);
        assert_eq!(exchange.len(), 4);
        let mut batch = Batch::default();
        exchange.send(&mut batch);
        assert_eq!(batch.len(), 3);
        assert!(batch.commands().all(|command| {
            let mut args = command.args_iter();
            let eval = matches!(args.next(), Some(::redis::Arg::Simple(b"EVAL")));
            eval && matches!(args.next(), Some(::redis::Arg::Simple(s)) if s == INSTANCE_SCRIPT.as_bytes())
        }));

        let on_a_server =
            CounterExchange::read(counters, &CounterSource::new(Topology::Server, false));
        assert_eq!(on_a_server.groups.len(), 1);
    }

    #[test]
    fn an_instance_script_names_its_instance() {
        let (a, b) = (Epoch::new("aa"), Epoch::new("bb"));
        assert_ne!(a.sha, b.sha);
        assert!(a.code.starts_with("local epoch = 'aa'\n"));
        assert_eq!(a.sha, Epoch::new("aa").sha);
    }
}
