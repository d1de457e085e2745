//! [`RespConnection`]: a blocking connection to one Redis server that
//! speaks RESP2 on a socket of its own and parses each reply in place
//! (`redis::resp`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ::redis::io::tcp::{TcpSettings, socket2};
use ::redis::{
    ConnectionAddr, ConnectionInfo, ConnectionLike, RedisError, RedisResult, Value, cmd,
};

use crate::redis::resp::{self, ReadBuffer};
use crate::redis::timeouts::at_least_a_millisecond;

/// A connection to one server, RESP2, with the replies it read and has not
/// yet handed out. Any failure (I/O, a timeout, a reply it cannot read)
/// closes it: what is left on the socket is unknown.
pub(crate) struct RespConnection {
    stream: Stream,
    buffer: ReadBuffer,
    open: bool,
    db: i64,
    /// The socket's read and write timeout now.
    timeout: Duration,
}

enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

impl Stream {
    fn set_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Stream::Tcp(socket) => socket
                .set_read_timeout(Some(timeout))
                .and_then(|()| socket.set_write_timeout(Some(timeout))),
            #[cfg(unix)]
            Stream::Unix(socket) => socket
                .set_read_timeout(Some(timeout))
                .and_then(|()| socket.set_write_timeout(Some(timeout))),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(socket) => socket.read(buffer),
            #[cfg(unix)]
            Stream::Unix(socket) => socket.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(socket) => socket.write(bytes),
            #[cfg(unix)]
            Stream::Unix(socket) => socket.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(socket) => socket.flush(),
            #[cfg(unix)]
            Stream::Unix(socket) => socket.flush(),
        }
    }
}

impl RespConnection {
    /// Connects to the server `info` names within `connect` (each address
    /// the host resolves to in turn), then authenticates and selects the
    /// database as the URL says; reads and writes are then bounded by
    /// `call`.
    pub(crate) fn open(
        info: &ConnectionInfo,
        connect: Duration,
        call: Duration,
    ) -> RedisResult<RespConnection> {
        resp::check(info)?;
        let stream = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                Stream::Tcp(connect_tcp(host, *port, connect, info.tcp_settings())?)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
            _ => unreachable!("checked above"),
        };
        let mut connection = RespConnection {
            stream,
            buffer: ReadBuffer::new(),
            open: true,
            db: info.redis_settings().db(),
            timeout: connect,
        };
        connection.set_timeout(connect)?;
        for step in resp::handshake(info) {
            connection.send(&step.command.get_packed_command())?;
            step.judge(connection.receive()?)?;
        }
        connection.set_timeout(call)?;
        Ok(connection)
    }

    /// The socket's read and write timeout now.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bounds each read and write of the socket by `timeout` (a millisecond
    /// at least: a zero timeout would mean none).
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> RedisResult<()> {
        let timeout = at_least_a_millisecond(timeout);
        self.timeout = timeout;
        let set = self.stream.set_timeout(timeout);
        set.map_err(|error| self.fail(error))
    }

    /// Writes `packed`, commands as the crate packs them.
    pub(crate) fn send(&mut self, packed: &[u8]) -> RedisResult<()> {
        let written = self.stream.write_all(packed);
        written.map_err(|error| self.fail(error))
    }

    /// Shortens the socket's timeout to what is left until `deadline`
    /// when that is shorter by more than a millisecond (a call answered at
    /// once sets nothing); `false` when nothing is left.
    pub(crate) fn fit(&mut self, deadline: Instant) -> RedisResult<bool> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        if self.timeout > left + Duration::from_millis(1) {
            self.set_timeout(left)?;
        }
        Ok(true)
    }

    /// The next reply, an error reply as `Value::ServerError`, waiting on
    /// the socket at most its timeout.
    pub(crate) fn receive(&mut self) -> RedisResult<Value> {
        self.receive_within(None)
    }

    /// The next reply, each wait on the socket bounded by what is left
    /// until `deadline`; the clock is read only when the socket is (a
    /// reply already read costs none).
    pub(crate) fn receive_by(&mut self, deadline: Instant) -> RedisResult<Value> {
        self.receive_within(Some(deadline))
    }

    fn receive_within(&mut self, deadline: Option<Instant>) -> RedisResult<Value> {
        loop {
            match self.buffer.next() {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {
                    if let Some(deadline) = deadline
                        && !self.fit(deadline)?
                    {
                        return Err(self.fail(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the call's time bound passed between two replies",
                        )));
                    }
                    self.fill()?
                }
                Err(error) => {
                    self.open = false;
                    return Err(error);
                }
            }
        }
    }

    /// Reads what the socket has into the buffer.
    fn fill(&mut self) -> RedisResult<()> {
        let read = self.stream.read(self.buffer.room());
        self.buffer.filled(read).map_err(|error| self.fail(error))
    }

    /// `error`, the connection closed by it.
    fn fail(&mut self, error: io::Error) -> RedisError {
        self.open = false;
        RedisError::from(error)
    }
}

/// A TCP connection to `host`'s first address that accepts one within
/// `timeout`, with the URL's socket settings.
fn connect_tcp(
    host: &str,
    port: u16,
    timeout: Duration,
    settings: &TcpSettings,
) -> io::Result<TcpStream> {
    let mut last = None;
    for address in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(socket) => {
                resp::tcp_settings(socket2::SockRef::from(&socket), settings)?;
                return Ok(socket);
            }
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
    }))
}

/// Commands of your own on a pooled connection (what [`PooledConnection`]
/// forwards), with the `redis` crate's semantics for a connection that
/// never subscribes.
///
/// [`PooledConnection`]: super::PooledConnection
impl ConnectionLike for RespConnection {
    fn req_packed_command(&mut self, packed: &[u8]) -> RedisResult<Value> {
        self.send(packed)?;
        self.receive()
    }

    /// Every reply is read, so that the connection stays in step.
    fn req_packed_commands(
        &mut self,
        packed: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(packed)?;
        let all = (0..offset + count).map(|_| self.receive());
        resp::pipeline_replies(all.collect::<RedisResult<_>>()?, offset)
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}
