//! [`ChangeMap`]: which scopes a committed row change ends, declared once
//! per table with the typed scopes of the query types
//! (`Title::tag_scope_book`, `BranchList::tenant_scope`), so that a wrong
//! value type does not compile and a wrong column is an error naming it.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use cache_key::{CacheKey, GenerationError, GenerationScope};

use crate::pgoutput::{Column, Old, Value};

/// What a row change reads its scopes from: called once per row image (an
/// INSERT's new row, a DELETE's old row, an UPDATE's old and new rows).
pub(crate) type RowScopes = dyn Fn(&Row<'_>, &mut Bumps) -> Result<(), RowError> + Send + Sync;

/// The mapping from tables to the scopes their changes end.
///
/// ```
/// use cache_key::{CacheKey, CacheTags, Scopes};
/// use cache_key_pg::ChangeMap;
///
/// #[derive(Clone, CacheTags)]
/// struct Title { #[tag = "book"] id: u32, title: String }
///
/// #[derive(CacheKey)]
/// #[cache_key(namespace = "library", operation = "search", value = Vec<Title>, ttl = "10m", value_tags)]
/// struct Search<'a> { #[tenant] branch: u32, #[criterion] title: &'a str }
///
/// // A row of `books` is the entity `book` = `books.id` inside the tenant
/// // `books.branch`, and ends that branch's searches' answers holding it.
/// let map = ChangeMap::new()
///     .namespace::<Search>()
///     .table("books", |row, bumps| {
///         let branch = row.get::<u32>("branch")?;
///         bumps.push(Title::tag_scope_book::<Search>(&branch, &row.get::<u32>("id")?)?);
///         Ok(())
///     })?;
/// assert_eq!(map.tables().collect::<Vec<_>>(), ["public.books"]);
/// # Ok::<(), cache_key_pg::MapError>(())
/// ```
#[derive(Clone, Default)]
pub struct ChangeMap {
    tables: HashMap<String, Arc<RowScopes>>,
    /// In declaration order, each once.
    namespaces: Vec<GenerationScope>,
}

impl fmt::Debug for ChangeMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeMap")
            .field("tables", &self.tables.keys().collect::<Vec<_>>())
            .field("namespaces", &self.namespaces)
            .finish()
    }
}

impl ChangeMap {
    /// A map of no table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares `Q`'s namespace as holding answers read from the mapped
    /// tables: bumped whole when a change may have been missed (the slot was
    /// lost or made anew, a table truncated, a transaction too large to
    /// list its scopes, a change the map could not read). Declare every
    /// namespace the tables' scopes are in: one left out is not ended then.
    #[must_use]
    pub fn namespace<Q: CacheKey + ?Sized>(mut self) -> Self {
        let scope = GenerationScope::namespace::<Q>();
        if !self.namespaces.contains(&scope) {
            self.namespaces.push(scope);
        }
        self
    }

    /// Maps `table` (`books`, in the `public` schema, or `schema.table`):
    /// `scopes` pushes the scopes a row of it ends, for every row image a
    /// change has (both rows of an UPDATE, so that a moved tag ends its old
    /// entity and its new one).
    ///
    /// An inserted row's tag makes its counter, so the entity's first fill
    /// is served; but no answer cached before holds that tag: answers that
    /// would now list the row (a search, a page) need a scope of their own,
    /// pushed when [`Row::image`] is [`Image::Inserted`] (say
    /// `Search::operation_scope(&branch)`), or a TTL that bounds them.
    ///
    /// # Errors
    ///
    /// A table mapped twice, or a name that is not `name` or
    /// `schema.name` (no quote, NUL or second dot).
    pub fn table<F>(mut self, table: &str, scopes: F) -> Result<Self, MapError>
    where
        F: Fn(&Row<'_>, &mut Bumps) -> Result<(), RowError> + Send + Sync + 'static,
    {
        let name = qualified(table)?;
        if self.tables.contains_key(&name) {
            return Err(MapError::Twice(name));
        }
        self.tables.insert(name, Arc::new(scopes));
        Ok(self)
    }

    /// The mapped tables, as `schema.table`.
    pub fn tables(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    /// The declared namespaces' scopes.
    pub fn namespaces(&self) -> &[GenerationScope] {
        &self.namespaces
    }

    pub(crate) fn get(&self, table: &str) -> Option<&Arc<RowScopes>> {
        self.tables.get(table)
    }
}

/// `schema.table`, checked.
fn qualified(table: &str) -> Result<String, MapError> {
    let parts: Vec<&str> = table.split('.').collect();
    let bad = |part: &&str| part.is_empty() || part.contains(['"', '\0']);
    match parts.as_slice() {
        [name] if !bad(name) => Ok(format!("public.{name}")),
        [schema, name] if !bad(schema) && !bad(name) => Ok(table.to_owned()),
        _ => Err(MapError::Name(table.to_owned())),
    }
}

/// A map that could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MapError {
    /// The table was mapped already.
    Twice(String),
    /// Not `name` or `schema.name`.
    Name(String),
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::Twice(table) => write!(
                f,
                "table `{table}` is mapped twice: push every scope its rows end from one function"
            ),
            MapError::Name(table) => write!(
                f,
                "`{table}` is not a table name: write `name` (schema `public`) or `schema.name`, unquoted"
            ),
        }
    }
}

impl Error for MapError {}

/// The scopes one change ends, as a table's function pushes them.
#[derive(Debug, Default)]
pub struct Bumps {
    scopes: Vec<GenerationScope>,
}

impl Bumps {
    /// Adds `scope`: bumped once the change's transaction committed.
    pub fn push(&mut self, scope: GenerationScope) {
        self.scopes.push(scope);
    }

    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, GenerationScope> {
        self.scopes.drain(..)
    }
}

/// Which row of a change a [`Row`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Image {
    /// An INSERT's row.
    Inserted,
    /// An UPDATE's row before it.
    Before,
    /// An UPDATE's row after it.
    After,
    /// A DELETE's row.
    Deleted,
}

/// One row image of a change, its columns read by name as text and parsed.
#[derive(Debug)]
pub struct Row<'a> {
    pub(crate) table: &'a str,
    pub(crate) columns: &'a [Column],
    pub(crate) image: Image,
    /// The new tuple (INSERT, UPDATE), if any.
    pub(crate) new: Option<&'a [Value]>,
    /// The old tuple as sent (UPDATE, DELETE).
    pub(crate) old: Option<&'a Old>,
}

impl<'a> Row<'a> {
    /// The table, as `schema.table`.
    pub fn table(&self) -> &str {
        self.table
    }

    /// Which row of the change this is.
    pub fn image(&self) -> Image {
        self.image
    }

    /// `column`'s value parsed as `T` (`u32`, `String`, `uuid::Uuid`...).
    ///
    /// # Errors
    ///
    /// No such column, NULL, a text `T` does not parse, or a column this row
    /// image does not carry ([`RowErrorKind::NarrowReplicaIdentity`]).
    pub fn get<T: FromStr>(&self, column: &str) -> Result<T, RowError> {
        match self.get_opt(column)? {
            Some(value) => Ok(value),
            None => Err(self.error(column, RowErrorKind::Null)),
        }
    }

    /// `column`'s value parsed as `T`, `None` for NULL.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get), but for NULL.
    pub fn get_opt<T: FromStr>(&self, column: &str) -> Result<Option<T>, RowError> {
        let Some(text) = self.text(column)? else {
            return Ok(None);
        };
        text.parse().map(Some).map_err(|_| {
            self.error(
                column,
                RowErrorKind::Unreadable {
                    value: shortened(text),
                    into: std::any::type_name::<T>(),
                },
            )
        })
    }

    /// `column`'s value as PostgreSQL writes it in text, `None` for NULL.
    ///
    /// # Errors
    ///
    /// No such column, or a column this row image does not carry.
    pub fn text(&self, column: &str) -> Result<Option<&'a str>, RowError> {
        let Some(at) = self.columns.iter().position(|c| c.name == column) else {
            return Err(self.error(column, RowErrorKind::NoColumn));
        };
        let key = self.columns[at].key;
        let narrow = || self.error(column, RowErrorKind::NarrowReplicaIdentity(self.image));
        let old = |old: &'a Old| -> Result<Option<&'a Value>, RowError> {
            match old {
                Old::Full(values) => Ok(values.get(at)),
                Old::Key(values) if key => Ok(values.get(at)),
                // No old tuple: the identity's columns did not change.
                Old::None if key => Ok(self.new.and_then(|new| new.get(at))),
                Old::Key(_) | Old::None => Err(narrow()),
            }
        };
        let value = match self.image {
            Image::Inserted | Image::After => match self.new.and_then(|new| new.get(at)) {
                // A TOASTed value the UPDATE kept: the old row's.
                Some(Value::Unchanged) => match self.old {
                    Some(previous) => old(previous)?,
                    None => return Err(narrow()),
                },
                value => value,
            },
            Image::Before | Image::Deleted => match self.old {
                Some(previous) => old(previous)?,
                None => return Err(narrow()),
            },
        };
        match value {
            Some(Value::Text(text)) => Ok(Some(text)),
            Some(Value::Null) => Ok(None),
            Some(Value::Unchanged) | None => Err(narrow()),
        }
    }

    fn error(&self, column: &str, kind: RowErrorKind) -> RowError {
        RowError {
            column: Some(column.to_owned()),
            kind,
        }
    }
}

fn shortened(text: &str) -> String {
    let mut end = text.len().min(60);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_owned();
    if end < text.len() {
        out.push_str("...");
    }
    out
}

/// A row change the map could not read: never skipped, the consumer stops
/// on it with the table and column (see [`ChangeLog::run`](crate::ChangeLog::run)).
#[derive(Debug)]
pub struct RowError {
    column: Option<String>,
    kind: RowErrorKind,
}

/// What was wrong with a row.
#[derive(Debug)]
#[non_exhaustive]
pub enum RowErrorKind {
    /// The table has no such column.
    NoColumn,
    /// The column is NULL where a value was required (use `get_opt`).
    Null,
    /// The column's text does not parse as the type asked for.
    Unreadable {
        /// The text (shortened).
        value: String,
        /// The type asked for.
        into: &'static str,
    },
    /// The row image does not carry the column: a DELETE's or UPDATE's old
    /// row holds only the replica identity's columns, unless the table is
    /// `REPLICA IDENTITY FULL` (or an index covering the column).
    NarrowReplicaIdentity(Image),
    /// A scope could not be made from the values (an empty tenant value).
    Scope(GenerationError),
}

impl RowError {
    /// The column read, if the error is about one.
    pub fn column(&self) -> Option<&str> {
        self.column.as_deref()
    }

    /// What was wrong.
    pub fn kind(&self) -> &RowErrorKind {
        &self.kind
    }
}

impl From<GenerationError> for RowError {
    fn from(error: GenerationError) -> Self {
        RowError {
            column: None,
            kind: RowErrorKind::Scope(error),
        }
    }
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let column = self.column.as_deref().unwrap_or_default();
        match &self.kind {
            RowErrorKind::NoColumn => write!(f, "there is no column `{column}`"),
            RowErrorKind::Null => write!(
                f,
                "column `{column}` is NULL: read it with `get_opt` if NULL names no entity"
            ),
            RowErrorKind::Unreadable { value, into } => {
                write!(f, "column `{column}` holds {value:?}, not a `{into}`")
            }
            RowErrorKind::NarrowReplicaIdentity(image) => write!(
                f,
                "column `{column}` is not in the {image:?} row: it is not part of the table's \
                 replica identity, so PostgreSQL does not log its old value; run \
                 `ALTER TABLE ... REPLICA IDENTITY FULL` (or `USING INDEX` an index covering it)"
            ),
            RowErrorKind::Scope(error) => write!(f, "no scope could be made: {error}"),
        }
    }
}

impl Error for RowError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.kind {
            RowErrorKind::Scope(error) => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> Vec<Column> {
        vec![
            Column {
                name: "id".into(),
                key: true,
            },
            Column {
                name: "branch".into(),
                key: false,
            },
        ]
    }

    fn text(value: &str) -> Value {
        Value::Text(value.into())
    }

    #[test]
    fn an_old_row_without_the_column_is_an_error_naming_it() {
        let columns = columns();
        let new = [text("7"), text("3")];
        let old = Old::None;
        let before = Row {
            table: "public.books",
            columns: &columns,
            image: Image::Before,
            new: Some(&new),
            old: Some(&old),
        };
        // The key did not change: its old value is the new one.
        assert_eq!(before.get::<u32>("id").unwrap(), 7);
        let error = before.get::<u32>("branch").unwrap_err();
        assert_eq!(error.column(), Some("branch"));
        assert!(matches!(
            error.kind(),
            RowErrorKind::NarrowReplicaIdentity(Image::Before)
        ));
        assert!(
            error.to_string().contains("REPLICA IDENTITY FULL"),
            "{error}"
        );

        let full = Old::Full(vec![text("7"), text("2")]);
        let before = Row {
            old: Some(&full),
            ..before
        };
        assert_eq!(before.get::<u32>("branch").unwrap(), 2);
    }

    #[test]
    fn a_missing_null_or_unreadable_column_is_an_error() {
        let columns = columns();
        let new = [text("seven"), Value::Null];
        let row = Row {
            table: "public.books",
            columns: &columns,
            image: Image::Inserted,
            new: Some(&new),
            old: None,
        };
        assert!(matches!(
            row.get::<u32>("tenant").unwrap_err().kind(),
            RowErrorKind::NoColumn
        ));
        assert!(matches!(
            row.get::<u32>("branch").unwrap_err().kind(),
            RowErrorKind::Null
        ));
        assert_eq!(row.get_opt::<u32>("branch").unwrap(), None);
        let error = row.get::<u32>("id").unwrap_err();
        assert_eq!(
            error.to_string(),
            "column `id` holds \"seven\", not a `u32`"
        );
    }

    #[test]
    fn table_names_are_checked() {
        let none = |_: &Row<'_>, _: &mut Bumps| Ok(());
        let map = ChangeMap::new().table("books", none).unwrap();
        assert!(matches!(
            map.clone().table("public.books", none),
            Err(MapError::Twice(_))
        ));
        for bad in ["", "a.b.c", "\"books\"", ".books"] {
            assert!(
                matches!(ChangeMap::new().table(bad, none), Err(MapError::Name(_))),
                "{bad}"
            );
        }
    }
}
