//! The key format's escaping, applied at compile time to the constant parts of
//! a key (namespace, operation, criterion names), so derived keys copy them as
//! they are. It must stay identical to the runtime crate's `escape` module;
//! the conformance and derive tests in the workspace compare the two.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but the bytes JavaScript's `encodeURIComponent` leaves alone.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

pub fn escape(text: &str) -> String {
    utf8_percent_encode(text, ESCAPED).to_string()
}
