//! Query types shared by several test binaries. A test file keeps its own
//! type where the shape itself is under test (attributes, hygiene, serde
//! names, hash tags).

use cache_key::CacheKey;

/// The key format's seed query: a text tenant, three criteria (one renamed)
/// and a field the key ignores.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", schema = 1)]
pub struct Search<'a> {
    #[tenant]
    pub branch: &'a str,
    #[criterion]
    pub title: &'a str,
    #[criterion]
    pub author: Option<&'a str>,
    #[criterion(rename = "yearFrom")]
    pub year_from: Option<u16>,
    #[skip]
    pub request_id: u64,
}

/// One page of a branch's list.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "list")]
pub struct BranchList {
    #[tenant]
    pub branch: String,
    #[criterion]
    pub page: u32,
}

/// A search with eight criteria, whose criteria string is summarized.
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "search", rename_all = "camelCase")]
pub struct FullSearch {
    #[tenant]
    pub branch: String,
    #[criterion]
    pub title: String,
    #[criterion]
    pub author: String,
    #[criterion]
    pub year_from: u16,
    #[criterion]
    pub year_to: u16,
    #[criterion]
    pub lang: &'static str,
    #[criterion]
    pub status: &'static str,
    #[criterion]
    pub sort: &'static str,
    #[criterion]
    pub page: u32,
}
