//! [`RespConnection`]: a blocking connection to one Redis server that
//! speaks RESP2 on a socket of its own and parses each reply in place, from
//! its own read buffer, with no `Read` adapter and no parser combinator in
//! between: the `redis` crate's blocking parser cost a small strict hit
//! more instructions than the value's own JSON (BENCHMARKS.md, "Redis
//! tier"). The crate still reads the URL, and any error reply (its
//! `ServerError` has no public constructor; an error reply is rare).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ::redis::io::tcp::{TcpSettings, socket2};
use ::redis::{
    ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, ProtocolVersion, RedisError,
    RedisResult, ServerErrorKind, Value, cmd,
};

use crate::redis::timeouts::at_least_a_millisecond;

/// Arrays nested deeper than this are refused, as the `redis` crate does.
const MAX_DEPTH: usize = 100;

/// The longest bulk string read: Redis's own default bound on one
/// (`proto-max-bulk-len`). A longer length is no reply this crate sent a
/// command for, and would size the buffer.
const MAX_BULK: usize = 512 * 1024 * 1024;

/// The read buffer's first size; it grows to hold the largest reply read.
const FIRST_BUFFER: usize = 16 * 1024;

/// A buffer grown past this is given back once it is empty again.
const KEPT_BUFFER: usize = 1024 * 1024;

/// A connection to one server, RESP2, with the replies it read and has not
/// yet handed out in `buffer[start..end]`. Any failure (I/O, a timeout, a
/// reply it cannot read) closes it: what is left on the socket is unknown.
pub(crate) struct RespConnection {
    stream: Stream,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
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
    /// Whether `info` names a server this connection can speak to; `Err`
    /// says what to change (a pool refuses such a URL when it is made).
    pub(crate) fn check(info: &ConnectionInfo) -> RedisResult<()> {
        if info.redis_settings().protocol() != ProtocolVersion::RESP2 {
            return Err(invalid_config(
                "a RedisPool's connections speak RESP2: remove `protocol=resp3` from the URL",
            ));
        }
        match info.addr() {
            ConnectionAddr::Tcp(..) => Ok(()),
            #[cfg(unix)]
            ConnectionAddr::Unix(_) => Ok(()),
            _ => Err(invalid_config(
                "a RedisPool connects to one server over TCP or a Unix socket, without TLS",
            )),
        }
    }

    /// Connects to the server `info` names within `connect` (each address
    /// the host resolves to in turn), then authenticates and selects the
    /// database as the URL says; reads and writes are then bounded by
    /// `call`.
    pub(crate) fn open(
        info: &ConnectionInfo,
        connect: Duration,
        call: Duration,
    ) -> RedisResult<RespConnection> {
        Self::check(info)?;
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
            buffer: vec![0; FIRST_BUFFER],
            start: 0,
            end: 0,
            open: true,
            db: info.redis_settings().db(),
            timeout: connect,
        };
        connection.set_timeout(connect)?;
        let settings = info.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            let () = auth.arg(password).query(&mut connection).map_err(|error| {
                RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "Redis refused the URL's credentials",
                    error.to_string(),
                ))
            })?;
        }
        if connection.db != 0 {
            let () = cmd("SELECT").arg(connection.db).query(&mut connection)?;
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
            match parse(&self.buffer[self.start..self.end]) {
                Ok(Parsed::Value(value, used)) => {
                    self.start += used;
                    if self.start == self.end {
                        (self.start, self.end) = (0, 0);
                        if self.buffer.len() > KEPT_BUFFER {
                            self.buffer = vec![0; FIRST_BUFFER];
                        }
                    }
                    return Ok(value);
                }
                Ok(Parsed::Incomplete(needed)) => {
                    if let Some(deadline) = deadline
                        && !self.fit(deadline)?
                    {
                        return Err(self.fail(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the call's time bound passed between two replies",
                        )));
                    }
                    self.fill(needed)?
                }
                Err(error) => {
                    self.open = false;
                    return Err(error);
                }
            }
        }
    }

    /// Reads what the socket has, with room for at least `needed` bytes
    /// of the reply begun at `start`.
    fn fill(&mut self, needed: usize) -> RedisResult<()> {
        // What is left is part of one reply: moved to the front, it takes
        // the room the replies before it took.
        if self.start > 0 {
            self.buffer.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let room = needed.max(self.end + 1);
        if self.buffer.len() < room {
            let grown = room.max(self.buffer.len() * 2);
            self.buffer.resize(grown, 0);
        }
        match self.stream.read(&mut self.buffer[self.end..]) {
            Ok(0) => Err(self.fail(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ))),
            Ok(read) => {
                self.end += read;
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(error) => Err(self.fail(error)),
        }
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
            Ok(socket) => return with_settings(socket, settings),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address"))
    }))
}

fn with_settings(socket: TcpStream, settings: &TcpSettings) -> io::Result<TcpStream> {
    socket.set_nodelay(settings.nodelay())?;
    let socket = socket2::Socket::from(socket);
    if let Some(keepalive) = settings.keepalive() {
        socket.set_tcp_keepalive(keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    socket.set_tcp_user_timeout(settings.user_timeout())?;
    Ok(socket.into())
}

fn invalid_config(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::InvalidClientConfig, what))
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

    /// Every reply is read, so that the connection stays in step. A
    /// command refused before `offset` (queued in a transaction) fails the
    /// call, with the `EXECABORT` that refused the transaction (the error
    /// kind the crate gives), or else the refusal itself.
    fn req_packed_commands(
        &mut self,
        packed: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(packed)?;
        let mut replies = Vec::with_capacity(count);
        let mut refused = None;
        for i in 0..offset + count {
            match self.receive()? {
                Value::ServerError(error) if i < offset => {
                    refused.get_or_insert(error);
                }
                _ if i < offset => {}
                reply => replies.push(reply),
            }
        }
        let Some(refused) = refused else {
            return Ok(replies);
        };
        let aborted = replies.iter().find_map(|reply| match reply {
            Value::ServerError(error) if error.kind() == Some(ServerErrorKind::ExecAbort) => {
                Some(error.clone())
            }
            _ => None,
        });
        Err(RedisError::from(aborted.unwrap_or(refused)))
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

/// What the start of a buffer holds.
#[derive(Debug, PartialEq)]
enum Parsed {
    /// A whole reply, and how many bytes it took.
    Value(Value, usize),
    /// Part of one: at least this many bytes make it whole.
    Incomplete(usize),
}

/// The reply at the start of `bytes`, if it is all there.
fn parse(bytes: &[u8]) -> RedisResult<Parsed> {
    let mut reader = Reader { bytes, at: 0 };
    match reader.value(1) {
        Ok(value) => Ok(Parsed::Value(value, reader.at)),
        Err(Stop::Incomplete(needed)) => Ok(Parsed::Incomplete(needed.max(bytes.len() + 1))),
        Err(Stop::Invalid(error)) => Err(error),
    }
}

/// Why a parse stopped short of a value.
enum Stop {
    /// The reply goes on past the bytes read: it needs at least this many.
    Incomplete(usize),
    Invalid(RedisError),
}

fn invalid(what: &'static str) -> Stop {
    Stop::Invalid(RedisError::from((
        ErrorKind::Parse,
        "Redis's reply could not be read",
        what.to_owned(),
    )))
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    /// The value at `at`, `depth` arrays deep.
    fn value(&mut self, depth: usize) -> Result<Value, Stop> {
        if depth > MAX_DEPTH {
            return Err(invalid("arrays nested too deep"));
        }
        let begun = self.at;
        let kind = *self.bytes.get(self.at).ok_or(Stop::Incomplete(0))?;
        self.at += 1;
        match kind {
            b'+' => {
                let line = self.line_str()?;
                Ok(match line {
                    "OK" => Value::Okay,
                    line => Value::SimpleString(line.to_owned()),
                })
            }
            b':' => Ok(Value::Int(self.integer()?)),
            b'$' => match self.integer()? {
                -1 => Ok(Value::Nil),
                length => {
                    let length = usize::try_from(length)
                        .map_err(|_| invalid("a negative length of a bulk string"))?;
                    if length > MAX_BULK {
                        return Err(invalid("a bulk string longer than 512 MiB"));
                    }
                    let end = self.at.saturating_add(length);
                    let bulk = self.bytes.get(self.at..end);
                    let crlf = self.bytes.get(end..end.saturating_add(2));
                    match (bulk, crlf) {
                        (Some(bulk), Some(b"\r\n")) => {
                            self.at = end + 2;
                            Ok(Value::BulkString(bulk.to_vec()))
                        }
                        (Some(_), Some(_)) => Err(invalid("a bulk string not ended by CRLF")),
                        _ => Err(Stop::Incomplete(end.saturating_add(2))),
                    }
                }
            },
            b'*' => match self.integer()? {
                -1 => Ok(Value::Nil),
                length => {
                    let length = usize::try_from(length)
                        .map_err(|_| invalid("a negative length of an array"))?;
                    // Each element takes 3 bytes at least: no more is
                    // reserved than the reply can fill.
                    let mut values = Vec::with_capacity(length.min(self.bytes.len() / 3));
                    for _ in 0..length {
                        values.push(self.value(depth + 1)?);
                    }
                    Ok(Value::Array(values))
                }
            },
            b'-' => {
                self.line()?;
                let line = &self.bytes[begun..self.at];
                ::redis::parse_redis_value(line).map_err(Stop::Invalid)
            }
            _ => Err(invalid("a reply type RESP2 does not have")),
        }
    }

    /// The line at `at`, without its CRLF, `at` moved past it.
    fn line(&mut self) -> Result<&'b [u8], Stop> {
        let rest = &self.bytes[self.at..];
        let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
            return Err(Stop::Incomplete(0));
        };
        if newline == 0 || rest[newline - 1] != b'\r' {
            return Err(invalid("a line not ended by CRLF"));
        }
        self.at += newline + 1;
        Ok(&rest[..newline - 1])
    }

    fn line_str(&mut self) -> Result<&'b str, Stop> {
        std::str::from_utf8(self.line()?).map_err(|_| invalid("a line that is not UTF-8"))
    }

    /// An integer line: up to 18 digits (a length, a counter) summed here,
    /// any other line read as the crate reads it (`str::parse` of the
    /// trimmed line).
    fn integer(&mut self) -> Result<i64, Stop> {
        let line = self.line()?;
        let (sign, digits) = match line {
            [b'-', digits @ ..] => (-1, digits),
            digits => (1, digits),
        };
        if (1..=18).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
            let sum = (digits.iter()).fold(0, |sum, &digit| sum * 10 + i64::from(digit - b'0'));
            return Ok(sign * sum);
        }
        let parsed = std::str::from_utf8(line)
            .ok()
            .and_then(|line| line.trim().parse().ok());
        parsed.ok_or_else(|| invalid("an integer expected"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies of every RESP2 kind, and nested ones.
    fn replies() -> Vec<Vec<u8>> {
        let mut replies: Vec<Vec<u8>> = [
            &b"+OK\r\n"[..],
            b"+PONG\r\n",
            b"+\r\n",
            b":0\r\n",
            b":-42\r\n",
            b":9223372036854775807\r\n",
            b":-9223372036854775808\r\n",
            b":+17\r\n",
            b":-0\r\n",
            b":123456789012345678\r\n",
            b":-1234567890123456789\r\n",
            b"$-1\r\n",
            b"$0\r\n\r\n",
            b"$5\r\nhe\r\no\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*3\r\n$1\r\n7\r\n$-1\r\n:3\r\n",
            b"*2\r\n*1\r\n+OK\r\n*2\r\n$2\r\nab\r\n-ERR inner\r\n",
            b"-ERR unknown command 'NOPE'\r\n",
            b"-NOSCRIPT No matching script\r\n",
            b"-MOVED 3999 127.0.0.1:6381\r\n",
            b"-READONLY You can't write against a read only replica.\r\n",
        ]
        .iter()
        .map(|reply| reply.to_vec())
        .collect();
        let mut large = b"$70000\r\n".to_vec();
        large.extend((0..70_000).map(|i| (i % 251) as u8));
        large.extend(b"\r\n");
        replies.push(large);
        replies
    }

    #[test]
    fn each_reply_reads_as_the_redis_crate_reads_it() {
        for reply in replies() {
            let expected = ::redis::parse_redis_value(&reply).unwrap();
            assert_eq!(
                parse(&reply).unwrap(),
                Parsed::Value(expected, reply.len()),
                "{:?}",
                String::from_utf8_lossy(&reply)
            );
        }
    }

    #[test]
    fn every_part_of_a_reply_asks_for_more_and_never_for_less_than_it_has() {
        for reply in replies() {
            for cut in 0..reply.len() {
                match parse(&reply[..cut]) {
                    Ok(Parsed::Incomplete(needed)) => {
                        assert!(needed > cut && needed <= reply.len(), "{cut}: {needed}")
                    }
                    other => panic!("{cut} bytes of {:?}: {other:?}", reply),
                }
            }
        }
    }

    #[test]
    fn replies_one_after_another_read_in_turn() {
        let replies = replies();
        let all: Vec<u8> = replies.concat();
        let mut at = 0;
        for reply in &replies {
            let Parsed::Value(value, used) = parse(&all[at..]).unwrap() else {
                panic!("incomplete at {at}");
            };
            assert_eq!(value, ::redis::parse_redis_value(reply).unwrap());
            assert_eq!(used, reply.len());
            at += used;
        }
        assert_eq!(at, all.len());
    }

    #[test]
    fn what_is_not_resp2_is_an_error_never_a_panic() {
        let bad: [&[u8]; 13] = [
            b"?x\r\n",
            b":12a\r\n",
            b":\r\n",
            b":-\r\n",
            b":9223372036854775808\r\n",
            b":1\n",
            b"$3\r\nabcd\r\n",
            b"$-2\r\n",
            b"*-5\r\n",
            b"$99999999999999999999\r\n",
            b"+\xff\xfe\r\n",
            b"%1\r\n+a\r\n+b\r\n",
            b"_\r\n",
        ];
        for reply in bad {
            assert!(
                parse(reply).is_err(),
                "{:?}",
                String::from_utf8_lossy(reply)
            );
        }
        let nested = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(parse(nested.as_bytes()).is_err());
        let deep_enough = "*1\r\n".repeat(MAX_DEPTH - 1) + ":1\r\n";
        assert!(matches!(
            parse(deep_enough.as_bytes()),
            Ok(Parsed::Value(..))
        ));
    }

    #[test]
    fn a_huge_announced_length_reserves_nothing_it_cannot_fill() {
        // An array's length reserves no more than the bytes read can fill:
        // more are read, or the call times out.
        assert!(matches!(
            parse(b"*9223372036854775807\r\n:1\r\n"),
            Ok(Parsed::Incomplete(_))
        ));
        // A bulk string's would size the buffer: past Redis's own bound,
        // it is an error.
        assert!(parse(b"$9223372036854775807\r\n").is_err());
        assert!(parse(format!("${}\r\n", MAX_BULK + 1).as_bytes()).is_err());
        assert_eq!(
            parse(format!("${MAX_BULK}\r\n").as_bytes()).unwrap(),
            Parsed::Incomplete(MAX_BULK + 2 + format!("${MAX_BULK}\r\n").len())
        );
    }
}
