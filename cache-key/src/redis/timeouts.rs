//! [`Timeouts`]: how long a Redis round trip may take before it is an error.

use std::time::Duration;

/// How long connecting to Redis, and waiting on a command, may take before
/// the call is an error (which a cache turns into going to the origin, never
/// into a hang). On by default:
///
/// | timeout | default | what it bounds |
/// | --- | --- | --- |
/// | `connect` | 1 s | opening a connection (and, for the sync pool, waiting for a free one) |
/// | `read` | 500 ms | waiting for a reply |
/// | `write` | 500 ms | sending a command (the sync pool; async connections bound the whole round trip by `read`) |
///
/// A server stopped by `SIGSTOP` or in a long `DEBUG SLEEP` still accepts
/// connections (the kernel completes them), so what bounds a call to it is
/// `read`.
///
/// ```
/// use std::time::Duration;
/// use cache_key::redis::Timeouts;
///
/// let timeouts = Timeouts::default().read(Duration::from_millis(100));
/// assert_eq!(timeouts.read_timeout(), Duration::from_millis(100));
/// assert_eq!(timeouts.connect_timeout(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    connect: Duration,
    read: Duration,
    write: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(1),
            read: Duration::from_millis(500),
            write: Duration::from_millis(500),
        }
    }
}

impl Timeouts {
    /// Sets the connect timeout (at least 1 ms).
    pub fn connect(mut self, timeout: Duration) -> Self {
        self.connect = at_least_a_millisecond(timeout);
        self
    }

    /// Sets the read timeout (at least 1 ms).
    pub fn read(mut self, timeout: Duration) -> Self {
        self.read = at_least_a_millisecond(timeout);
        self
    }

    /// Sets the write timeout (at least 1 ms).
    pub fn write(mut self, timeout: Duration) -> Self {
        self.write = at_least_a_millisecond(timeout);
        self
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> Duration {
        self.read
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> Duration {
        self.write
    }

    /// A blocking connection to `client`'s server, opened, read and written
    /// within these timeouts.
    pub(crate) fn open(
        &self,
        client: &::redis::Client,
    ) -> ::redis::RedisResult<::redis::Connection> {
        let connection = client.get_connection_with_timeout(self.connect)?;
        connection.set_read_timeout(Some(self.read))?;
        connection.set_write_timeout(Some(self.write))?;
        Ok(connection)
    }
}

/// `redis` refuses a zero timeout (it would mean "none").
fn at_least_a_millisecond(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(1))
}
