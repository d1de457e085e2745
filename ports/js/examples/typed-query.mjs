import { QueryType } from '../cache.mjs';
import { exactJSON } from '../wire.mjs';

// The Rust service's query type:
//   #[derive(CacheKey)]
//   #[cache_key(namespace = "shop", operation = "find", rename_all = "camelCase", value = Vec<Product>, ttl = "1m")]
//   struct Find {
//       #[tenant] store: u64,
//       #[criterion] long_text: String,
//       #[criterion] min_price: Option<f64>,
//       #[criterion(rename = "ids")] product_ids: Vec<u64>,
//   }
const Find = new QueryType({
  namespace: 'shop',
  operation: 'find',
  valueId: 'Vec<Product>',
  ttlMs: 60_000,
  tenantType: 'u64',
  // Criteria by their names in the key: rename_all, then rename.
  criterionTypes: { longText: 'String', minPrice: 'Option<f64>', ids: 'Vec<u64>' },
});

// A u64 past 2^53 is a BigInt; a float is a Number.
const query = Find.query({ tenant: 9007199254740993n, criteria: { longText: 'red', minPrice: 19.99, ids: [7, 42] } });
console.log(JSON.stringify(query.keyAt(1n))); // the key Rust builds

// What Rust could not form is refused, with Rust's reason.
for (const [tenant, criteria] of [[0, {}], [2, { ids: [1.5] }], [2, { ids: [2 ** 60] }], [2, { color: 'red' }]]) {
  try {
    Find.query({ tenant, criteria });
  } catch (error) {
    console.log(JSON.stringify(error.kind)); // empty_tenant, not_an_integer, not_an_integer, unknown_criterion
  }
}

// A value is written so that every language reads it back as it is...
console.log(exactJSON({ price: 19.99, stock: 2n ** 60n, zero: -0, name: 'Ünïcödé 😀' }));
// ...or refused (getOrLoad returns it and stores nothing).
for (const value of [2 ** 60, 'a\ud800', 2n ** 64n, NaN]) {
  try {
    exactJSON(value);
  } catch (error) {
    console.log(JSON.stringify(error.rule)); // inexact_integer, lone_surrogate, integer_range, non_finite
  }
}
