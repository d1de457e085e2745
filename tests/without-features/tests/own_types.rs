//! Types of the user's own that only share a name with the types cache-key
//! supports behind a feature: the checks that name a missing feature must not
//! refuse them. They are plain tests rather than trybuild's `pass` cases,
//! which would have trybuild build every dependency with code generation and
//! each case one at a time. The checks are by name with impls that do not
//! depend on the features, so these hold with cache-key's features off (this
//! package alone) and on (unified with the rest of the workspace).

mod named_like_features {
    use cache_key::{CacheKey, CriterionValue};

    #[derive(CriterionValue)]
    struct Uuid(String);

    #[derive(CriterionValue)]
    struct Url(String);

    #[derive(CacheKey)]
    #[cache_key(namespace = "crawler", operation = "pages")]
    struct Pages {
        #[tenant]
        site: u64,
        #[criterion]
        id: Option<Uuid>,
        #[criterion]
        start: Url,
    }

    #[test]
    fn criteria_of_own_types_named_uuid_and_url_are_keyed() {
        let query = Pages {
            site: 1,
            id: Some(Uuid("a-1".into())),
            start: Url("https://example.org/".into()),
        };
        let key = query.cache_key(0).unwrap();
        assert_eq!(
            key.as_str(),
            "crawler:s1:g0:t1:pages:id=a-1&start=https%3A%2F%2Fexample.org%2F"
        );
    }
}

mod own_uuid_tenant {
    use cache_key::{CacheKey, CriterionValue, TenantValue};

    #[derive(CriterionValue, TenantValue)]
    struct Uuid(String);

    #[derive(CacheKey)]
    #[cache_key(namespace = "billing", operation = "invoices")]
    struct ListInvoices {
        #[tenant]
        account: Uuid,
        #[criterion]
        page: u32,
    }

    #[test]
    fn a_tenant_of_an_own_type_named_uuid_is_keyed() {
        let query = ListInvoices {
            account: Uuid("acct-7".into()),
            page: 2,
        };
        let key = query.cache_key(0).unwrap();
        assert_eq!(key.as_str(), "billing:s1:g0:tacct-7:invoices:page=2");
    }
}
