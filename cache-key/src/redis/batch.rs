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
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// A read's counters, their checks and its entry: four commands on a
    /// server (`MGET`, `CLIENT GETNAME`, `WAIT`, `GET`), three on a cluster
    /// (the namespace's slot, the tenant's, the key's). A command that never
    /// changes is borrowed, packed once, not made again for each batch.
    commands: SmallVec<[Command; 4]>,
}

#[derive(Debug)]
enum Command {
    Made(Cmd),
    Fixed(&'static Fixed),
}

impl Batch {
    /// Adds `command`; where its reply will be.
    pub(crate) fn push(&mut self, command: Cmd) -> usize {
        self.commands.push(Command::Made(command));
        self.commands.len() - 1
    }

    /// Adds a command that never changes; where its reply will be.
    pub(crate) fn push_fixed(&mut self, command: &'static Fixed) -> usize {
        self.commands.push(Command::Fixed(command));
        self.commands.len() - 1
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.commands.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn commands(&self) -> impl Iterator<Item = &Cmd> {
        self.commands.iter().map(|command| match command {
            Command::Made(command) => command,
            Command::Fixed(fixed) => fixed.command(),
        })
    }

    pub(crate) fn into_commands(self) -> impl Iterator<Item = Cmd> {
        self.commands.into_iter().map(|command| match command {
            Command::Made(command) => command,
            Command::Fixed(fixed) => fixed.command().clone(),
        })
    }

    /// The commands as one pipeline to a server writes them, and how many
    /// replies they get.
    pub(crate) fn packed(&self) -> (Vec<u8>, usize) {
        let mut bytes = Vec::with_capacity(64 * self.commands.len());
        for command in &self.commands {
            match command {
                Command::Made(command) => command.write_packed_command(&mut bytes),
                Command::Fixed(fixed) => bytes.extend_from_slice(fixed.packed()),
            }
        }
        (bytes, self.commands.len())
    }
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
