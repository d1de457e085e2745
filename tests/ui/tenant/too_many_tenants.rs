// Thirteen tenant fields: the typed scopes take the tenant as one tuple, of
// at most twelve values.
use cache_key::CacheKey;

#[derive(CacheKey)]
#[cache_key(namespace = "crm", operation = "list")]
struct List {
    #[tenant] t1: u32,
    #[tenant] t2: u32,
    #[tenant] t3: u32,
    #[tenant] t4: u32,
    #[tenant] t5: u32,
    #[tenant] t6: u32,
    #[tenant] t7: u32,
    #[tenant] t8: u32,
    #[tenant] t9: u32,
    #[tenant] t10: u32,
    #[tenant] t11: u32,
    #[tenant] t12: u32,
    #[tenant] t13: u32,
    #[criterion] page: u32,
}

fn main() {}
