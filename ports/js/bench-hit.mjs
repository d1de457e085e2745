// Times the Node.js port's hit (RedisCache.read: the counters and the entry,
// the envelope checked) against the same client's raw GET of the same key,
// with and without JSON.parse, and the hit of a new Query made for each read.
// REDIS_URL=redis://... node ports/js/bench-hit.mjs [reads]
// ports/bench/hits.sh runs it on a server of its own; ports/README.md has the numbers.

import { performance } from 'node:perf_hooks';

import { createClient, RESP_TYPES } from 'redis';

import { QueryType, RedisCache } from './cache.mjs';

const reads = Number(process.argv[2] ?? 20000);
const client = createClient({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/' });
await client.connect();
const cache = new RedisCache({ client });
const Search = new QueryType({ namespace: 'bench', operation: 'search', hashTag: true, valueId: 'Vec<Book>', ttlMs: 3_600_000 });
const query = Search.query({ tenant: 2, criteria: { title: 'Dune' } });
// A page of 20 books: strings, numbers and an optional field (about 2.3 KB of JSON).
const page = Array.from({ length: 20 }, (_, i) => ({
  title: `The Book of Sand, volume ${i}`,
  author: 'Jorge Luis Borges',
  year: 1975 + i,
  pages: 200 + 7 * i,
  subtitle: i % 2 === 0 ? null : `Stories, part ${i}`,
}));
await cache.insert(query, page);
const { key } = await cache.read(query);
const buffers = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } };

async function timed(label, once) {
  for (let i = 0; i < 1000; i++) await once(); // warm up
  const micros = [];
  for (let i = 0; i < reads; i++) {
    const start = performance.now();
    await once();
    micros.push((performance.now() - start) * 1000);
  }
  micros.sort((a, b) => a - b);
  const at = (q) => micros[Math.min(micros.length - 1, Math.floor(q * micros.length))];
  return { label, p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: micros.reduce((a, b) => a + b, 0) / micros.length };
}

async function commands() {
  const info = await client.sendCommand(['INFO', 'commandstats']);
  const calls = {};
  for (const line of info.split('\r\n')) {
    const match = /^cmdstat_(\w+):calls=(\d+)/.exec(line);
    if (match) calls[match[1]] = Number(match[2]);
  }
  return calls;
}

const before = { trips: cache.stats.roundTrips, calls: await commands() };
const hit = await timed('hit', async () => {
  const read = await cache.read(query);
  if (!read.hit) throw new Error(`a bench read missed: ${read.reason}`);
});
const after = { trips: cache.stats.roundTrips, calls: await commands() };
const perHit = (name) => ((after.calls[name] ?? 0) - (before.calls[name] ?? 0)) / (reads + 1000);
const get = await timed('raw GET', () => client.sendCommand(['GET', key], buffers));
const getJson = await timed('raw GET + JSON.parse', async () => JSON.parse(await client.sendCommand(['GET', key], buffers)));
// As a service reads: a new Query for each call.
const fresh = await timed('hit, a new query per read', async () => {
  const read = await cache.read(Search.query({ tenant: 2, criteria: { title: 'Dune' } }));
  if (!read.hit) throw new Error(`a bench read missed: ${read.reason}`);
});
console.log(JSON.stringify({
  port: 'node',
  reads,
  bytes: Buffer.byteLength(JSON.stringify(page)),
  round_trips_per_hit: (after.trips - before.trips) / (reads + 1000),
  commands_per_hit: Object.fromEntries(['evalsha', 'mget', 'wait', 'get'].map((name) => [name, perHit(name)])),
  results: [hit, get, getJson, fresh].map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'number' ? Math.round(v * 10) / 10 : v]))),
}));
await client.close();
