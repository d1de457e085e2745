// Times the Node.js port's hit (RedisCache.read: the counters and the entry,
// the envelope checked) against the same client's raw GET of the same key,
// with and without JSON.parse, the hit of a new Query made for each read, and
// a floor: the strict hit's four commands written by hand in one pipeline on
// the same client (MGET of the query's counters, CLIENT GETNAME, WAIT 0 0,
// GET of the entry), the envelope parsed whole as the raw GET + parse does.
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

// The floor reads the counters the hit reads for this query (the port's own
// names), on the connection the raw GET uses: the cache's client, named by
// the cache (CLIENT SETNAME) when it learned its server.
const counters = query.counters;
if (counters.length !== 3) throw new Error(`the bench query reads ${counters.length} counters, not 3: ${counters}`);
const existing = await client.sendCommand(['EXISTS', ...counters]);
if (existing !== counters.length) throw new Error(`only ${existing} of the counters ${counters} exist`);
/** The strict hit's commands in one pipeline, written together (one chain, as the port's hit sends them); the entry parsed whole. */
async function rawStrict() {
  const chainId = Symbol('floor');
  const text = { typeMapping: {}, chainId };
  const [, , , bytes] = await Promise.all([
    client.sendCommand(['MGET', ...counters], text),
    client.sendCommand(['CLIENT', 'GETNAME'], text),
    client.sendCommand(['WAIT', '0', '0'], text),
    client.sendCommand(['GET', key], { ...buffers, chainId }),
  ]);
  return JSON.parse(bytes);
}
{
  // Checked once, untimed: the replies a strict hit judges are all there.
  const [values, name, replicas, bytes] = await Promise.all([
    client.sendCommand(['MGET', ...counters]),
    client.sendCommand(['CLIENT', 'GETNAME']),
    client.sendCommand(['WAIT', '0', '0']),
    client.sendCommand(['GET', key], buffers),
  ]);
  if (values.some((v) => v === null)) throw new Error(`a counter read nil: ${values}`);
  if (typeof name !== 'string' || !name.startsWith('cache-key:')) throw new Error(`the floor's connection is not the cache's named one: ${name}`);
  if (replicas !== 0) throw new Error(`WAIT 0 0 answered ${replicas}`);
  if (JSON.parse(bytes).value.length !== page.length) throw new Error('the floor read another entry');
}

/** The sample at quantile `q` of sorted `micros`. */
const at = (micros, q) => micros[Math.min(micros.length - 1, Math.floor(q * micros.length))];

async function commands() {
  const info = await client.sendCommand(['INFO', 'commandstats']);
  const calls = {};
  for (const line of info.split('\r\n')) {
    const match = /^cmdstat_(\w+):calls=(\d+)/.exec(line);
    if (match) calls[match[1]] = Number(match[2]);
  }
  return calls;
}

async function hitOnce() {
  const read = await cache.read(query);
  if (!read.hit) throw new Error(`a bench read missed: ${read.reason}`);
}

const kinds = [
  ['hit', hitOnce],
  ['raw GET', () => client.sendCommand(['GET', key], buffers)],
  ['raw GET + JSON.parse', async () => JSON.parse(await client.sendCommand(['GET', key], buffers))],
  // As a service reads: a new Query for each call.
  ['hit, a new query per read', async () => {
    const read = await cache.read(Search.query({ tenant: 2, criteria: { title: 'Dune' } }));
    if (!read.hit) throw new Error(`a bench read missed: ${read.reason}`);
  }],
  ['raw strict read (floor)', rawStrict],
];
for (const [, once] of kinds) for (let i = 0; i < 1000; i++) await once(); // warm up

// What a hit sends, counted on untimed hits.
const counted = 1000;
const before = { trips: cache.stats.roundTrips, calls: await commands() };
for (let i = 0; i < counted; i++) await hitOnce();
const after = { trips: cache.stats.roundTrips, calls: await commands() };
const perHit = (name) => ((after.calls[name] ?? 0) - (before.calls[name] ?? 0)) / counted;

// Timed in rounds of ROUND reads of each kind in turn, so that every kind
// meets the machine's load of the same moment; a ratio is taken per round.
const ROUND = 500;
const samples = kinds.map(() => []);
const medians = kinds.map(() => []);
for (let done = 0; done < reads; done += ROUND) {
  for (const [k, [, once]] of kinds.entries()) {
    const micros = [];
    for (let i = 0; i < Math.min(ROUND, reads - done); i++) {
      const start = performance.now();
      await once();
      micros.push((performance.now() - start) * 1000);
    }
    samples[k].push(...micros);
    medians[k].push(at(micros.sort((a, b) => a - b), 0.5));
  }
}
const tenth = (v) => Math.round(v * 10) / 10;
const round = (v) => Math.round(v * 100) / 100;
const results = kinds.map(([label], k) => {
  const micros = samples[k].sort((a, b) => a - b);
  return { label, p50: tenth(at(micros, 0.5)), p90: tenth(at(micros, 0.9)), p99: tenth(at(micros, 0.99)), mean: tenth(micros.reduce((a, b) => a + b, 0) / micros.length) };
});
/** The ratio of kind `a`'s median to kind `b`'s, per round: their median, least and most. */
function ratio(a, b) {
  const each = medians[a].map((m, r) => m / medians[b][r]).sort((x, y) => x - y);
  return { median: round(at(each, 0.5)), min: round(each[0]), max: round(each[each.length - 1]) };
}
console.log(JSON.stringify({
  port: 'node',
  reads,
  rounds: medians[0].length,
  bytes: Buffer.byteLength(JSON.stringify(page)),
  round_trips_per_hit: (after.trips - before.trips) / counted,
  commands_per_hit: Object.fromEntries(['evalsha', 'mget', 'wait', 'get'].map((name) => [name, perHit(name)])),
  results,
  ratios: {
    'hit / raw GET': ratio(0, 1),
    'hit / raw GET + parse': ratio(0, 2),
    'new query hit / raw GET': ratio(3, 1),
    'floor / raw GET': ratio(4, 1),
    'hit / floor': ratio(0, 4),
  },
}));
await client.close();
