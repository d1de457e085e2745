//! [`Timeouts`]: how long a call may wait on Redis before it is an error.

use std::time::{Duration, Instant};

/// How long a call may wait on Redis before it is an error (a
/// [`BackendError`](crate::cache::BackendError) of kind `Timeout` that says
/// which bound passed), never a hang. On by default:
///
/// | timeout | default | what it bounds |
/// | --- | --- | --- |
/// | `call` | 500 ms | all the Redis work of one call, whatever its number of round trips and replies: connecting, waiting for a free connection, sending, reading |
/// | `connect` | 1 s | opening one connection (within a call, also the call's bound) |
///
/// A call is one cache or store operation: a `get`, an `insert`, an
/// `invalidate`, a counter read. A `get_or_load` is bounded twice: its read
/// before the origin, then its write after (the origin's own time and a
/// wait on another caller's load are not Redis's). A server stopped by
/// `SIGSTOP` or in a long `DEBUG SLEEP` still accepts connections (the
/// kernel completes them), so what bounds a call to it is `call`.
///
/// ```
/// use std::time::Duration;
/// use cache_key::redis::Timeouts;
///
/// let timeouts = Timeouts::default().with_call(Duration::from_millis(100));
/// assert_eq!(timeouts.call(), Duration::from_millis(100));
/// assert_eq!(timeouts.connect(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    connect: Duration,
    call: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(1),
            call: Duration::from_millis(500),
        }
    }
}

impl Timeouts {
    /// Sets the connect timeout (at least 1 ms).
    pub fn with_connect(mut self, timeout: Duration) -> Self {
        self.connect = at_least_a_millisecond(timeout);
        self
    }

    /// Sets the call timeout (at least 1 ms).
    pub fn with_call(mut self, timeout: Duration) -> Self {
        self.call = at_least_a_millisecond(timeout);
        self
    }

    /// The connect timeout.
    pub fn connect(&self) -> Duration {
        self.connect
    }

    /// The call timeout.
    pub fn call(&self) -> Duration {
        self.call
    }

    /// When a call starting now must be done.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + self.call
    }

    /// A blocking connection to `client`'s server, opened within the
    /// connect timeout, read and written within the call timeout.
    pub(crate) fn open(
        &self,
        client: &::redis::Client,
    ) -> ::redis::RedisResult<::redis::Connection> {
        let connection = client.get_connection_with_timeout(self.connect)?;
        connection.set_read_timeout(Some(self.call))?;
        connection.set_write_timeout(Some(self.call))?;
        Ok(connection)
    }
}

/// `redis` refuses a zero timeout (it would mean "none").
pub(crate) fn at_least_a_millisecond(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(1))
}
