//! [`MuxConnection`]: the async pool's connection to one server, which
//! every task pipelines its calls on: a task writes the calls in the order
//! they came (those waiting together in one write), another reads the
//! replies in place from its buffer (`redis::resp`) and hands each call
//! its own, in the same order.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ::redis::{RedisError, RedisResult, Value};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::redis::future::resp::{AsyncRespConnection, Reader, WriteHalf};

/// A connection shared by every call on it (cloning it shares it). A call
/// dropped before its replies came leaves them to be read and dropped: the
/// connection stays in step. Once it failed (I/O, a reply it cannot read),
/// every call on it fails with that error.
#[derive(Clone)]
pub(crate) struct MuxConnection {
    shared: Arc<Shared>,
}

struct Shared {
    calls: mpsc::UnboundedSender<Call>,
    queue: Arc<Queue>,
    /// The writing and reading tasks, stopped when the last clone goes.
    tasks: [AbortHandle; 2],
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Commands packed, how many replies they get, and where they go.
struct Call {
    packed: Vec<u8>,
    count: usize,
    answer: oneshot::Sender<RedisResult<Vec<Value>>>,
}

/// The calls written and not yet answered, oldest first; or the error the
/// connection failed with.
#[derive(Default)]
struct Queue(Mutex<Waiting>);

#[derive(Default)]
struct Waiting {
    calls: VecDeque<Waiter>,
    failed: Option<RedisError>,
}

struct Waiter {
    count: usize,
    replies: Vec<Value>,
    answer: oneshot::Sender<RedisResult<Vec<Value>>>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        // Every change is made whole under the lock: a panic leaves none half-made.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `reply` is the next one the oldest call waits for.
    fn hand_out(&self, reply: Value) -> Result<(), RedisError> {
        let mut waiting = self.lock();
        let Some(call) = waiting.calls.front_mut() else {
            return Err(RedisError::from((
                ::redis::ErrorKind::Parse,
                "Redis sent a reply no command asked for",
            )));
        };
        call.replies.push(reply);
        if call.replies.len() == call.count {
            let call = waiting.calls.pop_front().expect("the front call");
            // A call dropped meanwhile no longer listens.
            let _ = call.answer.send(Ok(call.replies));
        }
        Ok(())
    }

    /// The connection failed with `error`: every call waiting, and every
    /// later one, fails with it.
    fn fail(&self, error: RedisError) {
        let mut waiting = self.lock();
        for call in waiting.calls.drain(..) {
            let _ = call.answer.send(Err(error.clone()));
        }
        waiting.failed.get_or_insert(error);
    }
}

impl MuxConnection {
    /// `connection`, opened and handshaken, shared from now on; its tasks
    /// run on `runtime`.
    pub(crate) fn new(connection: AsyncRespConnection, runtime: &Handle) -> MuxConnection {
        let (calls, received) = mpsc::unbounded_channel();
        let queue = Arc::new(Queue::default());
        let (reader, writer) = connection.split();
        let tasks = [
            runtime
                .spawn(write(writer, received, queue.clone()))
                .abort_handle(),
            runtime.spawn(read(reader, queue.clone())).abort_handle(),
        ];
        MuxConnection {
            shared: Arc::new(Shared {
                calls,
                queue,
                tasks,
            }),
        }
    }

    /// Writes `packed` (commands that get `count` replies) after every call
    /// before it, and waits for its replies, error replies among them as
    /// `Value::ServerError`.
    pub(crate) async fn call(&self, packed: Vec<u8>, count: usize) -> RedisResult<Vec<Value>> {
        let (answer, answered) = oneshot::channel();
        let call = Call {
            packed,
            count,
            answer,
        };
        if self.shared.calls.send(call).is_err() {
            return Err(self.failure());
        }
        answered.await.unwrap_or_else(|_| Err(self.failure()))
    }

    /// [`call`](Self::call) of one command: its reply.
    pub(crate) async fn call_one(&self, packed: Vec<u8>) -> RedisResult<Value> {
        let replies = self.call(packed, 1).await?;
        // A call of one command gets one reply.
        Ok(replies.into_iter().next().unwrap_or(Value::Nil))
    }

    /// Whether the connection failed: no call on it can succeed.
    pub(crate) fn is_failed(&self) -> bool {
        self.shared.queue.lock().failed.is_some()
    }

    fn failure(&self) -> RedisError {
        let failed = self.shared.queue.lock().failed.clone();
        failed.unwrap_or_else(|| {
            RedisError::from(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection to Redis was closed",
            ))
        })
    }
}

/// Writes the calls as they come, those waiting together in one write, each
/// queued for its replies before its bytes go. Ends when the connection
/// failed or its last clone went.
async fn write(mut half: WriteHalf, mut calls: mpsc::UnboundedReceiver<Call>, queue: Arc<Queue>) {
    let mut bytes = Vec::new();
    while let Some(first) = calls.recv().await {
        bytes.clear();
        {
            let mut waiting = queue.lock();
            if waiting.failed.is_some() {
                // Dropped, the calls' senders answer them: failed.
                return;
            }
            let mut next = Some(first);
            while let Some(call) = next {
                bytes.extend_from_slice(&call.packed);
                waiting.calls.push_back(Waiter {
                    count: call.count,
                    replies: Vec::with_capacity(call.count),
                    answer: call.answer,
                });
                next = calls.try_recv().ok();
            }
        }
        if let Err(error) = half.write_all(&bytes).await {
            queue.fail(error.into());
            return;
        }
        if bytes.capacity() > KEPT_WRITES {
            bytes = Vec::new();
        }
    }
}

/// A write buffer a large call grew past this is given back after it.
const KEPT_WRITES: usize = 1024 * 1024;

/// Reads the replies and hands each to the oldest call waiting, until the
/// connection fails (the server closed it, or sent what is not RESP2).
async fn read(mut reader: Reader, queue: Arc<Queue>) {
    let failure = loop {
        let handed = match reader.receive().await {
            Ok(reply) => queue.hand_out(reply),
            Err(error) => Err(error),
        };
        if let Err(error) = handed {
            break error;
        }
    };
    queue.fail(failure);
}
