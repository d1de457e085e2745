//! Who may keep an answer: `Cache-Control` decided by the query type, and
//! [`GlobalQuery`], the only query types that may be sent `public`.

use std::time::Duration;

use crate::cache::CachedQuery;
use crate::schema::Scope;

/// A query type whose answers are the same for every tenant (declared
/// `#[cache_key(global = "why")]`): the only kind whose answers
/// [`HttpCache::respond_public`](super::HttpCache::respond_public) may send
/// with `Cache-Control: public`, for a CDN or a proxy to share between
/// users.
///
/// Implemented for every global query type, and for no tenant-scoped one:
/// asking for `public` with a tenant-scoped query does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is tenant-scoped: its answers cannot be sent `Cache-Control: public`",
    label = "a tenant's answer, which a CDN or proxy would serve to every user",
    note = "answer it with `respond`, which sends `Cache-Control: private` for every tenant-scoped query type",
    note = "only a query declared `#[cache_key(global = \"why\")]` may be `public`"
)]
pub trait GlobalQuery: CachedQuery + 'static {}

// Not recommended: a tenant-scoped query's error names the query and this
// trait, not its tenant values and `NoTenant`.
#[diagnostic::do_not_recommend]
impl<Q> GlobalQuery for Q
where
    Q: CachedQuery + 'static,
    Q::Tenant<'static>: NoTenant,
{
}

/// The tenant values of a global query, `()`: what [`GlobalQuery`] asks
/// of a query's [`CacheKey::Tenant`](crate::CacheKey::Tenant). Sealed.
#[diagnostic::on_unimplemented(
    message = "the query type is tenant-scoped: its answers cannot be sent `Cache-Control: public`",
    label = "the tenant values of a tenant-scoped query",
    note = "answer it with `respond`, which sends `Cache-Control: private` for every tenant-scoped query type",
    note = "only a query declared `#[cache_key(global = \"why\")]` may be `public`"
)]
pub trait NoTenant: sealed::Sealed {}

impl NoTenant for () {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for () {}
}

/// How long a client may use an answer before it asks again (with the
/// answer's `ETag`, which costs the service a read of the counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Freshness {
    /// Every use is revalidated (`no-cache`; `max-age=0` for a `public`
    /// answer): an edit is seen at the next request, at the price of a
    /// conditional request, answered `304` from the counters.
    #[default]
    Revalidate,
    /// A client keeps the answer for the query type's TTL
    /// ([`CachedQuery::TTL`]) without asking (`max-age`): fewer requests,
    /// but an edit is seen up to a TTL late by a client that holds it.
    Ttl,
}

/// Whether an answer is sent for one user or for any cache on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    Private,
    Public,
}

/// `Cache-Control` for `Q`'s answers. `private` for every tenant-scoped
/// type, whatever `sharing` says (a tenant-scoped query never reaches
/// `Public`: [`GlobalQuery`] refuses it at compile time; this check is the
/// second lock). A `public` answer lets shared caches keep it for the TTL
/// (`s-maxage`), purged earlier through surrogate keys.
pub(crate) fn cache_control<Q: CachedQuery + ?Sized>(
    sharing: Sharing,
    freshness: Freshness,
) -> String {
    let ttl = whole_seconds(Q::TTL);
    let public =
        sharing == Sharing::Public && matches!(Q::KEY_SCHEMA.scope(), Scope::Global { .. });
    match (public, freshness) {
        (false, Freshness::Revalidate) => "private, no-cache".to_owned(),
        (false, Freshness::Ttl) => format!("private, max-age={ttl}"),
        (true, Freshness::Revalidate) => format!("public, max-age=0, s-maxage={ttl}"),
        (true, Freshness::Ttl) => format!("public, max-age={ttl}, s-maxage={ttl}"),
    }
}

/// `ttl` in whole seconds, rounded down (at least 1: a TTL under a second
/// is still a TTL).
fn whole_seconds(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}
