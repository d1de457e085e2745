//! The query and value both Redis typed-cache test files use: a search of
//! one library branch by title, answered by a list of books. Included with
//! `#[path]` (not in `common`, whose other users declare a `library`
//! `search` of their own).

use std::time::Duration;

use cache_key::CacheKey;
use cache_key::cache::CachedQuery;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Book {
    pub title: String,
    pub year: u16,
    pub subtitle: Option<String>,
}

#[derive(Clone, CacheKey)]
#[cache_key(namespace = "library", operation = "search", hash_tag)]
pub struct Search {
    #[tenant]
    pub branch: u32,
    #[criterion]
    pub title: String,
}

impl CachedQuery for Search {
    type Value = Vec<Book>;
    const VALUE_ID: &'static str = "Vec<Book>";
    const TTL: Duration = Duration::from_secs(60);
}

pub fn search(branch: u32, title: &str) -> Search {
    Search {
        branch,
        title: title.to_owned(),
    }
}

pub fn dune() -> Vec<Book> {
    vec![Book {
        title: "Dune".to_owned(),
        year: 1965,
        subtitle: None,
    }]
}
