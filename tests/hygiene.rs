//! The derive's output compiles warning-free in a scope that shadows the
//! prelude names it could otherwise pick up by accident.
#![deny(warnings)]
#![allow(dead_code, non_camel_case_types)]

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct String;
struct u64;
struct str;
mod core {}
mod std {}

// Every attribute, with prelude-shadowed types: the shape under test, not `fixtures::Search`.
#[derive(::cache_key::CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "search",
    schema = 3,
    max_len = 250,
    hash_tag
)]
struct Search<'a> {
    #[tenant]
    branch: &'a ::core::primitive::str,
    #[criterion(rename = "q")]
    title: &'a ::core::primitive::str,
    #[skip(reason = "tracing only")]
    trace: ::core::primitive::u32,
}

#[derive(::cache_key::CacheKey)]
#[cache_key(namespace = "library", global = "the branch directory is public")]
struct Branches {
    #[criterion]
    city: &'static ::core::primitive::str,
}

fn digits(text: &&'static ::core::primitive::str) -> ::std::string::String {
    text.chars().filter(char::is_ascii_digit).collect()
}

#[derive(::cache_key::Criteria)]
struct Paging {
    #[criterion]
    page: ::core::primitive::u32,
}

#[derive(::cache_key::CriterionValue)]
#[criterion(rename_all = "snake_case")]
enum Sort {
    TitleAsc,
}

#[derive(::cache_key::CacheKey)]
#[cache_key(namespace = "library", operation = "find")]
struct Find {
    #[tenant]
    branch: ::core::primitive::u32,
    #[criterion(trim, lowercase)]
    title: &'static ::core::primitive::str,
    #[criterion(with = digits)]
    isbn: &'static ::core::primitive::str,
    #[criterion]
    sort: Sort,
    #[criterion(flatten)]
    paging: Paging,
}

#[derive(::cache_key::CacheTags, Clone)]
struct Book {
    #[tag = "book"]
    id: ::core::primitive::u64,
    #[tag(name = "author", global = "one catalog")]
    authors: ::std::vec::Vec<::core::primitive::u64>,
}

#[derive(::cache_key::CacheTags, Clone)]
struct Shelf {
    #[tags]
    books: ::std::vec::Vec<Book>,
}

// Tags and their typed scopes, with a tag value named like the expansion's
// own parameters.
#[derive(::cache_key::CacheKey)]
#[cache_key(
    namespace = "library",
    operation = "shelf",
    value = Shelf,
    ttl = "1m",
    value_tags
)]
struct ShelfQuery {
    #[tenant]
    branch: ::core::primitive::u32,
    #[criterion]
    #[tag = "value"]
    value: ::core::primitive::u64,
    #[criterion]
    #[tag(name = "tags", global = "one catalog")]
    tags: ::std::option::Option<&'static ::core::primitive::str>,
}

#[test]
fn tags_derive_in_a_hostile_scope() {
    use ::cache_key::CacheKey as _;
    use ::cache_key::cache::CachedQuery as _;
    let query = ShelfQuery {
        branch: 2,
        value: 9,
        tags: ::core::option::Option::Some("t"),
    };
    let mut tags = ::cache_key::Tags::new();
    query.write_query_tags(&mut tags).unwrap();
    assert_eq!(tags.as_str(), "#value=9\n@tags=t\n");
    ShelfQuery::tag_scope_value(&2, &9).unwrap();
    ShelfQuery::tag_scope_tags(&"t").unwrap();
    let shelf = Shelf {
        books: ::std::vec![Book {
            id: 1,
            authors: ::std::vec![3]
        }],
    };
    let mut tags = ::cache_key::Tags::new();
    ShelfQuery::write_value_tags(&shelf, &mut tags).unwrap();
    assert_eq!(tags.as_str(), "#book=1\n@author=3\n");
}

// A value's typed tag scopes take a query type parameter, `Q` unless the
// struct could name a `Q` of its own: a tenant value named `Q`, a type
// parameter named `Q`.
#[derive(::cache_key::CriterionValue, ::cache_key::TenantValue)]
struct Q(::core::primitive::u32);

#[derive(::cache_key::CacheTags)]
struct Loan<'a, T> {
    #[tag = "loan"]
    id: Q,
    #[tag = "member"]
    member: &'a T,
}

#[derive(::cache_key::CacheTags)]
struct Hold<Q> {
    #[tag(name = "hold", global = "one catalog")]
    id: ::std::vec::Vec<Q>,
}

#[test]
fn value_tag_scopes_in_a_hostile_scope() {
    let book = Book::tag_scope_book::<ShelfQuery>(&2, &1).unwrap();
    assert_eq!(book.counter().name(), "library:g:t{2}:#book=1");
    let author = Book::tag_scope_author::<ShelfQuery>(&3).unwrap();
    assert_eq!(author.counter().name(), "library:g:@{library}:author=3");
    let loan = Loan::<::core::primitive::u32>::tag_scope_loan::<ShelfQuery>(&2, &Q(5)).unwrap();
    assert_eq!(loan.counter().name(), "library:g:t{2}:#loan=5");
    Loan::tag_scope_member::<ShelfQuery>(&2, &&6u32).unwrap();
    let hold = Hold::<&::core::primitive::str>::tag_scope_hold::<ShelfQuery>(&"h").unwrap();
    assert_eq!(hold.counter().name(), "library:g:@{library}:hold=h");
}

#[test]
fn derives_in_a_hostile_scope() {
    use ::cache_key::CacheKey as _;
    let key = Search {
        branch: "b",
        title: "t",
        trace: 1,
    }
    .cache_key(1)
    .unwrap();
    assert_eq!(key.as_str(), "library:s3:g1:t{b}:search:q=t");
    let key = Branches { city: "Ankara" }.cache_key(1).unwrap();
    assert_eq!(key.as_str(), "library:s1:g1:t:branches:city=Ankara");
    let find = Find {
        branch: 2,
        title: " Sand ",
        isbn: "978-0",
        sort: Sort::TitleAsc,
        paging: Paging { page: 3 },
    };
    let key = find.cache_key(1).unwrap();
    assert_eq!(
        key.as_str(),
        "library:s1:g1:t2:find:isbn=9780&page=3&sort=title_asc&title=sand"
    );
}
