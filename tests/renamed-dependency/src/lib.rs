//! Every derive of cache-key used through a renamed dependency (`ck`) and
//! through a re-export (`crate::app::keys`), with `#[cache_key(crate = "...")]`.

use ck::{CacheKey, CacheTags, Criteria, CriterionValue, TenantValue};

/// A library re-exporting cache-key under its own path.
pub mod app {
    pub use ck as keys;
}

#[derive(CriterionValue, TenantValue)]
#[cache_key(crate = "ck")]
pub struct BranchId(pub u32);

#[derive(CriterionValue)]
#[cache_key(crate = "ck")]
#[criterion(rename_all = "snake_case")]
pub enum Sort {
    TitleAsc,
}

#[derive(Criteria)]
#[cache_key(crate = "ck")]
pub struct Page {
    #[criterion]
    pub page: u32,
}

#[derive(CacheKey)]
#[cache_key(crate = "ck", namespace = "library", operation = "search")]
pub struct Search {
    #[tenant]
    pub branch: BranchId,
    #[criterion]
    pub sort: Sort,
    #[criterion(flatten)]
    pub page: Page,
}

#[derive(CacheTags, Clone)]
#[cache_key(crate = "ck")]
pub struct Book {
    #[tag = "book"]
    pub id: u64,
}

#[derive(CacheKey)]
#[cache_key(
    crate = "crate::app::keys",
    namespace = "library",
    operation = "list",
    value = Vec<Book>,
    ttl = "1m",
    value_tags
)]
pub struct List {
    #[tenant]
    pub branch: u32,
    #[criterion]
    #[tag = "title"]
    pub title: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_through_a_renamed_dependency_match_the_builder() {
        let query = Search {
            branch: BranchId(2),
            sort: Sort::TitleAsc,
            page: Page { page: 3 },
        };
        let expected = ck::KeyBuilder::new("library", "search")
            .tenant(2)
            .criterion("sort", "title_asc")
            .criterion("page", 3)
            .build()
            .unwrap();
        assert_eq!(query.cache_key(1).unwrap(), expected);
    }

    #[test]
    fn keys_through_a_reexport_match_the_builder() {
        let query = List {
            branch: 2,
            title: "Sand",
        };
        let expected = app::keys::KeyBuilder::new("library", "list")
            .tenant(2)
            .criterion("title", "Sand")
            .build()
            .unwrap();
        assert_eq!(query.cache_key(1).unwrap(), expected);
    }

    #[test]
    fn tags_through_a_reexport() {
        use ck::cache::CachedQuery;
        let query = List {
            branch: 2,
            title: "Sand",
        };
        let mut tags = ck::Tags::new();
        query.write_query_tags(&mut tags).unwrap();
        List::write_value_tags(&vec![Book { id: 4 }], &mut tags).unwrap();
        assert_eq!(tags.as_str(), "#title=Sand\n#book=4\n");
        let scope = List::tag_scope_title(&2, &"Sand").unwrap();
        assert_eq!(scope.counter().name(), "library:g:t{2}:#title=Sand");
        let scope = Book::tag_scope_book::<List>(&2, &4).unwrap();
        assert_eq!(scope.counter().name(), "library:g:t{2}:#book=4");
    }
}

#[cfg(test)]
mod registry {
    #[test]
    fn query_types_have_key_spaces_of_their_own() {
        ck::registry::check().unwrap();
        let paths: Vec<&str> = ck::registry::all().iter().map(|r| r.type_path()).collect();
        assert_eq!(
            paths,
            [
                "cache_key_renamed_dependency::List",
                "cache_key_renamed_dependency::Search"
            ]
        );
    }
}
