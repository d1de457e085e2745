// The shared Redis cache (cache.mjs) driven by JSON lines, for
// tests/ports_shared_cache.rs and ports/bench: one process per batch of
// commands, one JSON answer per line, in order.
//
//   node ports/js/cache-cli.mjs --url redis://127.0.0.1:6379/
//   node ports/js/cache-cli.mjs --url rediss://127.0.0.1:6380/ --ca cert.pem
//   node ports/js/cache-cli.mjs --cluster redis://127.0.0.1:7000/,redis://127.0.0.1:7001/
//
// A query is the JSON form of tests/data/vectors.json (namespace, operation,
// schema, tenant, criteria, hash_tag) with "value_id" and "ttl_ms", and
// optionally "query_tags": [{"criterion": C, "name": N, "global": bool}], the
// criteria that are the query's own tags (as in tests/data/wire-vectors.json:
// a tag per value of criterion C, none for {"type": "none"}, one per item of a
// list or set, repeats kept; their counters join the key's generation, and
// the entries it writes record them as "qtags"):
//
//   {"op": "read", "query": Q}                  -> {"hit": true, "value": V, "fresh": ms, "key": K[, "tags": [...]]}
//                                                  or {"hit": false, "reason": R, "key": K[, "tag_bumped": true]}
//   {"op": "get_or_load", "query": Q, "value": V[, "tags": T][, "bump_during_origin": tag]}
//                                               -> {"value": V, "loaded": bool}   (the origin answers V, tagged T;
//                                                  it bumps `tag`, in the query's tenant, before it answers)
//   {"op": "insert", "query": Q, "value": V[, "tags": T]} -> {"ok": true}
//   {"op": "invalidate", "scope": "namespace" | "tenant" | "leading_tenant" | "operation" | "tag", "query": Q[, "tag": tag]}
//                                               -> {"ok": true, "counter": name}
//   {"op": "stats", "query": Q}                 -> the cache's stats since the process started
//   {"op": "time", "query": Q, "reads": n}      -> {"micros": [...]}  (n hits timed; see ports/bench)
//   {"op": "select", "db": n}                   -> {"ok": true}  (the client SELECTs database n)
//   {"op": "read_together", "query": Q, "callers": c, "reads": n}
//                                               -> {"hits": h, "values": [V...], "others": [reason or error...]}
//                                                  (c callers, concurrent promises here, each reading Q n times)
//   {"op": "load_together", "query": Q, "callers": c, "value": V[, "fail": true]}
//                                               -> {"calls": n, "values": [V...], "errors": [message...], "coalesced": k}
//                                                  (c concurrent getOrLoad of Q, cold; the origin, once every
//                                                  other caller missed, answers V or throws; k: stats.coalesced added)
//   {"op": "fill_exact", "query": Q, "criterion": C, "values": [X...]}
//                                               -> {"results": [null | rule...]}  (value i loaded through getOrLoad
//                                                  as the answer of Q with criterion C = i: stored, or refused by rule)
//   {"op": "read_exact", "query": Q, "criterion": C, "count": n}
//                                               -> {"results": [{"hit": true, "value": X} | {"hit": false, "reason": R}...]}
//
// X is a value in the exact form of vectors.mjs (fromSpec, toSpec).
//
// A tag is {"name": N, "value": text, a number or {"type": "int", "value": "..."}, "global": bool};
// with "tags", the query type's answers are tagged from their value (tagsOf).
//
// A failure is {"error": kind, "message": ...} on its line; the batch goes on.
// The cache's failure policy is returnError: a failure of Redis is an
// error here, never a miss answered by the origin.

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';

import { createClient, createCluster } from 'redis';

import { CacheError, FailurePolicy, QueryType, RedisCache, WireError } from './cache.mjs';
import { KeyError } from './cache-key.mjs';
import { exactJSON, UnstorableError } from './wire.mjs';
import { fromSpec, optionsFromJSON, toSpec, valueFromJSON } from './vectors.mjs';

/** Adds `value` to `values` unless one with the same JSON is there. */
function pushDistinct(values, value) {
  if (!values.some((known) => JSON.stringify(known) === JSON.stringify(value))) values.push(value);
}

/** A tag from its JSON form. */
function tagOf({ name, value, global = false }) {
  return { name, value: typeof value === 'object' ? valueFromJSON(value) : value, global };
}

/** The query of `json` (with its `query_tags`, if any); with `tags`, of a type whose answers are tagged `tags`. */
function queryOf(json, tags = null) {
  const options = optionsFromJSON({ ...json, generation: '0' });
  const type = new QueryType({
    namespace: options.namespace,
    operation: options.operation,
    schema: options.schema,
    hashTag: options.hashTag,
    maxLen: options.maxLen,
    valueId: json.value_id,
    ttlMs: json.ttl_ms,
    tagsOf: tags === null ? null : () => tags.map(tagOf),
    queryTags: options.queryTags,
    tenantType: options.tenantType,
    criterionTypes: options.criterionTypes,
  });
  return type.query({ tenant: options.tenant, criteria: options.criteria });
}

/** The query of `json` with one criterion more, `name` = `n`: one entry per value of a batch. */
function nth(json, name, n) {
  return queryOf({ ...json, criteria: [...json.criteria, [name, { type: 'int', value: String(n) }]] });
}

/** Runs `each(i)` for i in 0..count, 64 at a time, in order of their answers. */
async function batch(count, each) {
  const out = [];
  for (let start = 0; start < count; start += 64) {
    const chunk = [...Array(Math.min(64, count - start)).keys()].map((i) => each(start + i));
    out.push(...(await Promise.all(chunk)));
  }
  return out;
}

function scopeOf(kind, query, tag) {
  const { type, tenant } = query;
  switch (kind) {
    case 'namespace':
      return type.namespaceScope();
    case 'tenant':
      return type.tenantScope(tenant);
    case 'leading_tenant':
      return type.tenantScope([Array.isArray(tenant) ? tenant[0] : tenant]);
    case 'operation':
      return type.operationScope(tenant);
    case 'tag': {
      const { name, value, global } = tagOf(tag);
      return global ? type.globalTagScope(name, value) : type.tagScope(tenant, name, value);
    }
    default:
      throw new TypeError(`unknown scope ${JSON.stringify(kind)}`);
  }
}

async function answer(cache, request) {
  const query = queryOf(request.query, request.tags ?? null);
  switch (request.op) {
    case 'read': {
      const read = await cache.read(query);
      if (read.hit) {
        return { hit: true, value: read.value, fresh: read.fresh, key: read.key, ...(read.tags && { tags: read.tags }) };
      }
      return { hit: false, reason: read.reason, key: read.key, ...(read.tagBumped && { tag_bumped: true }) };
    }
    case 'get_or_load': {
      let loaded = false;
      const value = await cache.getOrLoad(query, async () => {
        loaded = true;
        if (request.bump_during_origin !== undefined) {
          await cache.invalidate(scopeOf('tag', query, request.bump_during_origin));
        }
        return request.value;
      });
      return { value, loaded };
    }
    case 'insert':
      await cache.insert(query, request.value);
      return { ok: true };
    case 'invalidate': {
      const scope = scopeOf(request.scope, query, request.tag);
      await cache.invalidate(scope);
      return { ok: true, counter: scope.counter };
    }
    case 'fill_exact': {
      // Each value (exact form) loaded through getOrLoad: null when stored,
      // else the rule that refused it (returned, not stored).
      const before = cache.stats.unstorable;
      const results = await batch(request.values.length, async (i) => {
        const value = fromSpec(request.values[i]);
        const returned = await cache.getOrLoad(nth(request.query, request.criterion, i), async () => value);
        if (!Object.is(returned, value)) throw new Error(`value ${i} was not returned as the origin answered it`);
        try {
          exactJSON(value);
          return null;
        } catch (error) {
          if (!(error instanceof UnstorableError)) throw error;
          return error.rule;
        }
      });
      const refused = results.filter((rule) => rule !== null).length;
      if (cache.stats.unstorable - before !== refused) throw new Error('the cache counted other refusals than exactJSON made');
      return { results };
    }
    case 'read_exact':
      return {
        results: await batch(request.count, async (i) => {
          const read = await cache.read(nth(request.query, request.criterion, i));
          return read.hit ? { hit: true, value: toSpec(read.value) } : { hit: false, reason: read.reason };
        }),
      };
    case 'stats':
      return cache.stats;
    case 'read_together': {
      // Callers here are concurrent promises: their reads share the cache's own connection, pipelined.
      let hits = 0;
      const values = [];
      const others = [];
      await Promise.all(
        Array.from({ length: request.callers }, async () => {
          for (let i = 0; i < request.reads; i++) {
            let read;
            try {
              read = await cache.read(query);
            } catch (error) {
              others.push(`${error.kind}: ${error.message}`);
              continue;
            }
            if (!read.hit) {
              others.push(read.reason);
              continue;
            }
            hits += 1;
            pushDistinct(values, read.value);
          }
        }),
      );
      return { hits, values, others };
    }
    case 'load_together': {
      const [missesBefore, coalescedBefore] = [cache.stats.misses, cache.stats.coalesced];
      let calls = 0;
      const origin = async () => {
        calls += 1;
        // Until every other caller's read missed (each then joins this flight before any later task runs).
        while (cache.stats.misses - missesBefore < request.callers) await new Promise((resolve) => setImmediate(resolve));
        if (request.fail) throw new Error('the origin failed');
        return request.value;
      };
      const settled = await Promise.allSettled(Array.from({ length: request.callers }, () => cache.getOrLoad(query, origin)));
      const values = [];
      const errors = [];
      for (const { status, value, reason } of settled) {
        if (status === 'rejected') errors.push(reason.message);
        else pushDistinct(values, value);
      }
      return { calls, values, errors, coalesced: cache.stats.coalesced - coalescedBefore };
    }
    case 'time': {
      const micros = [];
      for (let i = 0; i < request.reads; i++) {
        const start = performance.now();
        const read = await cache.read(query);
        micros.push((performance.now() - start) * 1000);
        if (!read.hit) throw new Error(`timed read ${i} missed (${read.reason})`);
      }
      return { micros };
    }
    default:
      throw new TypeError(`unknown op ${JSON.stringify(request.op)}`);
  }
}

function failure(error) {
  const kind = error instanceof CacheError || error instanceof WireError || error instanceof KeyError ? error.kind : error.name;
  return { error: kind, message: error.message };
}

async function main() {
  const [flag, target, caFlag, caFile] = process.argv.slice(2);
  let client;
  let cache;
  if (flag === '--url' && target && (caFlag === undefined || (caFlag === '--ca' && caFile))) {
    // A rediss:// server whose certificate `caFile` signs (a test's own).
    const socket = caFile === undefined ? undefined : { ca: readFileSync(caFile) };
    client = createClient({ url: target, socket });
    cache = new RedisCache({ client, failurePolicy: FailurePolicy.RETURN_ERROR });
  } else if (flag === '--cluster' && target) {
    client = createCluster({ rootNodes: target.split(',').map((url) => ({ url })) });
    cache = new RedisCache({ cluster: client, failurePolicy: FailurePolicy.RETURN_ERROR });
  } else {
    process.stderr.write('usage: node cache-cli.mjs --url <redis url> [--ca <certificate file>] | --cluster <url,url,...>  (JSON lines in, JSON lines out)\n');
    process.exit(2);
  }
  client.on('error', (error) => process.stderr.write(`redis: ${error.message}\n`));
  await client.connect();
  try {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === '') continue;
      let out;
      try {
        const request = JSON.parse(line);
        if (request.op === 'select') {
          // The client's own database, after the cache was made (Node only: redis-py's pool has no SELECT).
          await client.select(request.db);
          out = { ok: true };
        } else {
          out = await answer(cache, request);
        }
      } catch (error) {
        out = failure(error);
      }
      process.stdout.write(`${JSON.stringify(out)}\n`);
    }
  } finally {
    await client.close();
  }
}

await main();
