import { createClient } from 'redis';

import { FailurePolicy, QueryType, RedisCache } from '../cache.mjs';

const Search = new QueryType({
  namespace: 'library',
  operation: 'search',
  hashTag: true,
  valueId: 'Vec<Book>',
  ttlMs: 60_000,
});

async function searchCatalog(title) {
  return [{ title, year: 1965, subtitle: null }]; // your database here
}

// Redis is down: nothing listens at REDIS_URL.
const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/', socket: { reconnectStrategy: false } });
client.on('error', () => {}); // the cache reports each failure of a call
await client.connect().catch(() => {});
const query = Search.query({ tenant: 2, criteria: { title: 'Dune' } });

// The default, as Rust's FailurePolicy::CallOrigin: the origin answers,
// nothing is stored, the failure is counted and told.
const cache = new RedisCache({ client, onFailure: (error) => console.error(`cache: ${error.kind}: ${error.message}`) });
console.log(JSON.stringify(await cache.getOrLoad(query, () => searchCatalog('Dune')))); // the origin's answer
console.log(JSON.stringify(cache.stats.degraded)); // 1

// Strict, as FailurePolicy::ReturnError: the caller handles the failure.
const strict = new RedisCache({ client, failurePolicy: FailurePolicy.RETURN_ERROR });
await strict.getOrLoad(query, () => searchCatalog('Dune')).catch((error) => console.log(JSON.stringify(error.kind))); // "backend"
