// Each tag of a value has a typed scope, `tag_scope_<name>` with `-` written
// `_`: two names giving one function are refused. One name on two fields is
// one tag, with one scope.
use cache_key::CacheTags;

#[derive(CacheTags)]
struct Order {
    #[tag = "order-line"]
    line: u64,
    #[tag = "order_line"]
    other_line: u64,
    #[tag = "product"]
    product: u64,
    #[tag = "product"]
    replaced: Option<u64>,
}

fn main() {}
