import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # ports/python
from cache_key import CacheKeyError  # noqa: E402
from cache_redis import QueryType  # noqa: E402
from cache_wire import UnstorableError, exact_json  # noqa: E402

# The Rust service's query type:
#   #[derive(CacheKey)]
#   #[cache_key(namespace = "shop", operation = "find", rename_all = "camelCase", value = Vec<Product>, ttl = "1m")]
#   struct Find {
#       #[tenant] store: u64,
#       #[criterion] long_text: String,
#       #[criterion] min_price: Option<f64>,
#       #[criterion(rename = "ids")] product_ids: Vec<u64>,
#   }
Find = QueryType(
    namespace="shop",
    operation="find",
    value_id="Vec<Product>",
    ttl_ms=60_000,
    tenant_type="u64",
    # Criteria by their names in the key: rename_all, then rename.
    criterion_types={"longText": "String", "minPrice": "Option<f64>", "ids": "Vec<u64>"},
)

# An integer is an int, whatever its size; a float is a float.
query = Find.query(tenant=9007199254740993, criteria={"longText": "red", "minPrice": 19.99, "ids": [7, 42]})
print(json.dumps(query.key_at(1)))  # the key Rust builds

# What Rust could not form is refused, with Rust's reason.
for tenant, criteria in [(0, {}), (2, {"ids": [1.5]}), (2, {"ids": [2.0**60]}), (2, {"color": "red"})]:
    try:
        Find.query(tenant=tenant, criteria=criteria)
    except CacheKeyError as error:
        print(json.dumps(error.kind))  # empty_tenant, not_an_integer, not_an_integer, unknown_criterion

# A value is written so that every language reads it back as it is...
print(exact_json({"price": 19.99, "stock": 2**60, "zero": -0.0, "name": "Ünïcödé 😀"}))
# ...or refused (get_or_load returns it and stores nothing).
for value in ["a\ud800", 2**64, float("nan")]:
    try:
        exact_json(value)
    except UnstorableError as error:
        print(json.dumps(error.rule))  # lone_surrogate, integer_range, non_finite
