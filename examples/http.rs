//! A query struct built from an HTTP query string: pagination shared with other
//! queries (`#[derive(Criteria)]`, flattened), an enum sort order
//! (`#[derive(CriterionValue)]`), normalized text, and a filter map taken from
//! the `filter[...]` parameters.
//!
//! ```text
//! cargo run --example http
//! cargo run --example http -- 'title=%20The%20Book&sort=year_desc&page=2&filter[lang]=es'
//! ```

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::str::FromStr;

use cache_key::{CacheKey, Criteria, CriterionValue, TenantValue};
use percent_encoding::percent_decode_str;

/// The branch the request was authorized for (from the session, not the URL).
#[derive(CriterionValue, TenantValue, Clone, Copy)]
struct BranchId(u32);

/// Pagination, shared by every list query.
#[derive(Criteria)]
#[cache_key(rename_all = "camelCase")]
struct Page {
    #[criterion]
    page: u32,
    #[criterion]
    per_page: u32,
}

#[derive(CriterionValue, Clone, Copy, Debug)]
#[criterion(rename_all = "snake_case")]
enum SortOrder {
    TitleAsc,
    TitleDesc,
    YearDesc,
}

impl FromStr for SortOrder {
    type Err = BadRequest;

    fn from_str(text: &str) -> Result<Self, BadRequest> {
        match text {
            "title_asc" => Ok(SortOrder::TitleAsc),
            "title_desc" => Ok(SortOrder::TitleDesc),
            "year_desc" => Ok(SortOrder::YearDesc),
            other => Err(BadRequest(format!(
                "sort must be title_asc, title_desc or year_desc, not {other:?}"
            ))),
        }
    }
}

/// `GET /books?title=...&sort=...&page=...&perPage=...&filter[name]=value`
#[derive(CacheKey)]
#[cache_key(namespace = "library", operation = "books", rename_all = "camelCase")]
struct BookSearch {
    #[tenant]
    branch: BranchId,
    /// The catalog search ignores case and surrounding spaces.
    #[criterion(trim, lowercase)]
    title: Option<String>,
    #[criterion]
    sort: SortOrder,
    #[criterion(flatten)]
    page: Page,
    #[criterion(flatten)]
    filters: BTreeMap<String, String>,
    #[skip(reason = "tracing only: differs on every request")]
    request_id: String,
}

/// A query string the endpoint refuses.
#[derive(Debug)]
struct BadRequest(String);

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad request: {}", self.0)
    }
}

impl Error for BadRequest {}

impl BookSearch {
    /// Parses a query string such as `title=Sand&page=2&filter[lang]=es`.
    fn from_query(branch: BranchId, request_id: &str, query: &str) -> Result<Self, BadRequest> {
        let mut search = BookSearch {
            branch,
            title: None,
            sort: SortOrder::TitleAsc,
            page: Page {
                page: 1,
                per_page: 20,
            },
            filters: BTreeMap::new(),
            request_id: request_id.to_owned(),
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (name, value) = (form_decode(name)?, form_decode(value)?);
            match name.as_str() {
                "title" => search.title = Some(value),
                "sort" => search.sort = value.parse()?,
                "page" => search.page.page = number(&name, &value)?,
                "perPage" => search.page.per_page = number(&name, &value)?,
                _ => match name
                    .strip_prefix("filter[")
                    .and_then(|n| n.strip_suffix(']'))
                {
                    Some(filter) => {
                        search.filters.insert(filter.to_owned(), value);
                    }
                    None => return Err(BadRequest(format!("unknown parameter {name:?}"))),
                },
            }
        }
        Ok(search)
    }
}

/// Decodes `application/x-www-form-urlencoded` text: `+` is a space.
fn form_decode(text: &str) -> Result<String, BadRequest> {
    percent_decode_str(&text.replace('+', " "))
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| BadRequest(format!("{text:?} is not UTF-8 once decoded")))
}

fn number(name: &str, value: &str) -> Result<u32, BadRequest> {
    value
        .parse()
        .map_err(|_| BadRequest(format!("{name} must be a whole number, not {value:?}")))
}

fn main() -> Result<(), Box<dyn Error>> {
    let branch = BranchId(2);
    let requests: Vec<String> = match std::env::args().nth(1) {
        Some(query) => vec![query],
        None => [
            "title=Sand&sort=year_desc&page=2&filter[lang]=es",
            // The same query: other parameter order, spaces and case in the
            // title, a default page size given explicitly.
            "filter[lang]=es&page=2&perPage=20&sort=year_desc&title=+%20SAND+",
            // A filter whose value holds the format's separators.
            "title=Sand&filter[author]=Borges%2C+J.+L.&filter[note]=a%3Db%26c",
            // A filter named like a fixed criterion: refused, never merged.
            "title=Sand&filter[sort]=title_desc",
        ]
        .map(String::from)
        .to_vec(),
    };

    println!("{:#?}\n", BookSearch::KEY_SCHEMA);
    for (i, query) in requests.iter().enumerate() {
        println!("GET /books?{query}");
        let search = match BookSearch::from_query(branch, &format!("r-{i}"), query) {
            Ok(search) => search,
            Err(err) => {
                println!("  {err}\n");
                continue;
            }
        };
        // The request id differs on every request and stays out of the key.
        match search.cache_key(1) {
            Ok(key) => println!("  {} -> key {key}\n", search.request_id),
            Err(err) => println!("  {} -> no key: {err}\n", search.request_id),
        }
    }
    Ok(())
}
