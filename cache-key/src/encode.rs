//! Laying out a key from its parts: the one place that writes the key format's
//! segments, used by derived keys and by the builder alike.
//!
//! The key's exact length is computed before anything is written, so the
//! output grows once (a fresh `String` is allocated exactly once), and any error
//! is found before the output is touched.

use std::borrow::Cow;

use crate::canonical::CanonicalWriter;
use crate::error::KeyError;
use crate::escape::{escaped_len, push_escaped};
use crate::number::Decimal;
use crate::tail::Tail;
use crate::value::TenantValue;

/// A namespace or operation, escaped already (derived keys escape their
/// constants at compile time) or to be escaped while writing.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum Text<'a> {
    Escaped(&'a str),
    Raw(&'a str),
}

impl Text<'_> {
    #[inline]
    fn escaped_len(self) -> usize {
        match self {
            Text::Escaped(text) => text.len(),
            Text::Raw(text) => escaped_len(text),
        }
    }

    #[inline]
    fn write(self, out: &mut String) {
        match self {
            Text::Escaped(text) => out.push_str(text),
            Text::Raw(text) => push_escaped(out, text),
        }
    }
}

/// The tenant segment's content.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub enum TenantSegment<'a> {
    /// Declared tenant-free data: the empty segment.
    Global,
    /// Tenant values escaped and joined already (by the builder).
    Escaped(&'a str),
    /// Tenant fields in declaration order, with their names for errors.
    Fields(&'a [(&'static str, &'a dyn TenantValue)]),
}

/// Everything a key is made of except its criteria.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct KeyParts<'a> {
    pub namespace: Text<'a>,
    pub schema: u32,
    pub generation: u64,
    pub tenant: TenantSegment<'a>,
    pub operation: Text<'a>,
    /// Write the tenant segment as `t{...}` (a Redis Cluster hash tag).
    pub hash_tag: bool,
    /// Refuse keys longer than this many bytes.
    pub max_len: Option<usize>,
}

/// Appends the key made of `parts` and `criteria` to `out`.
///
/// On error, `out` is left as it was.
#[doc(hidden)]
#[inline]
pub fn write_key(out: &mut String, parts: KeyParts<'_>, criteria: Tail) -> Result<(), KeyError> {
    // Inlined, so the criteria buffer is finished where it was written and
    // only its text is passed on, instead of moving the whole buffer.
    let mut criteria = criteria;
    criteria.finish();
    write_key_with_tail(out, &parts, criteria.as_str())
}

/// [`write_key`] with a finished criteria segment.
fn write_key_with_tail(
    out: &mut String,
    parts: &KeyParts<'_>,
    criteria: &str,
) -> Result<(), KeyError> {
    let tenant_len = tenant_len(parts.tenant)?;
    let mut schema = Decimal::new();
    let schema = schema.set_u64(u64::from(parts.schema));
    let mut generation = Decimal::new();
    let generation = generation.set_u64(parts.generation);

    let len = parts.namespace.escaped_len()
        + ":s".len()
        + schema.as_bytes().len()
        + ":g".len()
        + generation.as_bytes().len()
        + ":t".len()
        + if parts.hash_tag { "{}".len() } else { 0 }
        + tenant_len
        + ":".len()
        + parts.operation.escaped_len()
        + if criteria.is_empty() {
            0
        } else {
            ":".len() + criteria.len()
        };
    if let Some(max) = parts.max_len
        && len > max
    {
        return Err(KeyError::TooLong { len, max });
    }

    out.reserve(len);
    let start = out.len();
    parts.namespace.write(out);
    out.push_str(":s");
    schema.for_each_piece(|piece| out.push_str(piece));
    out.push_str(":g");
    generation.for_each_piece(|piece| out.push_str(piece));
    out.push_str(":t");
    if parts.hash_tag {
        out.push('{');
    }
    write_tenant(out, parts.tenant);
    if parts.hash_tag {
        out.push('}');
    }
    out.push(':');
    parts.operation.write(out);
    if !criteria.is_empty() {
        out.push(':');
        out.push_str(criteria);
    }
    debug_assert_eq!(
        out.len() - start,
        len,
        "the key's length was computed wrong"
    );
    Ok(())
}

/// The escaped length of the tenant segment, or the error for an empty tenant.
fn tenant_len(tenant: TenantSegment<'_>) -> Result<usize, KeyError> {
    match tenant {
        TenantSegment::Global => Ok(0),
        TenantSegment::Escaped("") => Err(KeyError::EmptyTenant {
            field: Cow::Borrowed("tenant"),
        }),
        TenantSegment::Escaped(text) => Ok(text.len()),
        TenantSegment::Fields([]) => Err(KeyError::MissingTenant),
        TenantSegment::Fields(fields) => {
            let mut len = fields.len().saturating_sub(1); // the `,` between values
            for &(field, value) in fields {
                let mut value_len = 0;
                value.write_canonical(&mut CanonicalWriter::count(&mut value_len));
                if value_len == 0 {
                    return Err(KeyError::EmptyTenant {
                        field: Cow::Borrowed(field),
                    });
                }
                len += value_len;
            }
            Ok(len)
        }
    }
}

fn write_tenant(out: &mut String, tenant: TenantSegment<'_>) {
    match tenant {
        TenantSegment::Global => {}
        TenantSegment::Escaped(text) => out.push_str(text),
        TenantSegment::Fields(fields) => {
            for (i, &(_, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value.write_canonical(&mut CanonicalWriter::escaped(out));
            }
        }
    }
}
