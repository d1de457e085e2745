//! RESP2, as both drivers' connections to one server speak it: each reply
//! parsed in place from the connection's own read buffer, with no `Read`
//! adapter and no parser combinator in between (the `redis` crate's parsers
//! cost a small strict hit more instructions than the value's own JSON:
//! BENCHMARKS.md, "Redis tier"), and what opening one checks and sends.
//! The crate still reads the URL, and any error reply (its `ServerError`
//! has no public constructor; an error reply is rare).

use ::redis::io::tcp::{TcpSettings, socket2};
use ::redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, ProtocolVersion, RedisError, RedisResult,
    ServerErrorKind, Value, cmd,
};

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

/// What a connection read and has not yet handed out, `bytes[start..end]`:
/// whole replies, then the start of one. A connection reads into
/// [`room`](Self::room) and takes replies out with [`next`](Self::next).
pub(crate) struct ReadBuffer {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
    /// How many bytes from `start` make the next reply whole, at least.
    needed: usize,
}

impl ReadBuffer {
    pub(crate) fn new() -> Self {
        ReadBuffer {
            bytes: vec![0; FIRST_BUFFER],
            start: 0,
            end: 0,
            needed: 1,
        }
    }

    /// The next reply, an error reply as `Value::ServerError`, or `None`
    /// when more must be read first. `Err`: what was read is not RESP2 (the
    /// connection must not be used again).
    pub(crate) fn next(&mut self) -> RedisResult<Option<Value>> {
        match parse(&self.bytes[self.start..self.end])? {
            Parsed::Value(value, used) => {
                self.start += used;
                if self.start == self.end {
                    (self.start, self.end) = (0, 0);
                    if self.bytes.len() > KEPT_BUFFER {
                        self.bytes = vec![0; FIRST_BUFFER];
                    }
                }
                Ok(Some(value))
            }
            Parsed::Incomplete(needed) => {
                self.needed = needed;
                Ok(None)
            }
        }
    }

    /// Where to read to, after [`next`](Self::next) said more is needed:
    /// room for at least what it needed.
    pub(crate) fn room(&mut self) -> &mut [u8] {
        // What is left is part of one reply: moved to the front, it takes
        // the room the replies before it took.
        if self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        let room = self.needed.max(self.end + 1);
        if self.bytes.len() < room {
            let grown = room.max(self.bytes.len() * 2);
            self.bytes.resize(grown, 0);
        }
        &mut self.bytes[self.end..]
    }

    /// What a read into [`room`](Self::room) gave: the bytes counted in,
    /// an interrupted read as nothing read, and the end of the stream as
    /// the server closing the connection.
    pub(crate) fn filled(&mut self, read: std::io::Result<usize>) -> std::io::Result<()> {
        match read {
            Ok(0) => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )),
            Ok(read) => {
                self.end += read;
                Ok(())
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// A command that never changes, as a pipeline writes it: packed once.
#[derive(Debug)]
pub(crate) struct Fixed {
    packed: Vec<u8>,
}

impl Fixed {
    pub(crate) fn new(command: Cmd) -> Self {
        Fixed {
            packed: command.get_packed_command(),
        }
    }

    pub(crate) fn packed(&self) -> &[u8] {
        &self.packed
    }
}

/// Whether `info` names a server a connection of this crate can speak to;
/// `Err` says what to change (a pool refuses such a URL when it is made).
pub(crate) fn check(info: &ConnectionInfo) -> RedisResult<()> {
    if info.redis_settings().protocol() != ProtocolVersion::RESP2 {
        return Err(invalid_config(
            "a pool's connections to one server speak RESP2: remove `protocol=resp3` from the URL",
        ));
    }
    match info.addr() {
        ConnectionAddr::Tcp(..) => Ok(()),
        #[cfg(unix)]
        ConnectionAddr::Unix(_) => Ok(()),
        _ => Err(invalid_config(
            "a pool connects to one server over TCP or a Unix socket, without TLS",
        )),
    }
}

fn invalid_config(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::InvalidClientConfig, what))
}

/// What a connection sends when it opens, before any other command, in
/// order: `AUTH` with the URL's user and password, `SELECT` of its
/// database.
pub(crate) fn handshake(info: &ConnectionInfo) -> Vec<Handshake> {
    let settings = info.redis_settings();
    let mut steps = Vec::new();
    if let Some(password) = settings.password() {
        let mut auth = cmd("AUTH");
        if let Some(username) = settings.username() {
            auth.arg(username);
        }
        auth.arg(password);
        steps.push(Handshake {
            command: auth,
            auth: true,
        });
    }
    if settings.db() != 0 {
        let select = cmd("SELECT").arg(settings.db()).take();
        steps.push(Handshake {
            command: select,
            auth: false,
        });
    }
    steps
}

/// One command of a [`handshake`].
pub(crate) struct Handshake {
    pub(crate) command: Cmd,
    auth: bool,
}

impl Handshake {
    /// Its `reply`, as the error opening fails with if it is one.
    pub(crate) fn judge(&self, reply: Value) -> RedisResult<()> {
        match raise_errors(reply) {
            Ok(_) => Ok(()),
            Err(refused) if self.auth => Err(RedisError::from((
                ErrorKind::AuthenticationFailed,
                "Redis refused the URL's credentials",
                refused.to_string(),
            ))),
            Err(refused) => Err(refused),
        }
    }
}

/// The URL's socket settings on a TCP socket just connected.
pub(crate) fn tcp_settings(
    socket: socket2::SockRef<'_>,
    settings: &TcpSettings,
) -> std::io::Result<()> {
    socket.set_tcp_nodelay(settings.nodelay())?;
    if let Some(keepalive) = settings.keepalive() {
        socket.set_tcp_keepalive(keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    socket.set_tcp_user_timeout(settings.user_timeout())?;
    Ok(())
}

/// The replies of a pipeline of your own, `all` of them read so that the
/// connection stays in step, with the `redis` crate's semantics: the
/// replies from `offset` on; a command refused before `offset` (queued in
/// a transaction) fails the call, with the `EXECABORT` that refused the
/// transaction (the error kind the crate gives), or else the refusal
/// itself.
pub(crate) fn pipeline_replies(all: Vec<Value>, offset: usize) -> RedisResult<Vec<Value>> {
    let mut refused = None;
    let mut replies = Vec::with_capacity(all.len().saturating_sub(offset));
    for (i, reply) in all.into_iter().enumerate() {
        match reply {
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

/// `reply` as the `redis` crate's `Value::extract_error` gives it (an error
/// reply anywhere in it fails the whole reply), but a reply holding none,
/// nearly every one, is checked in place instead of rebuilt.
pub(crate) fn raise_errors(reply: Value) -> RedisResult<Value> {
    match holds_error(&reply) {
        true => reply.extract_error(),
        false => Ok(reply),
    }
}

/// Whether `value` is, or holds at any depth, an error reply: wherever
/// `Value::extract_error` looks.
fn holds_error(value: &Value) -> bool {
    match value {
        Value::ServerError(_) => true,
        Value::Array(values) | Value::Set(values) | Value::Push { data: values, .. } => {
            values.iter().any(holds_error)
        }
        Value::Map(pairs) => pairs
            .iter()
            .any(|(key, value)| holds_error(key) || holds_error(value)),
        Value::Attribute { data, attributes } => {
            holds_error(data)
                || (attributes.iter()).any(|(key, value)| holds_error(key) || holds_error(value))
        }
        _ => false,
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

    /// `raise_errors` gives what `Value::extract_error` gives, for replies
    /// with an error at every depth and in every kind that holds others.
    #[test]
    fn errors_are_raised_as_the_redis_crate_raises_them() {
        let error = || match parse(b"-ERR inner\r\n") {
            Ok(Parsed::Value(error, _)) => error,
            other => panic!("not an error reply: {other:?}"),
        };
        let bulk = |text: &str| Value::BulkString(text.as_bytes().to_vec());
        let values = [
            Value::Nil,
            bulk("7"),
            Value::Int(3),
            error(),
            Value::Array(vec![bulk("1"), Value::Nil, Value::Int(2)]),
            Value::Array(vec![bulk("1"), Value::Array(vec![Value::Okay, error()])]),
            Value::Set(vec![bulk("a"), error()]),
            Value::Map(vec![(bulk("k"), bulk("v"))]),
            Value::Map(vec![(bulk("k"), error())]),
            Value::Map(vec![(error(), bulk("v"))]),
            Value::Attribute {
                data: Box::new(bulk("d")),
                attributes: vec![(bulk("k"), error())],
            },
            Value::Attribute {
                data: Box::new(Value::Array(vec![error()])),
                attributes: vec![],
            },
            Value::Push {
                kind: ::redis::PushKind::Message,
                data: vec![bulk("x"), error()],
            },
        ];
        for value in values {
            let expected = format!("{:?}", value.clone().extract_error());
            let raised = format!("{:?}", raise_errors(value.clone()));
            assert_eq!(raised, expected, "{value:?}");
        }
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
