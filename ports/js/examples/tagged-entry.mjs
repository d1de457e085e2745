import { createClient } from 'redis';

import { QueryType, RedisCache } from '../cache.mjs';

// The Rust service's query type, whose answers carry tags from their value:
//   #[cache_key(namespace = "library", operation = "shelf", hash_tag)]
//   struct Shelf { #[tenant] branch: u32, #[criterion] term: String }
// and its CachedQuery: Value = Vec<Item>, VALUE_ID = "Vec<Item>", TTL 1m,
// VALUE_TAGS = true, write_value_tags pushing each item's id as `book`
// inside the branch and its author as `author`, shared by every branch.
const Shelf = new QueryType({
  namespace: 'library',
  operation: 'shelf',
  hashTag: true,
  valueId: 'Vec<Item>',
  ttlMs: 60_000,
  // The same tags as write_value_tags: an answer this service stores is
  // checked by every service, and the other way round.
  tagsOf: (items) => items.flatMap((item) => [
    { name: 'book', value: item.id },
    { name: 'author', value: item.author, global: true },
  ]),
});

async function shelfOf(term) {
  return [{ id: 42, author: 'Borges', printing: 0 }]; // your database here
}

const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/' });
await client.connect();
const cache = new RedisCache({ client });

const query = Shelf.query({ tenant: 2, criteria: { term: 'fiction' } });
const items = await cache.getOrLoad(query, () => shelfOf('fiction')); // Rust's entry: a hit, its tags checked
console.log(JSON.stringify(items));

// Book 42 of branch 2 changed: every answer showing it misses, in every
// service (Shelf.globalTagScope('author', 'Borges') would end every
// branch's answers showing Borges).
await cache.invalidate(Shelf.tagScope(2, 'book', 42));
console.log(JSON.stringify((await cache.read(query)).reason)); // "absent"
await client.close();
