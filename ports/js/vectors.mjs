// The JSON form of queries shared by the conformance vectors
// (tests/data/vectors.json) and tests/ports.rs, turned into buildKey's options.

import { GLOBAL } from './cache-key.mjs';

/** A criterion value from its JSON form: `{"type": "str" | "int" | "bool" | "f64", "value": ...}`, `{"type": "none"}` or `{"type": "list" | "set", "items": [...]}`. */
export function valueFromJSON(value) {
  switch (value.type) {
    case 'str':
    case 'bool':
      return value.value;
    case 'int':
      return BigInt(value.value);
    case 'f64':
      return Number(value.value);
    case 'none':
      return null;
    case 'list':
      return value.items.map(valueFromJSON);
    case 'set':
      return new Set(value.items.map(valueFromJSON));
    default:
      throw new TypeError(`unknown value type ${value.type}`);
  }
}

/** A tenant value: a string, or an integer as `{"type": "int", "value": "..."}`. */
function tenantFromJSON(part) {
  return typeof part === 'string' ? part : valueFromJSON(part);
}

/** A query tag from its JSON form, `{"criterion": ..., "name": ..., "global": bool}`, as QueryType's `queryTags` takes it. */
export function queryTagFromJSON({ criterion, name, global = false }) {
  return { criterion, name, global };
}

/**
 * buildKey's options for a case: `tenant` is a value, an array of parts
 * (compound) or null (global); `generation` a number or a decimal string;
 * `hash_tag` and `max_len` are optional. `query_tags` (optional, the wire
 * vectors') gives `queryTags`, as QueryType takes them (buildKey ignores it).
 */
export function optionsFromJSON(query) {
  const { tenant } = query;
  return {
    namespace: query.namespace,
    operation: query.operation,
    schema: query.schema,
    generation: BigInt(query.generation),
    tenant: tenant === null ? GLOBAL : Array.isArray(tenant) ? tenant.map(tenantFromJSON) : tenantFromJSON(tenant),
    criteria: query.criteria.map(([name, value]) => [name, valueFromJSON(value)]),
    hashTag: query.hash_tag ?? false,
    maxLen: query.max_len ?? Infinity,
    queryTags: (query.query_tags ?? []).map(queryTagFromJSON),
  };
}
