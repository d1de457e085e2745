//! [`Error`]: why the consumer stopped, or why a session ended.

use std::error::Error as StdError;
use std::fmt;

/// Why [`ChangeLog::run`](crate::ChangeLog::run) returned; the cause (the
/// column and why, PostgreSQL's message) is its [`source`](StdError::source)
/// only, so a chain printer shows each once.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    source: Option<Box<dyn StdError + Send + Sync>>,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A row change of this table the map could not read (its
    /// [`RowError`](crate::RowError) is the source: the column and why).
    Row {
        /// `schema.table`.
        table: String,
    },
    /// A change of a published table the map does not name.
    Unmapped(String),
    /// A `pgoutput` message that could not be decoded.
    Malformed,
    /// The publication exists but leaves out a mapped table.
    Publication(String),
    /// A name or map the consumer refuses.
    Config(String),
    /// PostgreSQL refused the login or its TLS.
    Login,
    /// The connection to PostgreSQL failed or was closed: retried by `run`.
    Postgres,
    /// The replication stream ended: retried by `run`.
    Ended,
    /// The consumer is gone.
    Stopped,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, source: Option<Box<dyn StdError + Send + Sync>>) -> Self {
        Error { kind, source }
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Whether another session may succeed: `run` retries these.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::Postgres | ErrorKind::Ended)
    }

    /// Whether a committed change was left unread: then every declared
    /// namespace is bumped before `run` returns.
    pub(crate) fn may_have_missed(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Row { .. } | ErrorKind::Unmapped(_) | ErrorKind::Malformed
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Row { table } => {
                write!(f, "a change of table `{table}` could not be mapped")
            }
            ErrorKind::Unmapped(table) => write!(
                f,
                "table `{table}` is published but not mapped: map it (`ChangeMap::table`) or \
                 drop it from the publication"
            ),
            ErrorKind::Malformed => write!(f, "the replication stream could not be decoded"),
            ErrorKind::Publication(why) | ErrorKind::Config(why) => f.write_str(why),
            ErrorKind::Login => write!(f, "PostgreSQL refused the replication login"),
            ErrorKind::Postgres => write!(f, "the replication connection failed"),
            ErrorKind::Ended => write!(f, "the replication stream ended"),
            ErrorKind::Stopped => write!(f, "the change log consumer is gone"),
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn StdError + 'static))
    }
}
