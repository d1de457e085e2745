//! The protocol's boundary with I/O: the commands a step sends together, and
//! the replies the driver hands back, one per command, in order.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use ::redis::{Cmd, RedisResult, Value};
use smallvec::SmallVec;

use super::instance::Instance;
use super::resp::Fixed;
use crate::cache::BackendError;

/// Commands the protocol sends together. A driver sends them as one pipeline
/// to a single server. On a cluster each command goes to the primary of its
/// first key's slot (the protocol groups counters so that every command
/// touches one slot; `SCRIPT FLUSH`, without a key, goes to every primary):
/// the blocking driver sends one pipeline per primary, all written before
/// any reply is read; the async driver each command on its own, concurrently.
///
/// A read's batch holds four commands on a server (`MGET`, `CLIENT
/// GETNAME`, `WAIT`, `GET`), three on a cluster (the namespace's slot, the
/// tenant's, the key's). Each is written packed, as a pipeline to a server
/// sends it, when it is added: the batch is the bytes a server is sent, with
/// no `redis::Cmd` made for a read's own commands; a cluster's commands are
/// made from those bytes ([`into_commands`](Self::into_commands)).
#[derive(Debug, Default)]
pub(crate) struct Batch {
    packed: Vec<u8>,
    /// Where each command ends in `packed`.
    ends: SmallVec<[usize; 4]>,
}

impl Batch {
    /// Adds `command`; where its reply will be.
    pub(crate) fn push(&mut self, command: Cmd) -> usize {
        self.room(64);
        command.write_packed_command(&mut self.packed);
        self.added()
    }

    /// Adds a command that never changes, packed once; where its reply
    /// will be.
    pub(crate) fn push_fixed(&mut self, command: &'static Fixed) -> usize {
        self.room(command.packed().len());
        self.packed.extend_from_slice(command.packed());
        self.added()
    }

    /// Adds the command `name` with `args`, written straight in its packed
    /// form; where its reply will be.
    pub(crate) fn push_args<'a>(
        &mut self,
        name: &'a str,
        args: impl ExactSizeIterator<Item = &'a str> + Clone,
    ) -> usize {
        self.room(16 + name.len() + args.clone().map(|arg| 16 + arg.len()).sum::<usize>());
        let mut digits = itoa::Buffer::new();
        self.packed.push(b'*');
        let count = args.len() + 1;
        self.packed
            .extend_from_slice(digits.format(count).as_bytes());
        self.packed.extend_from_slice(b"\r\n");
        for arg in std::iter::once(name).chain(args) {
            self.packed.push(b'$');
            self.packed
                .extend_from_slice(digits.format(arg.len()).as_bytes());
            self.packed.extend_from_slice(b"\r\n");
            self.packed.extend_from_slice(arg.as_bytes());
            self.packed.extend_from_slice(b"\r\n");
        }
        self.added()
    }

    /// Room for `bytes` more; the first command makes room for a read's
    /// four, so that they are written without growing the buffer.
    fn room(&mut self, bytes: usize) {
        if self.packed.capacity() - self.packed.len() < bytes {
            self.packed.reserve(bytes.max(FIRST_ROOM));
        }
    }

    fn added(&mut self) -> usize {
        self.ends.push(self.packed.len());
        self.ends.len() - 1
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn commands(&self) -> impl Iterator<Item = Cmd> {
        self.each_packed().map(unpack)
    }

    /// Each command's packed bytes, in order.
    fn each_packed(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| &self.packed[start..end])
    }

    /// The commands as the `redis` crate makes them (a cluster routes each
    /// by its first key).
    pub(crate) fn into_commands(self) -> impl Iterator<Item = Cmd> {
        self.each_packed()
            .map(unpack)
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The commands as one pipeline to a server writes them, and how many
    /// replies they get.
    pub(crate) fn packed(self) -> (Vec<u8>, usize) {
        (self.packed, self.ends.len())
    }
}

/// A read's four commands packed, with room for long keys: some 250 bytes
/// for a key of 60.
const FIRST_ROOM: usize = 512;

/// The command whose packed form `packed` is, as [`Batch`] writes one: an
/// array of bulk strings. (Bytes of another shape, which a batch never
/// holds, end the arguments where they stop being one.)
fn unpack(packed: &[u8]) -> Cmd {
    let mut command = Cmd::new();
    let Some((count, mut rest)) = header(packed, b'*') else {
        return command;
    };
    for _ in 0..count {
        let Some((len, after)) = header(rest, b'$') else {
            break;
        };
        // Taken by its length: an argument may hold `\r\n`.
        let Some(arg) = after.get(..len) else { break };
        command.arg(arg);
        rest = after.get(len + 2..).unwrap_or_default();
    }
    command
}

/// `<kind><digits>\r\n` at the start of `bytes`: the number, and what
/// follows it.
fn header(bytes: &[u8], kind: u8) -> Option<(usize, &[u8])> {
    let end = bytes.windows(2).position(|pair| pair == b"\r\n")?;
    let digits = bytes[..end].strip_prefix(&[kind])?;
    let number = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((number, &bytes[end + 2..]))
}

/// The replies to a [`Batch`], one per command in its order: a value, or the
/// error the server answered that command with (a driver's own failure, a
/// broken connection or a timeout, fails the whole batch instead).
pub(crate) type Replies = Vec<RedisResult<Value>>;

/// The replies to a [`Batch`], and the server process the connection they
/// came on learned when it opened (its instance id): what the counters' plain
/// read judges their stamps against, once the read checked the connection
/// still reaches it.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    pub(crate) replies: Replies,
    pub(crate) instance: Option<Arc<Instance>>,
}

impl Answers {
    /// `replies` from a connection whose instance is not known.
    pub(crate) fn unverified(replies: Replies) -> Self {
        Answers {
            replies,
            instance: None,
        }
    }
}

impl Deref for Answers {
    type Target = Replies;

    fn deref(&self) -> &Replies {
        &self.replies
    }
}

impl DerefMut for Answers {
    fn deref_mut(&mut self) -> &mut Replies {
        &mut self.replies
    }
}

impl IntoIterator for Answers {
    type Item = RedisResult<Value>;
    type IntoIter = std::vec::IntoIter<RedisResult<Value>>;

    fn into_iter(self) -> Self::IntoIter {
        self.replies.into_iter()
    }
}

/// What a driver hands back for a [`Batch`]: its answers, or why it could
/// not send the batch or have them (unreachable, timed out, circuit open).
pub(crate) type Sent = Result<Answers, BackendError>;

/// Whether `reply` is the server's error `code` (`NOSCRIPT`, `WRONGTYPE`...).
pub(crate) fn is_error(reply: &RedisResult<Value>, code: &str) -> bool {
    matches!(reply, Err(error) if error.code() == Some(code))
}

/// One exchange of the protocol: what it sends next, and what the replies
/// mean. A driver sends [`send`](Self::send)'s batch and hands the replies
/// (or its own failure) to [`receive`](Self::receive) until it answers.
pub(crate) trait Exchange {
    type Output;

    /// Adds this step's commands to `batch`.
    fn send(&mut self, batch: &mut Batch);

    /// Judges the replies to the batch; `None` when there is a next step.
    fn receive(&mut self, replies: Sent) -> Option<Self::Output>;
}

#[cfg(test)]
mod tests {
    use ::redis::cmd;

    use super::*;

    #[test]
    fn a_command_written_straight_is_packed_as_the_redis_crate_packs_it() {
        let mut batch = Batch::default();
        let keys = ["a", "", "line\r\nbreak", "ünï"];
        assert_eq!(batch.push_args("MGET", keys.iter().copied()), 0);
        assert_eq!(batch.push(cmd("SET").arg("k").arg(b"v\r\n").take()), 1);
        let mut made = cmd("MGET");
        for key in keys {
            made.arg(key);
        }
        let mut expected = made.get_packed_command();
        expected.extend(cmd("SET").arg("k").arg(b"v\r\n").get_packed_command());
        assert_eq!(batch.packed(), (expected, 2));
    }

    #[test]
    fn a_clusters_commands_are_made_again_from_their_bytes() {
        let made = [
            cmd("MGET").arg("a").arg("").arg("line\r\nbreak").take(),
            cmd("EVAL").arg("return 1").arg(0).take(),
            cmd("SCRIPT").arg("FLUSH").take(),
        ];
        let mut batch = Batch::default();
        batch.push_args("MGET", ["a", "", "line\r\nbreak"].into_iter());
        batch.push(made[1].clone());
        batch.push(made[2].clone());
        let packed: Vec<_> = batch
            .into_commands()
            .map(|c| c.get_packed_command())
            .collect();
        let expected: Vec<_> = made.iter().map(Cmd::get_packed_command).collect();
        assert_eq!(packed, expected);
    }
}
