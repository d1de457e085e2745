//! The few `pgoutput` messages (protocol version 1, text values) the
//! consumer reads: `Relation`, `Insert`, `Update`, `Delete`, `Truncate`.
//! `Begin` and `Commit` are decoded by `pgwire-replication`; `Type`,
//! `Origin` and logical messages name no row and are passed over. Plain
//! functions over bytes, no I/O.

use std::fmt;

/// A relation as its `Relation` message describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relation {
    pub(crate) id: u32,
    pub(crate) schema: String,
    pub(crate) name: String,
    pub(crate) columns: Vec<Column>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: String,
    /// Part of the replica identity: present in a `K` old tuple.
    pub(crate) key: bool,
}

/// One column's value in a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Null,
    /// A TOASTed value the UPDATE did not change, not sent.
    Unchanged,
    Text(String),
}

/// The old row an `Update` or `Delete` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Old {
    /// No old row: an UPDATE that changed no replica identity column.
    None,
    /// The replica identity's columns only (`K`), the others `Null`.
    Key(Vec<Value>),
    /// Every column (`O`: `REPLICA IDENTITY FULL`).
    Full(Vec<Value>),
}

/// A decoded message that names rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    Relation(Relation),
    Insert {
        relation: u32,
        new: Vec<Value>,
    },
    Update {
        relation: u32,
        old: Old,
        new: Vec<Value>,
    },
    Delete {
        relation: u32,
        old: Old,
    },
    Truncate {
        relations: Vec<u32>,
    },
    /// `Begin`, `Commit`, `Type`, `Origin`, a logical message: no row.
    Other,
}

/// A `pgoutput` message that does not read as its tag says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub(crate) tag: u8,
    pub(crate) what: &'static str,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a pgoutput `{}` message is malformed: {}",
            self.tag.escape_ascii(),
            self.what
        )
    }
}

impl std::error::Error for Malformed {}

struct Reader<'a> {
    bytes: &'a [u8],
    tag: u8,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, what: &'static str) -> Result<T, Malformed> {
        Err(Malformed {
            tag: self.tag,
            what,
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return self.fail("it ends early");
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Malformed> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A NUL-terminated string.
    fn string(&mut self) -> Result<String, Malformed> {
        let Some(end) = self.bytes.iter().position(|&b| b == 0) else {
            return self.fail("a name has no terminating NUL");
        };
        let text = self.take(end + 1)?;
        match std::str::from_utf8(&text[..end]) {
            Ok(text) => Ok(text.to_owned()),
            Err(_) => self.fail("a name is not UTF-8"),
        }
    }

    fn tuple(&mut self) -> Result<Vec<Value>, Malformed> {
        let count = self.u16()?;
        let mut values = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            values.push(match self.u8()? {
                b'n' => Value::Null,
                b'u' => Value::Unchanged,
                b't' => {
                    let len = self.u32()? as usize;
                    let bytes = self.take(len)?;
                    match std::str::from_utf8(bytes) {
                        Ok(text) => Value::Text(text.to_owned()),
                        Err(_) => return self.fail("a text value is not UTF-8"),
                    }
                }
                b'b' => return self.fail("a binary value (the consumer asks for text)"),
                _ => return self.fail("a column's kind is none of n, u, t"),
            });
        }
        Ok(values)
    }
}

/// Decodes one `pgoutput` message.
pub(crate) fn decode(bytes: &[u8]) -> Result<Message, Malformed> {
    let Some((&tag, body)) = bytes.split_first() else {
        return Err(Malformed {
            tag: b'?',
            what: "it is empty",
        });
    };
    let mut r = Reader { bytes: body, tag };
    let message = match tag {
        b'R' => {
            let id = r.u32()?;
            let schema = r.string()?;
            let name = r.string()?;
            let _replica_identity = r.u8()?;
            let count = r.u16()?;
            let mut columns = Vec::with_capacity(usize::from(count));
            for _ in 0..count {
                let flags = r.u8()?;
                let name = r.string()?;
                let _type = r.u32()?;
                let _modifier = r.u32()?;
                columns.push(Column {
                    name,
                    key: flags & 1 == 1,
                });
            }
            Message::Relation(Relation {
                id,
                schema,
                name,
                columns,
            })
        }
        b'I' => {
            let relation = r.u32()?;
            if r.u8()? != b'N' {
                return r.fail("an Insert's tuple is not marked N");
            }
            Message::Insert {
                relation,
                new: r.tuple()?,
            }
        }
        b'U' => {
            let relation = r.u32()?;
            let (old, mark) = match r.u8()? {
                b'K' => (Old::Key(r.tuple()?), r.u8()?),
                b'O' => (Old::Full(r.tuple()?), r.u8()?),
                mark => (Old::None, mark),
            };
            if mark != b'N' {
                return r.fail("an Update's new tuple is not marked N");
            }
            Message::Update {
                relation,
                old,
                new: r.tuple()?,
            }
        }
        b'D' => {
            let relation = r.u32()?;
            let old = match r.u8()? {
                b'K' => Old::Key(r.tuple()?),
                b'O' => Old::Full(r.tuple()?),
                _ => return r.fail("a Delete's old tuple is marked neither K nor O"),
            };
            Message::Delete { relation, old }
        }
        b'T' => {
            let count = r.u32()?;
            let _options = r.u8()?;
            let mut relations = Vec::with_capacity(count.min(1024) as usize);
            for _ in 0..count {
                relations.push(r.u32()?);
            }
            Message::Truncate { relations }
        }
        _ => Message::Other,
    };
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as u16).to_be_bytes().to_vec();
        for value in values {
            match value {
                None => out.push(b'n'),
                Some(text) => {
                    out.push(b't');
                    out.extend((text.len() as u32).to_be_bytes());
                    out.extend(text.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn a_relation_then_its_rows() {
        let mut relation = vec![b'R'];
        relation.extend(16384u32.to_be_bytes());
        relation.extend(b"public\0books\0d");
        relation.extend(2u16.to_be_bytes());
        relation.extend(b"\x01id\0");
        relation.extend([0, 0, 0, 23, 0xff, 0xff, 0xff, 0xff]);
        relation.extend(b"\x00branch\0");
        relation.extend([0, 0, 0, 23, 0xff, 0xff, 0xff, 0xff]);
        let Message::Relation(decoded) = decode(&relation).unwrap() else {
            panic!("not a relation")
        };
        assert_eq!(
            (decoded.id, &*decoded.schema, &*decoded.name),
            (16384, "public", "books")
        );
        assert_eq!(
            decoded
                .columns
                .iter()
                .map(|c| (&*c.name, c.key))
                .collect::<Vec<_>>(),
            [("id", true), ("branch", false)]
        );

        let mut update = vec![b'U'];
        update.extend(16384u32.to_be_bytes());
        update.push(b'O');
        update.extend(tuple(&[Some("7"), Some("2")]));
        update.push(b'N');
        update.extend(tuple(&[Some("7"), None]));
        assert_eq!(
            decode(&update).unwrap(),
            Message::Update {
                relation: 16384,
                old: Old::Full(vec![Value::Text("7".into()), Value::Text("2".into())]),
                new: vec![Value::Text("7".into()), Value::Null],
            }
        );
        // Cut anywhere: an error, never a panic or a shorter row.
        for end in 1..update.len() {
            assert!(decode(&update[..end]).is_err(), "cut at {end}");
        }
    }

    #[test]
    fn a_truncate_names_its_relations() {
        let mut truncate = vec![b'T'];
        truncate.extend(2u32.to_be_bytes());
        truncate.push(0);
        truncate.extend(1u32.to_be_bytes());
        truncate.extend(9u32.to_be_bytes());
        assert_eq!(
            decode(&truncate).unwrap(),
            Message::Truncate {
                relations: vec![1, 9]
            }
        );
    }
}
