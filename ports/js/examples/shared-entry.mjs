import { createClient } from 'redis';

import { QueryType, RedisCache } from '../cache.mjs';

// The Rust service's query type, as it declares it:
//   #[cache_key(namespace = "library", operation = "search", hash_tag, value = Vec<Book>, ttl = "1m")]
//   struct Search { #[tenant] branch: u32, #[criterion] title: String }
const Search = new QueryType({
  namespace: 'library',
  operation: 'search',
  hashTag: true,
  valueId: 'Vec<Book>', // CachedQuery::VALUE_ID: `value` as written
  ttlMs: 60_000,
});

async function searchCatalog(title) {
  return [{ title, year: 0, subtitle: 'from the Node service' }]; // your database here
}

const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/' });
await client.connect();
const cache = new RedisCache({ client });

const query = Search.query({ tenant: 2, criteria: { title: 'Dune' } });
const books = await cache.getOrLoad(query, () => searchCatalog('Dune')); // Rust's entry: a hit
console.log(JSON.stringify(books));

await cache.invalidate(Search.tenantScope(2)); // branch 2: every service's next read misses
console.log(JSON.stringify((await cache.read(query)).reason)); // "absent"
await client.close();
