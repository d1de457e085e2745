//! `url::Url` as a criterion (feature `url`).

use ::url::Url;

use crate::canonical::{CanonicalWriter, CriterionValue};

/// The `url` crate's serialization, [`Url::as_str`]: the URL as parsed and
/// normalized by the WHATWG URL Standard (lowercase scheme and host, default
/// port removed, `/` path for special schemes, percent-encoding applied), so
/// `HTTP://Example.COM:80` and `http://example.com/` are one criterion.
/// Nothing else is normalized: query parameter order and a trailing fragment
/// are part of the string.
impl CriterionValue for Url {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        out.write_str(self.as_str());
    }
}
