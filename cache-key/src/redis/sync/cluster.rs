//! [`ClusterConnections`]: the blocking pool's connection to a Redis
//! Cluster, which sends a batch in one round trip.
//!
//! The `redis` crate's blocking cluster pipeline (`ClusterPipeline`, 1.8)
//! writes every node's commands before it reads a reply, but an error
//! answered to one command fails the whole pipeline (the other replies are
//! lost), and it follows no `MOVED` or `ASK` (its reader returns them as
//! values, so its redirect branch never sees them). A batch is sent here
//! instead: each command to the primary that owns its key's slot, a node's
//! commands in one write, every node written to before any reply is read,
//! each reply kept as its command's. What that leaves (a redirect, a
//! `TRYAGAIN` or `CLUSTERDOWN`, a command without a key) goes through the
//! crate's cluster connection a command at a time, as it follows and
//! retries them.

use std::time::Duration;

use ::redis::cluster::ClusterConnection;
use ::redis::{
    Arg, Client, Cmd, Connection, ConnectionAddr, ConnectionInfo, ConnectionLike, RedisError,
    RedisResult, RetryMethod, Value,
};
use smallvec::SmallVec;

use crate::redis::batch::Replies;
use crate::redis::resp::raise_errors;
use crate::redis::sweep;
use crate::redis::timeouts::Timeouts;

/// A pooled connection to a cluster: the crate's, and one of this module's
/// to each primary a batch has gone to.
#[doc(hidden)]
pub struct ClusterConnections {
    /// The crate's connection: for what a batch does not send itself, the
    /// slot table, and commands of your own.
    pub(super) cluster: ClusterConnection,
    slots: Slots,
    /// What a node connection is made with: the first URL's settings
    /// (credentials, TLS), at the node's address.
    template: ConnectionInfo,
    timeouts: Timeouts,
    /// The read and write timeout node connections have now: the call's,
    /// or what is left of it on a later round trip.
    timeout: Duration,
    /// A batch failed on this connection. A node may still hold replies
    /// nobody read, so the pool drops it rather than give it out again.
    broken: bool,
}

/// Which primary owns each slot, from `CLUSTER SLOTS`, and a connection to
/// each once a batch goes there.
#[derive(Default)]
struct Slots {
    /// `(first, last, primary)`, sorted.
    ranges: Vec<(u16, u16, usize)>,
    primaries: Vec<Primary>,
    /// A `MOVED` was answered: the table is read again before the next batch.
    stale: bool,
}

struct Primary {
    info: ConnectionInfo,
    connection: Option<Connection>,
}

/// One node's share of a batch: its commands, packed, and where each reply goes.
struct NodeBatch {
    primary: usize,
    bytes: Vec<u8>,
    replies: SmallVec<[usize; 3]>,
    /// Its connection was found closed before any answer: the commands go
    /// through the crate's connection instead.
    closed: bool,
}

impl ClusterConnections {
    /// `cluster` with its slot table read; node connections are opened as
    /// batches need them.
    pub(super) fn new(
        cluster: ClusterConnection,
        template: ConnectionInfo,
        timeouts: Timeouts,
    ) -> RedisResult<Self> {
        let mut connections = ClusterConnections {
            cluster,
            slots: Slots::default(),
            template,
            timeout: timeouts.call(),
            timeouts,
            broken: false,
        };
        connections.read_slots()?;
        Ok(connections)
    }

    /// Whether the pool must drop this connection.
    pub(super) fn is_broken(&self) -> bool {
        self.broken || !self.cluster.is_open()
    }

    /// Sends `batch`, in one round trip unless a reply sends a command
    /// elsewhere. A failure of a connection (not a server's answer) fails
    /// the whole batch, and the pool then drops this connection.
    pub(super) fn send(&mut self, commands: &[Cmd]) -> Result<Replies, RedisError> {
        let sent = self.try_send(commands);
        self.broken |= sent.is_err();
        sent
    }

    /// Sets the read and write timeouts of every connection, the crate's
    /// and the nodes', and of those opened from now on.
    pub(super) fn set_timeouts(&mut self, timeout: Duration) -> RedisResult<()> {
        self.cluster.set_read_timeout(Some(timeout))?;
        self.cluster.set_write_timeout(Some(timeout))?;
        for primary in &mut self.slots.primaries {
            if let Some(connection) = &primary.connection {
                connection.set_read_timeout(Some(timeout))?;
                connection.set_write_timeout(Some(timeout))?;
            }
        }
        self.timeout = timeout;
        Ok(())
    }

    fn try_send(&mut self, commands: &[Cmd]) -> Result<Replies, RedisError> {
        if self.slots.stale {
            self.read_slots()?;
        }
        let mut replies: Replies = commands.iter().map(|_| Ok(Value::Nil)).collect();
        let (mut per_node, mut elsewhere) = self.place(commands);
        self.round_trip(&mut per_node, &mut replies)?;
        for share in per_node.iter().filter(|share| share.closed) {
            elsewhere.extend_from_slice(&share.replies);
        }
        self.resend(commands, &mut replies, &elsewhere)?;
        Ok(replies)
    }

    /// Each command packed into its primary's share; the places of those
    /// the table cannot place, for the crate's connection.
    fn place(&self, commands: &[Cmd]) -> (SmallVec<[NodeBatch; 3]>, SmallVec<[usize; 1]>) {
        let mut per_node: SmallVec<[NodeBatch; 3]> = SmallVec::new();
        let mut elsewhere = SmallVec::new();
        for (at, command) in commands.iter().enumerate() {
            let Some(primary) = key_of(command).and_then(|key| self.slots.owner(slot_of(key)))
            else {
                elsewhere.push(at);
                continue;
            };
            let share = match per_node.iter().position(|share| share.primary == primary) {
                Some(share) => share,
                None => {
                    per_node.push(NodeBatch {
                        primary,
                        bytes: Vec::with_capacity(256),
                        replies: SmallVec::new(),
                        closed: false,
                    });
                    per_node.len() - 1
                }
            };
            command.write_packed_command(&mut per_node[share].bytes);
            per_node[share].replies.push(at);
        }
        (per_node, elsewhere)
    }

    /// Writes every share to its node, then reads the replies: one round
    /// trip. A connection the server closed before answering (a restart, an
    /// idle timeout) marks its share `closed`, for the crate's connection,
    /// which connects again; any other failure fails the batch.
    fn round_trip(
        &mut self,
        per_node: &mut [NodeBatch],
        replies: &mut Replies,
    ) -> Result<(), RedisError> {
        for share in per_node.iter_mut() {
            let written = self
                .node(share.primary)
                .and_then(|node| node.send_packed_command(&share.bytes));
            if let Err(error) = written {
                share.closed = self.forget_closed(share.primary, error)?;
            }
        }
        for share in per_node.iter_mut().filter(|share| !share.closed) {
            let node = self.node(share.primary)?;
            for (read, &at) in share.replies.iter().enumerate() {
                match node.recv_response() {
                    Ok(reply) => replies[at] = raise_errors(reply),
                    Err(error) if read == 0 => {
                        share.closed = self.forget_closed(share.primary, error)?;
                        break;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(())
    }

    /// Through the crate's connection, a command at a time: a redirect it
    /// follows and a refusal it retries (neither ran the command), and the
    /// commands at `elsewhere`. Its server's answer is the command's reply.
    fn resend(
        &mut self,
        commands: &[Cmd],
        replies: &mut Replies,
        elsewhere: &[usize],
    ) -> Result<(), RedisError> {
        for (at, reply) in replies.iter_mut().enumerate() {
            let resend = match reply {
                Err(error) => match error.retry_method() {
                    RetryMethod::NoRetry => false,
                    RetryMethod::MovedRedirect => {
                        self.slots.stale = true;
                        true
                    }
                    _ => true,
                },
                Ok(_) => elsewhere.contains(&at),
            };
            if resend {
                *reply = match self.cluster.req_command(&commands[at]) {
                    // No server's answer: the connection failed.
                    Err(error) if error.code().is_none() => return Err(error),
                    reply => reply,
                };
            }
        }
        Ok(())
    }

    /// `true`, the connection to `primary` dropped, when `error` says the
    /// server closed it; otherwise `error`.
    fn forget_closed(&mut self, primary: usize, error: RedisError) -> Result<bool, RedisError> {
        if !error.is_connection_dropped() {
            return Err(error);
        }
        self.slots.primaries[primary].connection = None;
        Ok(true)
    }

    /// The connection to the table's `primary`, opened if it is not yet.
    fn node(&mut self, primary: usize) -> RedisResult<&mut Connection> {
        let primary = &mut self.slots.primaries[primary];
        let connection = match primary.connection.take() {
            Some(connection) => connection,
            None => {
                let connection = self.timeouts.open(&Client::open(primary.info.clone())?)?;
                connection.set_read_timeout(Some(self.timeout))?;
                connection.set_write_timeout(Some(self.timeout))?;
                connection
            }
        };
        Ok(primary.connection.insert(connection))
    }

    /// Reads the slot table again (`CLUSTER SLOTS`, through the crate's
    /// connection), keeping the connections to primaries still in it.
    fn read_slots(&mut self) -> RedisResult<()> {
        let (command, routing) = sweep::cluster_slots();
        let ranges: Vec<Vec<Value>> =
            ::redis::from_redis_value(self.cluster.route_command(&command, routing)?)?;
        let mut old = std::mem::take(&mut self.slots.primaries);
        let mut slots = Slots::default();
        for range in ranges {
            // [first, last, [host, port, id...], replicas...]
            let (Some(first), Some(last), Some(Value::Array(primary))) =
                (range.first(), range.get(1), range.get(2))
            else {
                continue;
            };
            let (Ok(first), Ok(last)) = (
                ::redis::from_redis_value_ref::<u16>(first),
                ::redis::from_redis_value_ref::<u16>(last),
            ) else {
                continue;
            };
            // A primary without an address of its own ("?", none) is left
            // to the crate's connection.
            let Some(info) = node_info(&self.template, primary) else {
                continue;
            };
            let at = match slots
                .primaries
                .iter()
                .position(|p| p.info.addr() == info.addr())
            {
                Some(at) => at,
                None => {
                    let kept = old.iter().position(|p| p.info.addr() == info.addr());
                    slots.primaries.push(match kept {
                        Some(kept) => old.swap_remove(kept),
                        None => Primary {
                            info,
                            connection: None,
                        },
                    });
                    slots.primaries.len() - 1
                }
            };
            slots.ranges.push((first, last, at));
        }
        slots.ranges.sort_unstable();
        self.slots = slots;
        Ok(())
    }
}

impl Slots {
    /// The primary owning `slot`, if the table has it.
    fn owner(&self, slot: u16) -> Option<usize> {
        let at = self.ranges.partition_point(|&(_, last, _)| last < slot);
        let &(first, _, primary) = self.ranges.get(at)?;
        (first <= slot).then_some(primary)
    }
}

/// The settings of `template` at the address of `node` (`[host, port, ...]`
/// in `CLUSTER SLOTS`), if it names one.
fn node_info(template: &ConnectionInfo, node: &[Value]) -> Option<ConnectionInfo> {
    let (Some(Value::BulkString(host)), Some(Value::Int(port))) = (node.first(), node.get(1))
    else {
        return None;
    };
    let host = std::str::from_utf8(host)
        .ok()
        .filter(|host| !host.is_empty() && *host != "?")?;
    let port = u16::try_from(*port).ok()?;
    let addr = match template.addr() {
        ConnectionAddr::Tcp(..) => ConnectionAddr::Tcp(host.to_owned(), port),
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => return None,
    };
    Some(template.clone().set_addr(addr))
}

/// The key a command of the protocol goes by: `EVAL` and `EVALSHA` name
/// their keys after the script and their count, `GET` and `SET` first.
/// Any other command (`SCRIPT FLUSH`) goes through the crate's connection.
fn key_of(command: &Cmd) -> Option<&[u8]> {
    let mut args = command.args_iter().map(|arg| match arg {
        Arg::Simple(arg) => Some(arg),
        _ => None,
    });
    let name = args.next()??;
    if name.eq_ignore_ascii_case(b"GET") || name.eq_ignore_ascii_case(b"SET") {
        return args.next()?;
    }
    if name.eq_ignore_ascii_case(b"EVAL") || name.eq_ignore_ascii_case(b"EVALSHA") {
        let _script = args.next()?;
        if args.next()?? == b"0" {
            return None;
        }
        return args.next()?;
    }
    None
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the text
/// between the first `{` and the next `}`, if not empty), or of the whole
/// key, modulo the 16384 slots.
fn slot_of(key: &[u8]) -> u16 {
    let tag = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tag.unwrap_or(key)) % 16384
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::redis::cluster_routing::Slot;

    #[test]
    fn a_key_has_the_slot_the_redis_crate_gives_it() {
        for key in [
            "",
            "library:g",
            "library:g:t{1}",
            "library:g:t{1}:search",
            "{user1000}.following",
            "foo{}{bar}",
            "foo{{bar}}zap",
            "foo{bar}{zap}",
            "{}",
            "}{",
        ] {
            assert_eq!(
                Slot::new(slot_of(key.as_bytes())),
                Some(Slot::for_key(key)),
                "{key:?}"
            );
        }
    }

    #[test]
    fn the_protocols_commands_go_by_their_first_key() {
        let get = ::redis::cmd("GET").arg("k1").take();
        let set = ::redis::cmd("SET")
            .arg("k2")
            .arg("v")
            .arg("PX")
            .arg(5)
            .take();
        let eval = ::redis::cmd("EVAL")
            .arg("return 1")
            .arg(1)
            .arg("k3")
            .arg("v")
            .take();
        let evalsha = ::redis::cmd("EVALSHA")
            .arg("abc")
            .arg(2)
            .arg("k4")
            .arg("k5")
            .arg("r")
            .take();
        let keyless = ::redis::cmd("EVAL").arg("return 1").arg(0).take();
        let flush = ::redis::cmd("SCRIPT").arg("FLUSH").take();
        let keys: Vec<Option<&[u8]>> = [&get, &set, &eval, &evalsha, &keyless, &flush]
            .into_iter()
            .map(key_of)
            .collect();
        let expected: [Option<&[u8]>; 6] = [
            Some(b"k1"),
            Some(b"k2"),
            Some(b"k3"),
            Some(b"k4"),
            None,
            None,
        ];
        assert_eq!(keys, expected);
    }

    #[test]
    fn a_slot_belongs_to_the_range_that_holds_it() {
        let slots = Slots {
            ranges: vec![(0, 5460, 0), (5461, 10922, 1), (10924, 16383, 2)],
            ..Slots::default()
        };
        let owners: Vec<Option<usize>> = [0, 5460, 5461, 10922, 10923, 10924, 16383]
            .into_iter()
            .map(|slot| slots.owner(slot))
            .collect();
        assert_eq!(
            owners,
            [Some(0), Some(0), Some(1), Some(1), None, Some(2), Some(2)]
        );
    }
}
