//! [`AsyncRespConnection`]: a connection to one server opened by the async
//! pool: RESP2 on a tokio socket of its own, each reply parsed in place
//! (`redis::resp`), as the blocking pool's connection does; once it is
//! handshaken and its server learned, its halves go to a
//! [`MuxConnection`](super::mux::MuxConnection).

use std::io;

use ::redis::io::tcp::socket2;
use ::redis::{Cmd, ConnectionAddr, ConnectionInfo, Pipeline, RedisFuture, RedisResult, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;
use tokio::net::tcp;
#[cfg(unix)]
use tokio::net::unix;

use crate::redis::resp::{self, ReadBuffer};

/// A connection to one server, RESP2, with the replies it read and has not
/// yet handed out. It bounds no wait itself: its caller does. A failure, or
/// a call dropped before it finished, leaves what is on the socket unknown:
/// the connection is dropped then. Its socket is split in two from the
/// start, so that a [`MuxConnection`](super::mux::MuxConnection) can read
/// and write at once.
pub(crate) struct AsyncRespConnection {
    reader: Reader,
    writer: WriteHalf,
    db: i64,
}

/// The reading half of a connection, and the replies it read and has not
/// handed out.
pub(crate) struct Reader {
    half: ReadHalf,
    buffer: ReadBuffer,
}

enum ReadHalf {
    Tcp(tcp::OwnedReadHalf),
    #[cfg(unix)]
    Unix(unix::OwnedReadHalf),
}

impl Reader {
    /// The next reply, an error reply as `Value::ServerError`.
    pub(crate) async fn receive(&mut self) -> RedisResult<Value> {
        loop {
            if let Some(value) = self.buffer.next()? {
                return Ok(value);
            }
            let room = self.buffer.room();
            let read = match &mut self.half {
                ReadHalf::Tcp(half) => half.read(room).await,
                #[cfg(unix)]
                ReadHalf::Unix(half) => half.read(room).await,
            };
            self.buffer.filled(read)?;
        }
    }
}

/// The writing half of a connection.
pub(crate) enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    #[cfg(unix)]
    Unix(unix::OwnedWriteHalf),
}

impl WriteHalf {
    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            WriteHalf::Tcp(half) => half.write_all(bytes).await,
            #[cfg(unix)]
            WriteHalf::Unix(half) => half.write_all(bytes).await,
        }
    }
}

impl AsyncRespConnection {
    /// Its two halves, the replies read and not handed out with the first.
    pub(crate) fn split(self) -> (Reader, WriteHalf) {
        (self.reader, self.writer)
    }

    /// Connects to the server `info` names (each address the host resolves
    /// to in turn), then authenticates and selects the database as the URL
    /// says.
    pub(crate) async fn open(info: &ConnectionInfo) -> RedisResult<AsyncRespConnection> {
        resp::check(info)?;
        let (half, writer) = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let socket = TcpStream::connect((host.as_str(), *port)).await?;
                resp::tcp_settings(socket2::SockRef::from(&socket), info.tcp_settings())?;
                let (read, write) = socket.into_split();
                (ReadHalf::Tcp(read), WriteHalf::Tcp(write))
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let (read, write) = UnixStream::connect(path).await?.into_split();
                (ReadHalf::Unix(read), WriteHalf::Unix(write))
            }
            _ => unreachable!("checked above"),
        };
        let mut connection = AsyncRespConnection {
            reader: Reader {
                half,
                buffer: ReadBuffer::new(),
            },
            writer,
            db: info.redis_settings().db(),
        };
        for step in resp::handshake(info) {
            connection.send(&step.command.get_packed_command()).await?;
            step.judge(connection.receive().await?)?;
        }
        Ok(connection)
    }

    /// Writes `packed`, commands as the crate packs them.
    pub(crate) async fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        Ok(self.writer.write_all(packed).await?)
    }

    /// The next reply, an error reply as `Value::ServerError`.
    pub(crate) async fn receive(&mut self) -> RedisResult<Value> {
        self.reader.receive().await
    }
}

/// Commands of your own, with the `redis` crate's semantics for a
/// connection that never subscribes.
impl ::redis::aio::ConnectionLike for AsyncRespConnection {
    fn req_packed_command<'a>(&'a mut self, command: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.send(&command.get_packed_command()).await?;
            self.receive().await
        })
    }

    /// Every reply is read, so that the connection stays in step.
    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.send(&pipeline.get_packed_pipeline()).await?;
            let mut all = Vec::with_capacity(offset + count);
            for _ in 0..offset + count {
                all.push(self.receive().await?);
            }
            resp::pipeline_replies(all, offset)
        })
    }

    fn get_db(&self) -> i64 {
        self.db
    }
}
