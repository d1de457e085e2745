// A typed cache in Redis that a Node.js service shares with Rust services
// using cache-key's RedisCache (and with the Python port): wire format 6 of
// cache-key/WIRE-FORMAT.md on the `redis` client (node-redis), on one server
// or a Redis Cluster. wire.mjs holds the protocol's data; this module only
// sends and judges; on one server, every command goes on a connection of the
// cache's own (connection.mjs), not through the client. One
// read is one round trip when the generation last seen for the query's
// scope is still current (the entry's GET goes with the counters), two
// otherwise, and one more for a hit whose entry has tags from its value
// (their counters). A query's own tags (criteria marked as
// tags, `queryTags`) are counters of its key's generation, read with the
// others.

import { ErrorReply, RESP_TYPES } from 'redis';

import { OwnConnection } from './connection.mjs';
import { buildKey, checkDeclared, checkRustType, GLOBAL, KeyError, KeyTemplate } from './cache-key.mjs';
import {
  CLOCK_SCRIPT,
  clockNames,
  clockValue,
  counterNames,
  decodeEnvelope,
  DEFAULT_MAX_TAGS,
  encodeEnvelope,
  Epoch,
  FIRST_REDIS_VERSION,
  INSTANCE_SCRIPT,
  instanceOf,
  keptTags,
  MAX_STEPS,
  namespaceCounter,
  operationCounter,
  queryDigest,
  queryTagLines,
  queryTagSpecs,
  raisedValue,
  slotOf,
  sumGeneration,
  tagCounter,
  tagLineCounter,
  tagsUnchanged,
  tenantCounter,
  TooManyTagsError,
  trustedValue,
  UnstorableError,
  WireError,
} from './wire.mjs';

export { GLOBAL, TooManyTagsError, UnstorableError, WireError };

/** Replies as Buffers, so that an entry's bytes are judged as bytes (invalid UTF-8 is a miss). */
const BYTES = Object.freeze({ [RESP_TYPES.BLOB_STRING]: Buffer });
const BUFFERS = { typeMapping: BYTES };
const GETNAME = Object.freeze(['CLIENT', 'GETNAME']);
const WAIT = Object.freeze(['WAIT', '0', '0']);
const INFO_REPLICATION = Object.freeze(['INFO', 'server', 'replication']);

/**
 * A failure of the cache (never a miss): `kind` is `backend` (Redis refused
 * or could not be reached; the client's error is `cause`) or one of
 * WireError's kinds (`not_a_counter`, `overflow`, `old_server`, `unsettled`,
 * `protocol`).
 */
export class CacheError extends Error {
  constructor(kind, message, cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'CacheError';
    this.kind = kind;
  }
}

const VALUE_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * What a query type is to the cache: the key parts every query of it shares
 * (`namespace`, `operation`, `schema`, `hashTag`, `maxLen`), its value id
 * (the Rust `CachedQuery::VALUE_ID`: `value = Vec<Book>` declares
 * `"Vec<Book>"`) and how long an answer is fresh (`ttlMs`). `accepts(value)`,
 * if given, checks a value read from Redis the way the Rust value type's
 * deserialization would: a value it refuses is a miss (`undecodable`).
 *
 * `tagsOf(value)`, if given, makes answers tagged from their value (the Rust
 * `CachedQuery::VALUE_TAGS`): the entities an answer shows, as `[{name,
 * value, global}]` (`value` text or an integer, as a tenant value; `global`
 * for a tag every tenant of the namespace shares, otherwise it is inside the
 * query's tenant). The entry keeps them (at most `maxTags`) with when its
 * fill began, and is served only while none was bumped since
 * (`cache.invalidate(type.tagScope(tenant, name, value))`).
 *
 * `queryTags` (the Rust `#[criterion] #[tag = "book"]`, `#[tag(name =
 * "author", global = "...")]`) marks criteria as the query's own tags:
 * `[{criterion, name, global}]`, `criterion` the name of a criterion as the
 * query's criteria give it. Each query then has a tag per value of each
 * such criterion (none for null, one per element of an array or a Set,
 * repeats kept), in this order, and their counters are among those its
 * key's generation sums: bumping `tagScope(tenant, 'book', 42)` ends every
 * entry of a query asking for book 42, whatever its value holds. Its
 * entries record the tags as `qtags`.
 *
 * `tenantType` and `criterionTypes` ({name: type}) declare the Rust types
 * of the tenant and the criteria (`'u64'`, `'String'`, `'Option<u32>'`,
 * `'Vec<u64>'`...; criteria by their names in the key, after `rename_all`
 * and `rename`): a query Rust could not form is refused when it is made
 * (checkDeclared: `not_an_integer`, `out_of_range`, `wrong_type`,
 * `unknown_criterion`), never cached under a key Rust never
 * writes. Without them the values are taken as given.
 */
export class QueryType {
  constructor({ namespace, operation, schema = 1, hashTag = false, maxLen = Infinity, valueId, ttlMs, accepts = null, tagsOf = null, maxTags = DEFAULT_MAX_TAGS, queryTags = [], tenantType = null, criterionTypes = null }) {
    if (typeof valueId !== 'string' || !VALUE_ID.test(valueId)) {
      throw new TypeError(`valueId is 1 to 128 printable ASCII characters without white space, as the Rust VALUE_ID, not ${JSON.stringify(valueId)}`);
    }
    if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
      throw new RangeError(`ttlMs is a positive whole number of milliseconds, not ${ttlMs}`);
    }
    if (tagsOf !== null && typeof tagsOf !== 'function') {
      throw new TypeError('tagsOf is a function of an answer giving its tags, [{name, value, global}]');
    }
    if (!Number.isSafeInteger(maxTags) || maxTags < 0) {
      throw new RangeError(`maxTags is a whole number, not ${maxTags}`);
    }
    if (tenantType !== null) [tenantType].flat().forEach(checkRustType);
    if (criterionTypes !== null) Object.values(criterionTypes).forEach(checkRustType);
    Object.assign(this, { namespace, operation, schema, hashTag, maxLen, valueId, ttlMs, accepts, tagsOf, maxTags, queryTags: queryTagSpecs(queryTags), tenantType, criterionTypes });
    // A key at generation 0 checks the namespace, operation and schema now.
    buildKey({ namespace, operation, schema, tenant: GLOBAL, generation: 0 });
    Object.freeze(this);
  }

  /** One query: its tenant (a value, an array of parts, or GLOBAL) and criteria (as buildKey takes them). */
  query({ tenant, criteria = [] }) {
    return new Query(this, tenant, criteria);
  }

  /** Every key of the namespace, whatever its query type. */
  namespaceScope() {
    return { counter: namespaceCounter(this.namespace) };
  }

  /** Every key of a tenant in the namespace; for a compound tenant, its first values alone cover every tenant starting with them. */
  tenantScope(tenant) {
    return { counter: tenantCounter(this.namespace, tenant) };
  }

  /** Every key of this type's operation for one tenant (GLOBAL: of the global keys). */
  operationScope(tenant) {
    return { counter: operationCounter(this.namespace, tenant, this.operation) };
  }

  /**
   * Every entry of the namespace tagged `name` = `value` inside `tenant`
   * (the whole tenant, as a query gives it; GLOBAL for the global queries'),
   * whatever its query type. `value` is written as the tagging side writes
   * it: 42 and "42" are one tag, "042" another.
   */
  tagScope(tenant, name, value) {
    return { counter: tagCounter(this.namespace, tenant, { name, value }) };
  }

  /** Every entry of the namespace tagged `name` = `value` as a tag every tenant shares (`global`). */
  globalTagScope(name, value) {
    return { counter: tagCounter(this.namespace, GLOBAL, { name, value, global: true }) };
  }
}

/** Readable keys hashed lately, for queries made anew for each read: at most DIGESTS keys of at most DIGESTED_KEY characters. */
const digests = new Map();
const DIGESTS = 1024;
const DIGESTED_KEY = 512;

/** queryDigest(readableKey), remembered for a short key. */
function digestOf(readableKey) {
  if (readableKey.length > DIGESTED_KEY) return queryDigest(readableKey);
  let digest = digests.get(readableKey);
  if (digest === undefined) {
    digest = queryDigest(readableKey);
    if (digests.size >= DIGESTS) digests.clear();
    digests.set(readableKey, digest);
  }
  return digest;
}

/**
 * A query of a QueryType: its own tag lines (`queryTags`: `#name=value` or
 * `@name=value`, from its criteria as the type's queryTags say, in order,
 * repeats kept), its counters (the namespace's, its tenant's, its
 * operation's, then one per tag line), and its key at a generation. A bad
 * tenant or criterion, or an empty tag value (KeyError `empty_tag`), is
 * reported when the query is made.
 */
export class Query {
  #scopeKey;
  #keys;
  // The digest of the readable key at the generation last asked (digestAt).
  #digestGeneration = -1n;
  #digest = '';

  constructor(type, tenant, criteria) {
    this.type = type;
    this.tenant = tenant;
    this.criteria = criteria;
    const { namespace, operation, schema, hashTag, maxLen, tenantType, criterionTypes } = type;
    checkDeclared({ tenant, criteria, tenantType, criterionTypes });
    // The operation's counter names the scope (and reports a bad tenant first).
    const operationKey = operationCounter(namespace, tenant, operation);
    // Written once, reporting a bad tenant or criterion (or a key too long) here, not on a read.
    this.#keys = new KeyTemplate({ namespace, operation, schema, hashTag, maxLen, tenant, criteria });
    this.keyAt(0n);
    this.queryTags = Object.freeze(queryTagLines(type.queryTags, criteria));
    this.counters = Object.freeze(counterNames({ namespace, operation, tenant, tagLines: this.queryTags }));
    // A query's tags narrow the scope: their counters are in its generation.
    this.#scopeKey = this.queryTags.length === 0 ? operationKey : [operationKey, ...this.queryTags].join('\n');
    Object.freeze(this);
  }

  keyAt(generation) {
    return this.#keys.keyAt(generation);
  }

  /** The key with its criteria never summarized: its SHA-256 is the envelope's `query`. */
  readableKeyAt(generation) {
    return this.#keys.readableKeyAt(generation);
  }

  /** The envelope's `query` at `generation`: the SHA-256 of the readable key, hashed once per generation. */
  digestAt(generation) {
    if (generation !== this.#digestGeneration) {
      this.#digest = digestOf(this.readableKeyAt(generation));
      this.#digestGeneration = generation;
    }
    return this.#digest;
  }

  tenantScope() {
    return this.type.tenantScope(this.tenant);
  }

  operationScope() {
    return this.type.operationScope(this.tenant);
  }

  /** The tag `name` = `value` inside this query's tenant. */
  tagScope(name, value) {
    return this.type.tagScope(this.tenant, name, value);
  }

  /** The counter of each tag line (`#...`, `@...`) of an entry of this query. */
  tagCounters(lines) {
    return lines.map((line) => tagLineCounter(this.type.namespace, this.tenant, line));
  }

  /** Where a fill reads the tag clock (the tenant's tags' slot, the namespace's shared tags' slot). */
  get clockNames() {
    return clockNames(this.type.namespace, this.tenant);
  }

  /** What identifies the query's generation: its counters (namespace, tenant, operation, and its own tags). */
  get scopeKey() {
    return this.#scopeKey;
  }
}

const settled = (value) => ({ ok: true, value });
const failed = (error) => ({ ok: false, error });

/** A promise's outcome, `{ok, value}` or `{ok: false, error}`, never rejected. */
function settle(promise) {
  return Promise.resolve(promise).then(settled, failed);
}

/** An error reply whose code (its first word) is `code`. */
function isError(outcome, code) {
  return !outcome.ok && typeof outcome.error?.message === 'string' && outcome.error.message.split(' ', 1)[0] === code;
}

function backend(outcome, what) {
  if (outcome.error instanceof WireError || outcome.error instanceof CacheError) {
    return outcome.error;
  }
  return new CacheError('backend', `${what}: ${outcome.error?.message ?? outcome.error}`, outcome.error);
}

/**
 * The instance a connection to one server learned (its run id, then its
 * replication id), the name it gave itself there, and whether a read found
 * the server a replica since: what a plain read of counters trusts
 * (WIRE-FORMAT.md, "Reading counters on a connection that knows its server").
 */
class Instance {
  constructor(id, sockets, replica) {
    this.id = id;
    this.name = `cache-key:${id}`;
    // How many sockets the client had opened when it learned this instance.
    this.sockets = sockets;
    // A replica's dataset may come from another primary: once it is a
    // primary again (a new replication id), the connection learns again.
    this.demoted = replica;
  }
}

/** The instance id in an `INFO server replication` text, and whether the server is a replica; an error before Redis 7. */
function instanceIn(info) {
  const field = (name) => new RegExp(`^${name}:([^\r\n]+)`, 'm').exec(info)?.[1].trim();
  const [runId, replid, version, role] = ['run_id', 'master_replid', 'redis_version', 'role'].map(field);
  if (!runId || !replid || !version) {
    throw new WireError('protocol', 'INFO server replication names no run id, replication id and version');
  }
  if (!(Number(version.split('.')[0]) >= FIRST_REDIS_VERSION)) {
    throw new WireError(
      'old_server',
      `Redis ${version} is older than ${FIRST_REDIS_VERSION}: its scripts are saved and replicated, so generation counters could not tell a restarted or promoted server from the one that wrote them`,
    );
  }
  // Checked as the script's text will hold it.
  return { id: new Epoch(`${runId}${replid}`).instanceId, replica: role !== 'master' };
}

/**
 * One server: every counter in one group. Every command goes on a
 * connection of the cache's own to the client's server (connection.mjs), in
 * the database the client's options name, whatever the client `SELECT`s
 * later: counters are read plainly there (`MGET`, checked by `CLIENT
 * GETNAME` and `WAIT 0 0` in the same pipeline) once it learned its server.
 * One per client, whichever caches share it.
 */
class ServerTransport {
  #instance = null;
  #learning = null;

  static #ofClient = new WeakMap();

  /** The transport of `client`, made on first use. */
  static of(client) {
    let transport = ServerTransport.#ofClient.get(client);
    if (transport === undefined) {
      transport = new ServerTransport(client);
      ServerTransport.#ofClient.set(client, transport);
    }
    return transport;
  }

  constructor(client) {
    this.client = client;
    this.own = new OwnConnection(client);
    // One clock for every tag: the tenant's and the namespace's are one reading.
    this.clustered = false;
    this.plain = true;
  }

  /** How many sockets the own connection has opened: a new one learns its server again. */
  get sockets() {
    return this.own.opened;
  }

  group() {
    return 'server';
  }

  /** `args` on the own connection: its reply (Buffers for bulk strings), or rejected with its error. */
  async send(_key, args) {
    const [outcome] = await this.#own([args], 0);
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  flushScripts() {
    return this.send(null, ['SCRIPT', 'FLUSH']);
  }

  /**
   * `texts` then `bytes` in one pipeline on the own connection, each
   * answered as `{ok, value}` or `{ok: false, error}`, the first as text,
   * the others as Buffers; a failed socket answers each with its error, and
   * is never the next call's. While the client is closed, as the client
   * would answer.
   */
  pipeline(texts, bytes) {
    return this.#own([...texts, ...bytes], texts.length);
  }

  async #own(commands, texts) {
    if (!this.client.isOpen) {
      const closed = { ok: false, error: new CacheError('backend', 'the client is closed') };
      return commands.map(() => closed);
    }
    return this.own.call(commands, texts);
  }

  /** Whether the own connection opened another socket since `instance` was learned. */
  reconnectedSince(instance) {
    return instance.sockets !== this.sockets;
  }

  /** The instance the own connection knows, or null if it has none (or reconnected since). */
  known() {
    const known = this.#instance;
    return known !== null && !this.reconnectedSince(known) ? known : null;
  }

  /** The instance the own connection knows, learned first if it has none (or reconnected since). */
  async instance(stats) {
    const known = this.known();
    if (known !== null) return known;
    this.#learning ??= this.#learn(stats).finally(() => {
      this.#learning = null;
    });
    return this.#learning;
  }

  /** Forgets `instance`, if still the one known: the next read learns its connection's server. */
  forget(instance) {
    if (this.#instance === instance) this.#instance = null;
  }

  /**
   * Learns the server: `INFO server replication`, then the name set in a
   * transaction with the same `INFO`, so that the name and the instance it
   * names belong to one server connection, even if the client reconnected
   * (or a proxy moved it) between the two.
   */
  async #learn(stats) {
    for (let step = 1; step <= MAX_STEPS; step++) {
      if (stats !== null) stats.roundTrips += 2;
      const [learned] = await this.#own([INFO_REPLICATION], 1);
      if (!learned.ok) throw backend(learned, 'asking the server for its instance id');
      const { id } = instanceIn(learned.value);
      // A reconnect after this leaves the name behind: the next read learns again.
      const sockets = this.sockets;
      const replies = await this.#own([['MULTI'], ['CLIENT', 'SETNAME', `cache-key:${id}`], INFO_REPLICATION, ['EXEC']], 4);
      const failed = replies.find((reply) => !reply.ok);
      if (failed !== undefined) throw backend(failed, 'naming the connection after its instance');
      const done = replies[3].value;
      const inside = Array.isArray(done) ? done.find((reply) => reply instanceof ErrorReply) : undefined;
      if (inside !== undefined) throw backend({ ok: false, error: inside }, 'naming the connection after its instance');
      if (!Array.isArray(done) || done.length !== 2) {
        throw new WireError('protocol', `a transaction naming the connection answered ${String(done)}`);
      }
      const now = instanceIn(done[1]);
      if (now.id === id) {
        this.#instance = new Instance(id, sockets, now.replica);
        return this.#instance;
      }
    }
    throw new WireError('unsettled', `the connection's server changed on each of ${MAX_STEPS} attempts to learn it`);
  }
}

/** A Redis Cluster: counters grouped by slot, each command routed by its key. */
class ClusterTransport {
  constructor(cluster) {
    this.cluster = cluster;
    this.clustered = true;
  }

  group(name) {
    return slotOf(name);
  }

  send(key, args) {
    return this.cluster.sendCommand(key, false, args, BUFFERS);
  }

  /** On every primary, as the Rust crate does: a script may sit on any of them. */
  async flushScripts() {
    const masters = this.cluster.masters;
    await Promise.all(masters.map(async (master) => (await this.cluster.nodeClient(master)).sendCommand(['SCRIPT', 'FLUSH'])));
  }
}

/**
 * Reads (`r`) or bumps (`b`) counters `names` through `transport`, with the
 * instances learned so far in `epochs` (group -> Epoch). Each round trip
 * sends one command per group not done, all before any reply is awaited;
 * `alongside` commands go with the first. Answers the values (BigInt, in
 * the order of `names`) and the outcomes of `alongside`.
 */
async function exchange(transport, epochs, names, mode, alongside = [], stats = null, start = null) {
  if (mode === 'r' && transport.plain) {
    return plainExchange(transport, epochs, names, alongside, stats);
  }
  const values = names.map(() => null);
  const groups = [];
  for (const [i, name] of names.entries()) {
    const group = transport.group(name);
    const found = groups.find((state) => state.group === group);
    if (found) {
      found.members.push(i);
      continue;
    }
    const epoch = epochs.get(group);
    groups.push({ group, members: [i], stage: start ?? (epoch ? { kind: 'call', epoch, mode } : { kind: 'learn', mode }) });
  }
  let extra = [];
  for (let step = 1; ; step++) {
    const pending = groups.filter((state) => state.stage.kind !== 'done');
    if (pending.length === 0) {
      return { values, alongside: extra };
    }
    if (step > MAX_STEPS) {
      throw new WireError('unsettled', `the generation counters did not settle in ${MAX_STEPS} round trips (their servers changed on every step)`);
    }
    if (stats !== null) stats.roundTrips += 1;
    const commands = pending.map((state) => command(state, names, values));
    const sent = commands.map(([key, args]) => settle(transport.send(key, args)));
    // On one server a read is followed by WAIT 0 0, which a replica refuses:
    // a primary demoted by REPLICAOF keeps its scripts, and its `r` read would
    // answer the counters a full resync brought.
    const checked = !transport.clustered && pending.some((state) => state.stage.kind === 'call' && state.stage.mode === 'r');
    const check = checked ? settle(transport.send(null, ['WAIT', '0', '0'])) : null;
    const sentAlongside = step === 1 ? alongside.map(([key, args]) => settle(transport.send(key, args))) : [];
    const outcomes = await Promise.all(sent);
    if (step === 1) {
      extra = await Promise.all(sentAlongside);
    }
    if (check !== null) {
      const primary = await check;
      if (!primary.ok) {
        // Learned again: once a primary, its replication id is another.
        epochs.delete(transport.group(names[0]));
        throw backend(primary, 'checking that the server is still a primary');
      }
    }
    for (const [at, state] of pending.entries()) {
      state.stage = await judge(state, outcomes[at], names, values, epochs, transport);
    }
  }
}

/**
 * Reads counters `names` on a server connection that learned its instance:
 * `MGET`, `CLIENT GETNAME` and `WAIT 0 0` in one pipeline with `alongside`.
 * A value is trusted only when stamped with the connection's instance id,
 * and only when the same connection still bears the name it took when it
 * learned that instance and its server answers `WAIT` as a primary;
 * otherwise the read is an error and the connection learns again. Values
 * not stamped with that id are raised by its script (`x`).
 */
async function plainExchange(transport, epochs, names, alongside, stats) {
  const checks = [['MGET', ...names], GETNAME, WAIT];
  const entries = alongside.map(([, args]) => args);
  for (let attempt = 1; ; attempt++) {
    const instance = transport.known() ?? (await transport.instance(stats));
    if (stats !== null) stats.roundTrips += 1;
    const replies = await transport.pipeline(checks, entries);
    const name = replies[1];
    const named = name.ok && name.value === instance.name;
    if (!named) {
      transport.forget(instance);
      // The client reconnected by itself (a restart, a dropped socket): nothing
      // read is trusted, its new connection learns its server, and reads again.
      if (attempt === 1 && name.ok && transport.reconnectedSince(instance)) continue;
      if (!name.ok) throw backend(name, 'asking the connection its name');
      throw new CacheError('backend', `the connection no longer reaches the instance ${instance.id} it learned (moved to another server under it): its counters are not trusted, and it learns its server again`);
    }
    return judgePlain(transport, epochs, names, stats, instance, replies, checks.length);
  }
}

/** The values of a plain read whose connection still bears its name (`replies`: MGET, GETNAME, WAIT, then the rest). */
function judgePlain(transport, epochs, names, stats, instance, replies, checks) {
  const [counters, , role] = replies;
  if (!role.ok) {
    instance.demoted = true;
    throw backend(role, 'checking that the server is still a primary');
  }
  if (instance.demoted) {
    transport.forget(instance);
    throw new CacheError('backend', `the server of instance ${instance.id} was a replica since, and is a primary again: its counters are not trusted, and the connection learns its server again`);
  }
  if (!counters.ok) throw backend(counters, 'reading the generation counters');
  if (!Array.isArray(counters.value) || counters.value.length !== names.length) {
    throw new WireError('protocol', `MGET answered ${names.length} counters with ${String(counters.value)}`);
  }
  const values = names.map((counter, i) => trustedValue(counter, counters.value[i], instance.id));
  const untrusted = values.flatMap((value, i) => (value === null ? [i] : []));
  if (untrusted.length > 0) return raiseUntrusted(transport, epochs, names, stats, instance, values, untrusted, replies.slice(checks));
  return { values, alongside: replies.slice(checks) };
}

/** Raises the counters a plain read could not trust by the connection's instance's script, loaded (and checked) first if it is not the one known. */
async function raiseUntrusted(transport, epochs, names, stats, instance, values, untrusted, alongside) {
  const known = epochs.get(transport.group());
  const start = known?.instanceId === instance.id ? { kind: 'call', epoch: known, mode: 'x' } : { kind: 'load', epoch: new Epoch(instance.id), mode: 'x' };
  const raised = await exchange(transport, epochs, untrusted.map((i) => names[i]), 'x', [], stats, start);
  untrusted.forEach((i, at) => {
    values[i] = raised.values[at];
  });
  return { values, alongside };
}

/** The command of a group's stage: `[routing key, args]`. */
function command(state, names, values) {
  const first = names[state.members[0]];
  const { stage } = state;
  switch (stage.kind) {
    case 'call': {
      // Raising (`x`) names only the counters still without a value.
      const members = stage.mode === 'x' ? state.members.filter((i) => values[i] === null) : state.members;
      const keys = members.map((i) => names[i]);
      return [keys[0], ['EVALSHA', stage.epoch.sha, String(keys.length), ...keys, stage.mode]];
    }
    case 'learn':
      return [first, ['EVAL', INSTANCE_SCRIPT, '1', first]];
    case 'load':
      return [first, ['EVAL', stage.epoch.code, '1', first, 'v']];
    default:
      throw new Error(`no command for stage ${stage.kind}`);
  }
}

/**
 * After `NOTME`: the script of an instance sits on a server that is not that
 * instance (a failover between learning and loading). It is removed, so that
 * no `r` read there returns counters the instance did not write, and the
 * instance is learned again.
 */
async function flushScripts(transport) {
  const flushed = await settle(transport.flushScripts());
  if (!flushed.ok) throw backend(flushed, 'flushing the scripts of a server that is not their instance');
}

/** The group's next stage after `outcome`, its values written into `values`. */
async function judge(state, outcome, names, values, epochs, transport) {
  const { stage } = state;
  switch (stage.kind) {
    case 'call': {
      if (isError(outcome, 'NOSCRIPT')) {
        // Not this instance, or it lost its scripts: learn which it is.
        if (epochs.get(state.group) === stage.epoch) epochs.delete(state.group);
        return { kind: 'learn', mode: stage.mode };
      }
      if (isError(outcome, 'NOTME')) {
        await flushScripts(transport);
        return { kind: 'learn', mode: stage.mode };
      }
      if (isError(outcome, 'NOTACOUNTER')) {
        const detail = outcome.error.message.slice('NOTACOUNTER '.length);
        const name = names.find((n) => detail.startsWith(n)) ?? detail;
        throw new WireError('not_a_counter', `\`${name}\` holds something other than a generation counter (${detail})`, { name });
      }
      if (!outcome.ok) throw backend(outcome, 'reading the generation counters');
      const members = stage.mode === 'x' ? state.members.filter((i) => values[i] === null) : state.members;
      const reply = outcome.value;
      if (!Array.isArray(reply) || reply.length !== members.length) {
        throw new WireError('protocol', `the counter script answered ${members.length} counters with ${String(reply)}`);
      }
      let done = true;
      for (const [at, i] of members.entries()) {
        values[i] = stage.mode === 'r' ? trustedValue(names[i], reply[at], stage.epoch.instanceId) : raisedValue(names[i], reply[at]);
        done &&= values[i] !== null;
      }
      return done ? { kind: 'done' } : { kind: 'call', epoch: stage.epoch, mode: 'x' };
    }
    case 'learn':
      if (!outcome.ok) throw backend(outcome, 'asking a server for its instance id');
      return { kind: 'load', epoch: instanceOf(outcome.value), mode: stage.mode };
    case 'load':
      if (isError(outcome, 'NOTME')) {
        await flushScripts(transport);
        return { kind: 'learn', mode: stage.mode };
      }
      if (!outcome.ok) throw backend(outcome, 'loading the counter script');
      epochs.set(state.group, stage.epoch);
      return { kind: 'call', epoch: stage.epoch, mode: stage.mode };
    default:
      return stage;
  }
}

/** An answer that is returned but not stored: JSON cannot hold it, or its tags cannot be kept. */
function unstorable(error) {
  return error instanceof UnstorableError || error instanceof TooManyTagsError || (error instanceof KeyError && error.kind === 'empty_tag');
}

/** How many generations are remembered for one-round-trip reads; then the table starts afresh. */
const GUESSES = 4096;

/** What a failure of Redis does to a call, as the Rust `FailurePolicy`. */
export const FailurePolicy = Object.freeze({
  /** The call is answered without the cache (the default): `getOrLoad` asks the origin and stores nothing, `get` misses, `insert` stores nothing; `stats.degraded` counts it and `onFailure(error)` is told. */
  CALL_ORIGIN: 'callOrigin',
  /** The call throws the CacheError or WireError. */
  RETURN_ERROR: 'returnError',
});

/**
 * The typed cache. `new RedisCache({ client })` on a node-redis client,
 * `new RedisCache({ cluster })` on a cluster client. `keepMs` keeps entries
 * that long past their freshness (the Rust fail-safe's `max_stale`);
 * `now()` is the clock, in ms since 1970. `failurePolicy` (FailurePolicy,
 * default `callOrigin`) and `onFailure(error)` are what a failure of Redis
 * does, as the Rust `with_failure_policy` and `with_failure_hook`.
 */
export class RedisCache {
  #transport;
  #epochs = new Map();
  #guesses = new Map();
  /** The origin calls in flight, by the key at its generation: each settles with `{ok, value}` or `{ok: false, error}`. */
  #flights = new Map();

  constructor({ client, cluster, keepMs = 0, now = Date.now, failurePolicy = FailurePolicy.CALL_ORIGIN, onFailure = null }) {
    if ((client === undefined) === (cluster === undefined)) {
      throw new TypeError('give the cache either a client or a cluster');
    }
    if (!Object.values(FailurePolicy).includes(failurePolicy)) {
      throw new TypeError(`failurePolicy is ${Object.values(FailurePolicy).map((p) => JSON.stringify(p)).join(' or ')}, not ${JSON.stringify(failurePolicy)}`);
    }
    if (onFailure !== null && typeof onFailure !== 'function') {
      throw new TypeError('onFailure is a function of the CacheError or WireError a call answered around');
    }
    this.failurePolicy = failurePolicy;
    this.onFailure = onFailure;
    this.#transport = cluster !== undefined ? new ClusterTransport(cluster) : ServerTransport.of(client);
    this.keepMs = keepMs;
    this.now = now;
    // roundTrips: batches sent and awaited (a step of the counters, with
    // the GET that may go with it, is one; a second GET is another).
    // tagMisses: entries whose tags were bumped since their fill began
    // (counted among the misses, reason `absent`).
    // degraded: calls answered around a failure of Redis (callOrigin).
    // coalesced: misses answered by another call's origin call (getOrLoad).
    this.stats = { hits: 0, misses: 0, loads: 0, coalesced: 0, unstorable: 0, tagMisses: 0, roundTrips: 0, degraded: 0, rejected: {} };
  }

  /** Whether the call answers around `error` (a failure of Redis, under callOrigin): then it is counted and told. */
  #answersAround(error) {
    if (this.failurePolicy !== FailurePolicy.CALL_ORIGIN || !(error instanceof CacheError || error instanceof WireError)) {
      return false;
    }
    this.stats.degraded += 1;
    this.onFailure?.(error);
    return true;
  }

  /**
   * Reads the query's counters and its entry at their sum: `{key,
   * generation, hit: true, value, fresh}` for a fresh entry of this query
   * (with `tags`, the entry's tag lines, when it has any: each tag's counter
   * was read and found below the entry's `since`), otherwise `{key,
   * generation, hit: false, reason}` with the reason `absent` (with
   * `tagBumped: true` when the entry was there but a tag of it was bumped
   * since its fill began), `stale` (the query's entry, past its freshness;
   * its tags are not read), `wrong_type`, or one of the envelope's
   * (`version`, `undecodable`, `schema`, `value_type`, `query`). Throws a
   * CacheError or WireError only when the counters or the entry cannot be
   * read.
   */
  async read(query) {
    let guess = this.#guesses.get(query.scopeKey);
    let guessKey = null;
    try {
      guessKey = guess === undefined ? null : query.keyAt(guess);
    } catch {
      // A guess too long for maxLen is no guess: the key at the sum decides.
      guess = undefined;
    }
    const alongside = guessKey === null ? [] : [[guessKey, ['GET', guessKey]]];
    const { values, alongside: early } = await exchange(this.#transport, this.#epochs, query.counters, 'r', alongside, this.stats);
    const generation = sumGeneration(values);
    if (this.#guesses.size >= GUESSES) this.#guesses.clear();
    this.#guesses.set(query.scopeKey, generation);
    const key = query.keyAt(generation);
    // The GET sent with the counters holds the entry only when they still
    // sum to the generation it was sent for; otherwise it is asked again.
    let outcome = early[0];
    if (guess !== generation) {
      this.stats.roundTrips += 1;
      outcome = await settle(this.#transport.send(key, ['GET', key]));
    }
    const found = this.#judgeEntry(query, generation, outcome);
    if (!found.hit) return { key, generation, ...found };
    if (found.tags !== undefined && !(await this.#tagsUnchanged(query, found))) {
      // Never served, not even as stale: the next load overwrites it.
      this.stats.tagMisses += 1;
      return { key, generation, ...this.#miss('absent'), tagBumped: true };
    }
    this.stats.hits += 1;
    return { key, generation, ...found };
  }

  /** Whether no tag of a found entry was bumped since its fill began: their counters, read as counters are. */
  async #tagsUnchanged(query, { tags, since }) {
    const { values } = await exchange(this.#transport, this.#epochs, query.tagCounters(tags), 'r', [], this.stats);
    return tagsUnchanged(tags, values, since);
  }

  /** The commands reading the query's tag clock: its tenant's tags' slot, and on a cluster its namespace's shared tags' slot. */
  #clockCommands(query) {
    const names = this.#transport.clustered ? query.clockNames : query.clockNames.slice(0, 1);
    return names.map((name) => [name, ['EVAL', CLOCK_SCRIPT, '1', name]]);
  }

  /** `since` from the clock commands' outcomes: `[tenant, global]`, BigInts. */
  #clockOf(outcomes) {
    const values = outcomes.map((outcome) => {
      if (!outcome.ok) throw backend(outcome, 'reading the tag clock');
      return clockValue(outcome.value);
    });
    return [values[0], values[values.length - 1]];
  }

  /** The tag clock now, in a round trip of its own. */
  async #clock(query) {
    this.stats.roundTrips += 1;
    const outcomes = await Promise.all(this.#clockCommands(query).map(([key, args]) => settle(this.#transport.send(key, args))));
    return this.#clockOf(outcomes);
  }

  #judgeEntry(query, generation, outcome) {
    if (isError(outcome, 'WRONGTYPE')) return this.#miss('wrong_type');
    if (!outcome.ok) throw backend(outcome, 'reading the entry');
    if (outcome.value === null) return this.#miss('absent');
    const { type } = query;
    const expected = { schema: type.schema, valueId: type.valueId, digest: query.digestAt(generation) };
    const decoded = decodeEnvelope(outcome.value, expected, type.accepts);
    if (decoded.miss !== undefined) return this.#miss(decoded.miss);
    if (decoded.hit.fresh <= this.now()) return this.#miss('stale');
    return { hit: true, ...decoded.hit };
  }

  #miss(reason) {
    this.stats.misses += 1;
    if (!['absent', 'stale'].includes(reason)) {
      this.stats.rejected[reason] = (this.stats.rejected[reason] ?? 0) + 1;
    }
    return { hit: false, reason };
  }

  /** The value of a fresh entry of the query, or `otherwise` on any miss (and on a failure of Redis, under callOrigin). */
  async get(query, otherwise = undefined) {
    try {
      const read = await this.read(query);
      return read.hit ? read.value : otherwise;
    } catch (error) {
      if (!this.#answersAround(error)) throw error;
      return otherwise;
    }
  }

  /**
   * The query's value: a hit, or the origin's answer stored under the key
   * read **before** the origin was called (the race rule: a bump while the
   * origin works leaves its answer unreachable). For a type with `tagsOf`,
   * the tag clock is read too before the origin is called, and the answer
   * stored with its tags and that reading (a bump of one of its tags that
   * had not returned by then ends the entry, whatever the origin saw). An
   * origin error is thrown and nothing is stored; an answer JSON cannot hold,
   * or whose tags cannot be kept (an empty tag value, more than `maxTags`),
   * is returned, not stored (`stats.unstorable`). A failure of Redis is
   * answered around under callOrigin (the origin's answer, nothing
   * stored; `stats.degraded`, `onFailure`), thrown under returnError.
   *
   * One origin call per key at a time in this cache: a miss of a key whose
   * origin call is in flight (another getOrLoad of the same key at the same
   * generation) waits for it and answers its value, or throws its error
   * (`stats.coalesced`). Not for a type with `tagsOf` (each miss calls its
   * origin: its answer is checked against tags read after its own read),
   * nor while Redis cannot be read.
   */
  async getOrLoad(query, origin) {
    let read;
    let since = null;
    try {
      read = await this.read(query);
      if (read.hit) return read.value;
      if (query.type.tagsOf !== null) since = await this.#clock(query);
    } catch (error) {
      if (!this.#answersAround(error)) throw error;
      this.stats.loads += 1;
      return origin();
    }
    if (query.type.tagsOf !== null) return this.#load(query, read, since, origin);
    // No await between the read and here: a call of the same key either
    // finds this flight or made it.
    const flight = this.#flights.get(read.key);
    if (flight !== undefined) {
      const landed = await flight;
      this.stats.coalesced += 1;
      if (!landed.ok) throw landed.error;
      return landed.value;
    }
    let land;
    this.#flights.set(read.key, new Promise((resolve) => { land = resolve; }));
    try {
      return await this.#load(query, read, since, origin, land);
    } catch (error) {
      land({ ok: false, error });
      throw error;
    } finally {
      this.#flights.delete(read.key);
    }
  }

  /** getOrLoad after a miss: the origin's answer (handed to `landed` as soon as it is known), stored. */
  async #load(query, read, since, origin, landed = () => {}) {
    this.stats.loads += 1;
    const value = await origin();
    landed({ ok: true, value });
    try {
      await this.#store(query, read.key, read.generation, value, since);
    } catch (error) {
      if (unstorable(error)) {
        this.stats.unstorable += 1;
      } else if (!this.#answersAround(error)) {
        throw error;
      }
    }
    return value;
  }

  /**
   * Stores `value` as the query's entry at its current generation (with its
   * query's tags as `qtags`; with its value's tags, the tag clock read with
   * the counters, for a type with `tagsOf`);
   * throws UnstorableError for a value JSON cannot hold, TooManyTagsError or
   * a KeyError `empty_tag` for tags that cannot be kept. A failure of
   * Redis stores nothing under callOrigin (`stats.degraded`, `onFailure`)
   * and is thrown under returnError.
   */
  async insert(query, value) {
    const tagged = query.type.tagsOf !== null;
    try {
      const { values, alongside } = await exchange(this.#transport, this.#epochs, query.counters, 'r', tagged ? this.#clockCommands(query) : [], this.stats);
      const since = tagged ? this.#clockOf(alongside) : null;
      const generation = sumGeneration(values);
      await this.#store(query, query.keyAt(generation), generation, value, since);
    } catch (error) {
      if (!this.#answersAround(error)) throw error;
    }
  }

  async #store(query, key, generation, value, since) {
    const { type } = query;
    const now = this.now();
    const tags = since === null ? [] : keptTags(type.tagsOf(value), type.maxTags);
    const bytes = encodeEnvelope({
      schema: type.schema,
      valueId: type.valueId,
      readableKey: query.readableKeyAt(generation),
      freshMs: now + type.ttlMs,
      value,
      qtags: query.queryTags,
      tags,
      since,
    });
    this.stats.roundTrips += 1;
    const stored = await settle(this.#transport.send(key, ['SET', key, bytes, 'PX', String(Math.max(1, type.ttlMs + this.keepMs))]));
    if (!stored.ok) throw backend(stored, 'storing the entry');
  }

  /**
   * Bumps a scope's counter (`type.tenantScope(t)`, `query.operationScope()`,
   * `type.namespaceScope()`, `type.tagScope(t, 'book', 42)`,
   * `type.globalTagScope('author', 'borges')`...): when this returns, every
   * read that starts afterwards, in any process and language, misses the
   * scope's old entries (for a tag: every entry of a query tagged with it,
   * and every entry holding it in its value whose fill began before this
   * bump returned).
   */
  async invalidate(scope) {
    await exchange(this.#transport, this.#epochs, [scope.counter], 'b', [], this.stats);
  }

  /** The digest the envelope of `query` at `generation` holds (for tools and tests). */
  static queryDigest(query, generation) {
    return queryDigest(query.readableKeyAt(generation));
  }
}
