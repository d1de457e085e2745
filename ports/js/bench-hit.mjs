// Times the Node.js port's hit (RedisCache.read: the counters and the entry,
// the envelope checked) against the same client's raw GET of the same key,
// with and without JSON.parse, the hit of a new Query made for each read, and
// a floor: the strict hit's four commands written by hand in one pipeline on
// the same client, as the port sent them before it read on a connection of
// its own (MGET of the query's counters, CLIENT GETNAME, WAIT 0 0, GET of
// the entry), the envelope parsed whole as the raw GET + parse does;
// and that floor and a raw GET on a plain socket (node:net, no client): what
// the port's own connection (connection.mjs) pays for the same commands.
// REDIS_URL=redis://... node ports/js/bench-hit.mjs [reads]
// ports/bench/hits.sh runs it on a server of its own; ports/README.md has the numbers.

import net from 'node:net';
import { performance } from 'node:perf_hooks';

import { createClient, RESP_TYPES } from 'redis';

import { QueryType, RedisCache } from './cache.mjs';
import { packed } from './connection.mjs';

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
// names), on the connection the raw GET uses: the client, named as the
// cache named its own connection (CLIENT SETNAME) when it learned its server.
const cacheName = (await client.sendCommand(['CLIENT', 'LIST'])).match(/ name=(cache-key:\S+)/)?.[1];
if (cacheName === undefined) throw new Error("the cache's own connection is not named");
await client.sendCommand(['CLIENT', 'SETNAME', cacheName]);
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

/**
 * Where the RESP2 reply at `at` in `bytes` ends, or -1 when it is not all
 * there yet.
 */
function replyEnd(bytes, at) {
  const line = bytes.indexOf('\r\n', at);
  if (line < 0) return -1;
  const kind = String.fromCharCode(bytes[at]);
  if (kind === '+' || kind === '-' || kind === ':') return line + 2;
  const length = Number(bytes.toString('latin1', at + 1, line));
  if (kind === '$') {
    const end = length < 0 ? line + 2 : line + 2 + length + 2;
    return end <= bytes.length ? end : -1;
  }
  if (kind !== '*') throw new Error(`not a RESP2 reply: ${JSON.stringify(kind)}`);
  let end = line + 2;
  for (let i = 0; i < length && end >= 0; i++) end = replyEnd(bytes, end);
  return end;
}


/**
 * A socket to the same server with no client in between: one call at a time
 * writes its commands packed in one buffer and answers the bytes of their
 * `count` replies once they are all read.
 */
class PlainConnection {
  #socket;
  #pending = null;
  #read = Buffer.alloc(0);

  static async open(url) {
    const { hostname, port } = new URL(url);
    const socket = net.connect({ host: hostname, port: Number(port), noDelay: true });
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    return new PlainConnection(socket);
  }

  constructor(socket) {
    this.#socket = socket;
    socket.on('data', (chunk) => {
      this.#read = this.#read.length === 0 ? chunk : Buffer.concat([this.#read, chunk]);
      const pending = this.#pending;
      if (pending === null) throw new Error(`a reply nothing asked for: ${this.#read.toString('latin1', 0, 80)}`);
      let end = 0;
      for (let i = 0; i < pending.count && end >= 0; i++) end = replyEnd(this.#read, end);
      if (end < 0) return;
      this.#pending = null;
      const replies = this.#read;
      this.#read = Buffer.alloc(0);
      pending.resolve(replies);
    });
    socket.on('error', (error) => this.#pending?.reject(error));
    socket.on('close', () => this.#pending?.reject(new Error('the server closed the plain socket')));
  }

  /** Writes `commands` (packed) and answers the bytes of its `count` replies. */
  call(commands, count) {
    return new Promise((resolve, reject) => {
      this.#pending = { count, resolve, reject };
      this.#socket.write(commands);
    });
  }

  close() {
    this.#socket.destroy();
  }
}

/** The payload of the bulk string reply at `at` in `replies`. */
function bulkAt(replies, at) {
  const line = replies.indexOf('\r\n', at);
  const length = Number(replies.toString('latin1', at + 1, line));
  return replies.subarray(line + 2, line + 2 + length);
}

// The plain socket named as the cache's connection is, so that its CLIENT
// GETNAME answers what the hit's does.
const plain = await PlainConnection.open(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/');
await plain.call(packed([['CLIENT', 'SETNAME', cacheName]]), 1);
const plainStrictCommands = Buffer.from(packed([['MGET', ...counters], ['CLIENT', 'GETNAME'], ['WAIT', '0', '0'], ['GET', key]]));
const plainGetCommand = Buffer.from(packed([['GET', key]]));
/** The entry's bytes in the floor's replies: the fourth reply's payload. */
function entryOf(replies) {
  let at = 0;
  for (let i = 0; i < 3; i++) at = replyEnd(replies, at);
  return bulkAt(replies, at);
}
/** The floor's four commands on the plain socket, the entry parsed whole. */
async function plainStrict() {
  return JSON.parse(entryOf(await plain.call(plainStrictCommands, 4)));
}
/** A raw GET on the plain socket, the entry parsed whole. */
async function plainGet() {
  return JSON.parse(bulkAt(await plain.call(plainGetCommand, 1), 0));
}
{
  // Checked once, untimed: the plain socket reads what the client reads.
  const replies = await plain.call(plainStrictCommands, 4);
  const name = `$${cacheName.length}\r\n${cacheName}\r\n`;
  if (!replies.toString('latin1').includes(name)) throw new Error(`the plain socket is not named ${cacheName}`);
  if (JSON.parse(entryOf(replies)).value.length !== page.length) throw new Error('the plain floor read another entry');
  if ((await plainGet()).value.length !== page.length) throw new Error('the plain GET read another entry');
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
  ['raw GET + JSON.parse, plain socket', plainGet],
  ['raw strict read, plain socket', plainStrict],
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
    'plain GET + parse / raw GET': ratio(5, 1),
    'plain floor / raw GET': ratio(6, 1),
    'hit / plain floor': ratio(0, 6),
  },
}));
plain.close();
await client.close();
