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
    tenantType: query.tenant_type ?? null,
    criterionTypes: query.criterion_types ?? null,
  };
}

// A value in the exact form of the property test and the wire vectors
// (WIRE-FORMAT.md, "Exact values"): `["null"]`, `["bool", b]`, `["int",
// "digits"]`, `["float", "16 hex digits of its bits"]`, `["str", text]`,
// `["utf16", [code units]]` (text with a lone surrogate), `["arr", [...]]`,
// `["obj", [[key, value], ...]]` (each key a `str` or `utf16`).

const F64 = new Float64Array(1);
const BITS = new BigUint64Array(F64.buffer);

/** The JavaScript value a writer holds for `spec`: an integer a Number when safe, else a BigInt. */
export function fromSpec(spec) {
  const [kind, body] = spec;
  switch (kind) {
    case 'null':
      return null;
    case 'bool':
    case 'str':
      return body;
    case 'int': {
      const n = BigInt(body);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
    }
    case 'float':
      BITS[0] = BigInt(`0x${body}`);
      return F64[0];
    case 'utf16':
      return String.fromCharCode(...body);
    case 'arr':
      return body.map(fromSpec);
    case 'obj': {
      const out = {};
      for (const [key, value] of body) {
        // Defined, not assigned: `__proto__` is a key like another.
        Object.defineProperty(out, fromSpec(key), { value: fromSpec(value), writable: true, enumerable: true, configurable: true });
      }
      return out;
    }
    default:
      throw new TypeError(`unknown spec ${JSON.stringify(kind)}`);
  }
}

/** What a reader holds, in the exact form: every Number a float (JavaScript has no other), a BigInt an integer. */
export function toSpec(value) {
  switch (typeof value) {
    case 'boolean':
      return ['bool', value];
    case 'bigint':
      return ['int', value.toString()];
    case 'number':
      F64[0] = value;
      return ['float', BITS[0].toString(16).padStart(16, '0')];
    case 'string':
      return value.isWellFormed() ? ['str', value] : ['utf16', [...Array(value.length).keys()].map((i) => value.charCodeAt(i))];
    default:
      break;
  }
  if (value === null) return ['null'];
  if (Array.isArray(value)) return ['arr', value.map(toSpec)];
  return ['obj', Object.keys(value).map((key) => [toSpec(key), toSpec(value[key])])];
}
