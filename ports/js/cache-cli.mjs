// The shared Redis cache (cache.mjs) driven by JSON lines, for
// tests/ports_shared_cache.rs and ports/bench: one process per batch of
// commands, one JSON answer per line, in order.
//
//   node ports/js/cache-cli.mjs --url redis://127.0.0.1:6379/
//   node ports/js/cache-cli.mjs --cluster redis://127.0.0.1:7000/,redis://127.0.0.1:7001/
//
// A query is the JSON form of tests/data/vectors.json (namespace, operation,
// schema, tenant, criteria, hash_tag) with "value_id" and "ttl_ms":
//
//   {"op": "read", "query": Q}                  -> {"hit": true, "value": V, "fresh": ms, "key": K} or {"hit": false, "reason": R, "key": K}
//   {"op": "get_or_load", "query": Q, "value": V} -> {"value": V, "loaded": bool}   (the origin answers V)
//   {"op": "insert", "query": Q, "value": V}    -> {"ok": true}
//   {"op": "invalidate", "scope": "namespace" | "tenant" | "leading_tenant" | "operation", "query": Q}
//                                               -> {"ok": true, "counter": name}
//   {"op": "time", "query": Q, "reads": n}      -> {"micros": [...]}  (n hits timed; see ports/bench)
//
// A failure is {"error": kind, "message": ...} on its line; the batch goes on.

import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';

import { createClient, createCluster } from 'redis';

import { CacheError, QueryType, RedisCache, WireError } from './cache.mjs';
import { KeyError } from './cache-key.mjs';
import { optionsFromJSON } from './vectors.mjs';

function queryOf(json) {
  const options = optionsFromJSON({ ...json, generation: '0' });
  const type = new QueryType({
    namespace: options.namespace,
    operation: options.operation,
    schema: options.schema,
    hashTag: options.hashTag,
    maxLen: options.maxLen,
    valueId: json.value_id,
    ttlMs: json.ttl_ms,
  });
  return type.query({ tenant: options.tenant, criteria: options.criteria });
}

function scopeOf(kind, query) {
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
    default:
      throw new TypeError(`unknown scope ${JSON.stringify(kind)}`);
  }
}

async function answer(cache, request) {
  const query = queryOf(request.query);
  switch (request.op) {
    case 'read': {
      const read = await cache.read(query);
      return read.hit ? { hit: true, value: read.value, fresh: read.fresh, key: read.key } : { hit: false, reason: read.reason, key: read.key };
    }
    case 'get_or_load': {
      let loaded = false;
      const value = await cache.getOrLoad(query, async () => {
        loaded = true;
        return request.value;
      });
      return { value, loaded };
    }
    case 'insert':
      await cache.insert(query, request.value);
      return { ok: true };
    case 'invalidate': {
      const scope = scopeOf(request.scope, query);
      await cache.invalidate(scope);
      return { ok: true, counter: scope.counter };
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
  const [flag, target] = process.argv.slice(2);
  let client;
  let cache;
  if (flag === '--url' && target) {
    client = createClient({ url: target });
    cache = new RedisCache({ client });
  } else if (flag === '--cluster' && target) {
    client = createCluster({ rootNodes: target.split(',').map((url) => ({ url })) });
    cache = new RedisCache({ cluster: client });
  } else {
    process.stderr.write('usage: node cache-cli.mjs --url <redis url> | --cluster <url,url,...>  (JSON lines in, JSON lines out)\n');
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
        out = await answer(cache, JSON.parse(line));
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
