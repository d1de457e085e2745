//! `uuid::Uuid` as a criterion and a tenant (feature `uuid`).

use ::uuid::Uuid;

use crate::canonical::{CanonicalWriter, CriterionValue, TenantValue};

/// The lowercase hyphenated form, 36 bytes:
/// `67e55044-10b1-426f-9247-bb680e5fe0c8`. Uppercase, braced, simple and URN
/// spellings of the same UUID are one value here, so they give one key.
impl CriterionValue for Uuid {
    fn write_canonical(&self, out: &mut CanonicalWriter<'_>) {
        let mut buf = Uuid::encode_buffer();
        out.write_str(self.hyphenated().encode_lower(&mut buf));
    }
}

/// A UUID identifies a tenant (organization, account...) as its lowercase
/// hyphenated form. The nil UUID is its empty value: a tenant left at its
/// default, refused unless declared real.
impl TenantValue for Uuid {
    fn is_empty_value(&self) -> bool {
        self.is_nil()
    }
}
