// Cache keys in format 2 of cache-key/KEY-FORMAT.md, for Node.js, without
// dependencies: the bytes the Rust crate's KeyBuilder writes, `decode` to read
// keys of format 1 or 2 back into their parts, and tenant `KeyPattern`s.
// tests/data/vectors.json is the contract; tests/ports.rs compares this module
// with the Rust crate on random queries.

import { createHash } from 'node:crypto';

/** The format version this module writes. */
export const FORMAT_VERSION = 2;

/** Criteria longer than this many bytes are replaced by `c_` and a summary. */
const MAX_PLAIN_CRITERIA = 48;

/** Hex digits of a summary, by format version. */
const SUMMARY_DIGITS = { 1: 16, 2: 32 };

/** The `tenant` of a key declared global: its data is the same for every tenant. */
export const GLOBAL = Symbol('cache-key global');

/**
 * An input that must never become a key. `kind` names the Rust `KeyError`
 * variant in snake_case: `empty_tenant` (with `field`), `missing_tenant`,
 * `duplicate_criterion` (with `name`), `empty_criterion_name` (with
 * `position`), `empty_namespace`, `empty_operation`, `too_long` (with `len`
 * and `max`).
 */
export class KeyError extends Error {
  constructor(kind, message, details = {}) {
    super(message);
    this.name = 'KeyError';
    this.kind = kind;
    Object.assign(this, details);
  }
}

/**
 * Text that is not a key of format 1 or 2: `kind` names the Rust
 * `DecodeErrorKind` in snake_case, `offset` is the byte (of the key's UTF-8)
 * where the problem is.
 */
export class DecodeError extends Error {
  constructor(kind, offset, message) {
    super(`at byte ${offset}: ${message}`);
    this.name = 'DecodeError';
    this.kind = kind;
    this.offset = offset;
  }
}

/**
 * `esc`: percent-encoding of the UTF-8 bytes, uppercase hex, leaving
 * `A-Z a-z 0-9 - _ . ! ~ * ' ( )`, which is exactly `encodeURIComponent`.
 * A string with a lone surrogate is not text: it throws `URIError`.
 */
export function escape(text) {
  return encodeURIComponent(text);
}

/** Orders two strings by their UTF-8 bytes (not by UTF-16 code units). */
function compareUtf8(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * A criterion value's canonical string; `''` means the criterion is dropped.
 * Numbers are JavaScript's own `String(x)`, which is the format's float form
 * (`0` for -0, `1e+21`, `NaN`); integers past 2^53 must come as BigInt.
 */
export function canonical(value) {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      return String(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return '';
    default:
      break;
  }
  if (value === null) {
    return '';
  }
  if (Array.isArray(value)) {
    return joinElements(value.map(canonical));
  }
  if (value instanceof Set) {
    const elements = [...new Set([...value].map(canonical))];
    return joinElements(elements.sort(compareUtf8));
  }
  throw new TypeError(`a criterion value is a string, number, BigInt, boolean, null, array or Set, not ${describe(value)}`);
}

/** A list's canonical string: `%` and `,` inside an element are escaped, so elements stay apart. */
function joinElements(elements) {
  return elements.map((text) => text.replaceAll('%', '%25').replaceAll(',', '%2C')).join(',');
}

function describe(value) {
  return value === null ? 'null' : typeof value === 'object' ? value.constructor?.name ?? 'object' : typeof value;
}

/**
 * A tenant value's text: a string, a BigInt or a safe integer, written in
 * decimal. The integer 0 is an empty value, as in Rust (an id left at its
 * default): `''`. A Rust tenant declared `#[tenant(allow_zero = "...")]`
 * writes `0`, which the string "0" writes here.
 */
function tenantText(value) {
  if (typeof value === 'string') {
    return value;
  }
  if (typeof value === 'bigint' || Number.isSafeInteger(value)) {
    return BigInt(value) === 0n ? '' : value.toString();
  }
  throw new TypeError(`a tenant is a string, a BigInt or a safe integer, not ${describe(value)} ${String(value)}`);
}

/** The tenant values of `tenant` (a value or an array of parts); `[]` for GLOBAL, null when absent. */
function tenantParts(tenant) {
  if (tenant === GLOBAL) {
    return [];
  }
  if (tenant === undefined || tenant === null) {
    return null;
  }
  return (Array.isArray(tenant) ? tenant : [tenant]).map(tenantText);
}

const INTEGERS = {
  u8: [0n, 2n ** 8n - 1n], u16: [0n, 2n ** 16n - 1n], u32: [0n, 2n ** 32n - 1n], u64: [0n, 2n ** 64n - 1n],
  usize: [0n, 2n ** 64n - 1n], u128: [0n, 2n ** 128n - 1n],
  i8: [-(2n ** 7n), 2n ** 7n - 1n], i16: [-(2n ** 15n), 2n ** 15n - 1n], i32: [-(2n ** 31n), 2n ** 31n - 1n],
  i64: [-(2n ** 63n), 2n ** 63n - 1n], isize: [-(2n ** 63n), 2n ** 63n - 1n], i128: [-(2n ** 127n), 2n ** 127n - 1n],
};

function typeError(kind, what, message) {
  return new KeyError(kind, `${what} ${message}`, { field: what });
}

/**
 * Checks `value` against `type`, a Rust type as the Rust query declares its
 * field (`u32`, `i64`, `f64`, `bool`, `String`, `char`, `Option<T>`,
 * `Vec<T>`, `BTreeSet<T>`, `HashSet<T>`), as Rust's compiler would: a
 * KeyError `not_an_integer` (1.5, "7", or a Number past 2^53 - 1, which
 * stands for many integers: a BigInt holds it exactly), `out_of_range`
 * (outside the Rust type's range), `wrong_type` (anything else the type
 * cannot hold). `f32` is refused when declared: JavaScript writes a float as an f64.
 */
export function checkTyped(type, value, what) {
  const inner = /^(Option|Vec|BTreeSet|HashSet)<(.+)>$/.exec(type);
  if (inner !== null) {
    if (inner[1] === 'Option') {
      return value === null || value === undefined ? undefined : checkTyped(inner[2], value, what);
    }
    if (!Array.isArray(value) && !(value instanceof Set)) {
      throw typeError('wrong_type', what, `is a ${type}: an array${inner[1] === 'Vec' ? '' : ' or a Set'}, not ${describe(value)}`);
    }
    [...value].forEach((item, i) => checkTyped(inner[2], item, `${what}[${i}]`));
    return undefined;
  }
  const range = INTEGERS[type];
  if (range !== undefined) {
    if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
      throw typeError('not_an_integer', what, `is a ${type}, and ${value} is a Number past 2^53 - 1, which stands for many integers: pass a BigInt`);
    }
    if (typeof value !== 'bigint' && !Number.isInteger(value)) {
      throw typeError('not_an_integer', what, `is a ${type}, not ${describe(value)} ${String(value)}`);
    }
    if (BigInt(value) < range[0] || BigInt(value) > range[1]) {
      throw typeError('out_of_range', what, `is a ${type}, from ${range[0]} to ${range[1]}, not ${String(value)}`);
    }
    return undefined;
  }
  const expected = { f64: 'number', bool: 'boolean', String: 'string', char: 'string' }[type];
  if (expected === undefined) {
    throw new TypeError(`${what}: ${JSON.stringify(type)} is not a type the port checks (an integer, f64, bool, String, char, Option<T>, Vec<T>, BTreeSet<T>, HashSet<T>)`);
  }
  if (typeof value !== expected || (type === 'char' && [...value].length !== 1)) {
    throw typeError('wrong_type', what, `is a ${type}, not ${describe(value)} ${JSON.stringify(String(value))}`);
  }
  return undefined;
}

const SCALARS = new Set([...Object.keys(INTEGERS), 'f64', 'bool', 'String', 'char']);

/**
 * Whether `type` is a Rust type checkTyped checks: a TypeError naming it
 * otherwise (`f32` among them: JavaScript writes a float as an f64), so a
 * declaration is refused when it is made, not at its first query.
 */
export function checkRustType(type) {
  const inner = typeof type === 'string' ? /^(?:Option|Vec|BTreeSet|HashSet)<(.+)>$/.exec(type) : null;
  if (inner !== null) {
    checkRustType(inner[1]);
    return type;
  }
  if (!SCALARS.has(type)) {
    throw new TypeError(`${JSON.stringify(type)} is not a type the port checks (an integer, f64, bool, String, char, Option<T>, Vec<T>, BTreeSet<T>, HashSet<T>)`);
  }
  return type;
}

/**
 * Checks a query's tenant and criteria against their declared Rust types:
 * `tenantType` (one type, or an array for a compound tenant) and
 * `criterionTypes` ({name: type}, every criterion the query gives declared;
 * an undeclared one is a KeyError `unknown_criterion`). Either may be left
 * out (null): not checked.
 */
export function checkDeclared({ tenant, criteria = [], tenantType = null, criterionTypes = null }) {
  if (tenantType !== null && tenant !== GLOBAL) {
    const types = Array.isArray(tenantType) ? tenantType : [tenantType];
    const values = Array.isArray(tenant) ? tenant : [tenant];
    values.forEach((value, i) => checkTyped(types[i] ?? types[types.length - 1], value, i === 0 ? 'tenant' : `tenant part ${i + 1}`));
  }
  if (criterionTypes !== null) {
    for (const [name, value] of criteriaEntries(criteria)) {
      if (!Object.hasOwn(criterionTypes, name)) {
        throw new KeyError('unknown_criterion', `criterion \`${name}\` is not declared (criterionTypes name the Rust query's criteria, after rename_all and rename)`, { name });
      }
      checkTyped(criterionTypes[name], value, `criterion \`${name}\``);
    }
  }
}

/** The error for the empty tenant value at `index`. */
function emptyTenant(index) {
  const field = index === 0 ? 'tenant' : `tenant part ${index + 1}`;
  return new KeyError(
    'empty_tenant',
    `tenant \`${field}\` is empty: an empty tenant would share one cache scope among all tenants`,
    { field },
  );
}

/**
 * The tenant segment as a key writes it, without a hash tag's braces: each
 * value escaped, the parts joined with `,`; `''` for GLOBAL. Generation
 * counters are named by it (WIRE-FORMAT.md). An empty value is a
 * `KeyError` (`empty_tenant`), a missing tenant `missing_tenant`.
 */
export function tenantSegment(tenant) {
  // `tenant` as buildKey takes it: a value, an array of parts, or GLOBAL.
  const parts = tenantParts(tenant);
  if (parts === null) {
    throw new KeyError('missing_tenant', 'no tenant given: pass the authorization scope as `tenant`, or GLOBAL');
  }
  const empty = parts.indexOf('');
  if (empty >= 0) {
    throw emptyTenant(empty);
  }
  return parts.map(escape).join(',');
}

function checkInteger(value, max, what) {
  const ok = typeof value === 'bigint' ? value >= 0n && value <= max : Number.isSafeInteger(value) && value >= 0 && BigInt(value) <= max;
  if (!ok) {
    throw new RangeError(`${what} is an integer from 0 to ${max}, not ${String(value)}`);
  }
  return value.toString();
}

/** The [name, value] pairs of `criteria`: an array of pairs, a Map, or a plain object. */
function criteriaEntries(criteria) {
  if (Array.isArray(criteria)) {
    return criteria;
  }
  if (criteria instanceof Map) {
    return [...criteria];
  }
  return Object.entries(criteria);
}

/**
 * Builds a key of format 2.
 *
 * - `tenant`: a string, BigInt or safe integer; an array of them for a
 *   compound tenant (in a fixed order); or `GLOBAL` for data that is the same
 *   for every tenant. Left out, it is a `missing_tenant` error; the integer
 *   0, as an empty string, `empty_tenant` (for Rust's `#[tenant(allow_zero =
 *   "...")]`, pass "0": the same key).
 * - `criteria`: `[name, value]` pairs, a Map or a plain object; values are
 *   strings, numbers, BigInts, booleans, null/undefined (dropped), arrays
 *   (lists) and Sets.
 * - `hashTag`: write the tenant segment as a Redis Cluster hash tag, `t{...}`.
 * - `maxLen`: refuse keys longer than this many bytes (`too_long`).
 * - `readable`: the readable key instead (the Rust `write_readable_key`):
 *   criteria never summarized, `maxLen` not checked. Not a cache key: its
 *   SHA-256 is what a Redis entry's envelope holds (WIRE-FORMAT.md).
 *
 * Mistakes throw a `KeyError`, the first one in the order the parts are
 * given (tenant values, then criteria), then an empty namespace or
 * operation, a missing tenant, a key too long.
 */
export function buildKey({ generation = 1, readable = false, ...options }) {
  // Checked in buildKey's own order: names, schema, generation, then the rest.
  if (typeof options.namespace !== 'string' || typeof options.operation !== 'string') {
    throw new TypeError('namespace and operation are strings');
  }
  checkInteger(options.schema === undefined ? 1 : options.schema, 0xffff_ffffn, 'schema');
  const generationText = checkInteger(generation, 0xffff_ffff_ffff_ffffn, 'generation');
  const template = new KeyTemplate(options);
  return readable ? template.readableKeyText(generationText) : template.keyText(generationText);
}

/**
 * One query's keys at every generation: its parts checked and written once
 * (as buildKey checks and writes them), the generation put between them.
 * `keyAt(g)` and `readableKeyAt(g)` are `buildKey({...options, generation:
 * g})` and the same with `readable: true`, byte for byte.
 */
export class KeyTemplate {
  constructor({ namespace, operation, schema = 1, tenant, criteria = [], hashTag = false, maxLen = Infinity }) {
    if (typeof namespace !== 'string' || typeof operation !== 'string') {
      throw new TypeError('namespace and operation are strings');
    }
    const schemaText = checkInteger(schema, 0xffff_ffffn, 'schema');

    const parts = tenantParts(tenant);
    const empty = parts === null ? -1 : parts.indexOf('');
    if (empty >= 0) {
      throw emptyTenant(empty);
    }

    const names = new Set();
    const pairs = [];
    for (const [position, [name, value]] of criteriaEntries(criteria).entries()) {
      if (typeof name !== 'string') {
        throw new TypeError(`criterion #${position}'s name is a string, not ${describe(name)}`);
      }
      if (name === '') {
        throw new KeyError('empty_criterion_name', `criterion #${position} has an empty name`, { position });
      }
      // A name given twice is an error even when one of its values is dropped.
      if (names.has(name)) {
        throw new KeyError(
          'duplicate_criterion',
          `criterion \`${name}\` is given more than once: each name may appear once in a key`,
          { name },
        );
      }
      names.add(name);
      const text = canonical(value);
      if (text !== '') {
        pairs.push([name, text]);
      }
    }

    if (namespace === '') {
      throw new KeyError('empty_namespace', 'the namespace is empty: name the application the key belongs to');
    }
    if (operation === '') {
      throw new KeyError('empty_operation', 'the operation is empty: name the query the key caches');
    }
    if (parts === null || (parts.length === 0 && tenant !== GLOBAL)) {
      throw new KeyError(
        'missing_tenant',
        'no tenant given: pass the authorization scope as `tenant`, or GLOBAL for data that is the same for every tenant',
      );
    }

    const segment = parts.map(escape).join(',');
    this.before = `${escape(namespace)}:s${schemaText}:g`;
    let after = `:t${hashTag ? `{${segment}}` : segment}:${escape(operation)}`;
    pairs.sort(([a], [b]) => compareUtf8(a, b));
    const tail = pairs.map(([name, text]) => `${escape(name)}=${escape(text)}`).join('&');
    this.readableAfter = tail === '' ? after : `${after}:${tail}`;
    // The tail is ASCII: its length in UTF-16 units is its length in bytes.
    if (tail.length > MAX_PLAIN_CRITERIA) {
      const digest = createHash('sha256').update(tail, 'utf8').digest('hex');
      after += `:c_${digest.slice(0, SUMMARY_DIGITS[FORMAT_VERSION])}`;
    } else {
      after = this.readableAfter;
    }
    this.after = after;
    this.maxLen = maxLen;
    Object.freeze(this);
  }

  /** The key at `generation` (a u64, BigInt or safe integer); a KeyError `too_long` past `maxLen`. */
  keyAt(generation) {
    return this.keyText(checkInteger(generation, 0xffff_ffff_ffff_ffffn, 'generation'));
  }

  /** The readable key at `generation`: criteria never summarized, `maxLen` not checked. */
  readableKeyAt(generation) {
    return this.readableKeyText(checkInteger(generation, 0xffff_ffff_ffff_ffffn, 'generation'));
  }

  keyText(generationText) {
    const key = this.before + generationText + this.after;
    if (key.length > this.maxLen) {
      throw new KeyError(
        'too_long',
        `the key would be ${key.length} bytes long, over its maximum of ${this.maxLen}: keys are never truncated`,
        { len: key.length, max: this.maxLen },
      );
    }
    return key;
  }

  readableKeyText(generationText) {
    return this.before + generationText + this.readableAfter;
  }
}

// Decoding works on the key's UTF-8 bytes, so that offsets are the Rust
// decoder's byte offsets.

const COLON = 0x3a;
const PERCENT = 0x25;

function isUnreserved(byte) {
  return (
    (byte >= 0x30 && byte <= 0x39) ||
    (byte >= 0x41 && byte <= 0x5a) ||
    (byte >= 0x61 && byte <= 0x7a) ||
    // - _ . ! ~ * ' ( )
    [0x2d, 0x5f, 0x2e, 0x21, 0x7e, 0x2a, 0x27, 0x28, 0x29].includes(byte)
  );
}

function hexValue(byte) {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x41 + 10;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10;
  return -1;
}

/** How many leading bytes of `bytes` are valid UTF-8 (Rust's `valid_up_to`). */
function utf8ValidUpTo(bytes) {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i];
    let length;
    let low = 0x80;
    let high = 0xbf;
    if (lead < 0x80) length = 1;
    else if (lead >= 0xc2 && lead <= 0xdf) length = 2;
    else if (lead >= 0xe0 && lead <= 0xef) {
      length = 3;
      if (lead === 0xe0) low = 0xa0; // overlong
      if (lead === 0xed) high = 0x9f; // surrogates
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      length = 4;
      if (lead === 0xf0) low = 0x90; // overlong
      if (lead === 0xf4) high = 0x8f; // past U+10FFFF
    } else return i;
    for (let k = 1; k < length; k++) {
      const byte = bytes[i + k];
      const [min, max] = k === 1 ? [low, high] : [0x80, 0xbf];
      if (byte === undefined || byte < min || byte > max) return i;
    }
    i += length;
  }
  return i;
}

/** Text for an error message: at most 40 characters. */
function snippet(bytes) {
  const text = Buffer.from(bytes).toString('utf8');
  const chars = [...text];
  return JSON.stringify(chars.length > 40 ? `${chars.slice(0, 40).join('')}…` : text).slice(1, -1);
}

/**
 * Checks that bytes `start..end` of `key` are escaped as the format writes
 * them and returns them unescaped, as bytes.
 */
function unescapeBytes(key, start, end, what) {
  const out = [];
  let i = start;
  while (i < end) {
    const byte = key[i];
    if (byte === PERCENT) {
      if (end - i < 3) {
        throw new DecodeError('truncated_escape', i, `an escape in the ${what} is cut short: \`%\` takes two hex digits`);
      }
      const [high, low] = [key[i + 1], key[i + 2]];
      const [h, l] = [hexValue(high), hexValue(low)];
      const shown = snippet(key.subarray(i, i + 3));
      if (h < 0 || l < 0) {
        throw new DecodeError('invalid_escape', i, `escape \`${shown}\` in the ${what} is not \`%\` and two hex digits`);
      }
      if (high >= 0x61 || low >= 0x61) {
        throw new DecodeError('lowercase_escape', i, `escape \`${shown}\` in the ${what} uses lowercase hex: the format writes \`${shown.toUpperCase()}\``);
      }
      const decoded = (h << 4) | l;
      if (isUnreserved(decoded)) {
        throw new DecodeError('needless_escape', i, `escape \`${shown}\` in the ${what} stands for \`${String.fromCharCode(decoded)}\`, which the format writes as itself`);
      }
      out.push(decoded);
      i += 3;
    } else if (isUnreserved(byte)) {
      out.push(byte);
      i += 1;
    } else {
      const shown = byte < 0x80 ? JSON.stringify(String.fromCharCode(byte)) : `byte 0x${byte.toString(16)}`;
      throw new DecodeError('unescaped_byte', i, `${shown} in the ${what} must be escaped`);
    }
  }
  const bytes = Uint8Array.from(out);
  const valid = utf8ValidUpTo(bytes);
  if (valid < bytes.length) {
    // The offset of the escape (or byte) that holds the first byte that is not UTF-8.
    let offset = start;
    for (let decoded = 0; offset < end && decoded < valid; decoded++) {
      offset += key[offset] === PERCENT ? 3 : 1;
    }
    throw new DecodeError('invalid_utf8', offset, `the ${what}'s escapes do not decode to UTF-8 text`);
  }
  return bytes;
}

function unescapeText(key, start, end, what) {
  return Buffer.from(unescapeBytes(key, start, end, what)).toString('utf8');
}

/** The schema or generation: `marker` and a decimal number without leading zeros, at most `max`. */
function decodeNumber(key, start, end, marker, max, what) {
  const text = key.subarray(start, end);
  if (text[0] !== marker.charCodeAt(0)) {
    throw new DecodeError('missing_marker', start, `expected the ${what} segment \`${marker}<number>\`, found \`${snippet(text)}\``);
  }
  const digits = text.subarray(1);
  if (digits.length === 0 || !digits.every((b) => b >= 0x30 && b <= 0x39)) {
    throw new DecodeError('invalid_number', start, `${what} \`${snippet(text)}\` is not a decimal number`);
  }
  if (digits.length > 1 && digits[0] === 0x30) {
    throw new DecodeError('invalid_number', start, `${what} \`${snippet(text)}\` has a leading zero`);
  }
  const value = BigInt(Buffer.from(digits).toString('latin1'));
  if (value > max) {
    throw new DecodeError('number_overflow', start, `${what} \`${snippet(text)}\` is too large (the maximum is ${max})`);
  }
  return value;
}

/**
 * Reads a key of format 1 or 2 back into its parts:
 *
 * `{ version, namespace, schema, generation, global, tenant, hashTag,
 * operation, criteria, digest }`, where `generation` is a BigInt (a u64),
 * `tenant` the tenant values (none for a global key), `criteria` the
 * `[name, canonical value]` pairs (none when summarized) and `digest` the
 * summary's hex digits or null. `version` is 1 for a 16-digit summary and 2
 * otherwise: a key whose tail is not summarized is the same text in both.
 *
 * The decoder is strict, as the Rust one: it accepts exactly the keys the
 * format writes, and throws a `DecodeError` otherwise.
 */
export function decode(text) {
  const key = Buffer.from(text, 'utf8');
  let at = 0;
  // The next `:`-separated segment as [start, end]; past the end once all are taken.
  const next = (what) => {
    if (at > key.length) {
      throw new DecodeError('missing_segment', key.length, `the key ends before its ${what} segment`);
    }
    const start = at;
    const colon = key.indexOf(COLON, start);
    const end = colon < 0 ? key.length : colon;
    at = end + 1;
    return [start, end];
  };

  let [start, end] = next('namespace');
  if (start === end) {
    throw new DecodeError('empty_namespace', start, key.length === 0 ? 'the key is empty' : 'the namespace is empty');
  }
  const namespace = unescapeText(key, start, end, 'namespace');
  [start, end] = next('schema (`s<number>`)');
  const schema = Number(decodeNumber(key, start, end, 's', 0xffff_ffffn, 'schema'));
  [start, end] = next('generation (`g<number>`)');
  const generation = decodeNumber(key, start, end, 'g', 0xffff_ffff_ffff_ffffn, 'generation');
  [start, end] = next('tenant (`t<tenant>`)');
  const { tenant, hashTag } = decodeTenant(key, start, end);
  [start, end] = next('operation');
  if (start === end) {
    throw new DecodeError('empty_operation', start, 'the operation is empty');
  }
  const operation = unescapeText(key, start, end, 'operation');

  let criteria = { pairs: [], digest: null, version: FORMAT_VERSION };
  if (at <= key.length) {
    [start, end] = next('criteria');
    criteria = decodeCriteria(key, start, end);
  }
  if (at <= key.length) {
    throw new DecodeError('trailing_segment', at - 1, 'unexpected `:` after the criteria (`:` is always escaped inside a segment)');
  }
  return {
    version: criteria.version,
    namespace,
    schema,
    generation,
    global: tenant.length === 0,
    tenant,
    hashTag,
    operation,
    criteria: criteria.pairs,
    digest: criteria.digest,
  };
}

/** The tenant segment: `t`, the escaped values joined with `,`, maybe inside `{...}`. */
function decodeTenant(key, start, end) {
  if (start === end || key[start] !== 0x74) {
    throw new DecodeError('missing_marker', start, `expected the tenant segment \`t<tenant>\`, found \`${snippet(key.subarray(start, end))}\``);
  }
  let bodyStart = start + 1;
  let bodyEnd = end;
  let hashTag = false;
  if (key[bodyStart] === 0x7b && bodyStart < end) {
    if (end - bodyStart < 2 || key[end - 1] !== 0x7d) {
      throw new DecodeError('unclosed_hash_tag', start + 1, 'the tenant\'s hash tag `{` is not closed by `}` at the end of the segment');
    }
    bodyStart += 1;
    bodyEnd -= 1;
    hashTag = true;
  }
  const tenant = [];
  if (bodyStart === bodyEnd) {
    return { tenant, hashTag };
  }
  let partStart = bodyStart;
  for (let index = 0; partStart <= bodyEnd; index++) {
    const comma = key.indexOf(0x2c, partStart);
    const partEnd = comma < 0 || comma > bodyEnd ? bodyEnd : comma;
    if (partStart === partEnd) {
      throw new DecodeError('empty_tenant_part', partStart, `tenant value #${index + 1} is empty`);
    }
    tenant.push(unescapeText(key, partStart, partEnd, 'tenant'));
    partStart = partEnd + 1;
  }
  return { tenant, hashTag };
}

function isLowerHex(byte) {
  return (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66);
}

/** The criteria segment: sorted `name=value` pairs joined with `&`, or `c_` and a summary. */
function decodeCriteria(key, start, end) {
  const text = key.subarray(start, end);
  if (text.length === 0) {
    throw new DecodeError('empty_criteria', start, 'the key ends with `:` but has no criteria');
  }
  // Plain criteria always hold a `=`; a summary never does.
  if (text[0] === 0x63 && text[1] === 0x5f && !text.includes(0x3d)) {
    const digest = text.subarray(2);
    const version = [1, 2].find((v) => SUMMARY_DIGITS[v] === digest.length);
    if (version === undefined || !digest.every(isLowerHex)) {
      throw new DecodeError('invalid_digest', start, `summary \`${snippet(text)}\` is not \`c_\` and 16 (format 1) or 32 (format 2) lowercase hex digits`);
    }
    return { pairs: [], digest: digest.toString('latin1'), version };
  }
  if (text.length > MAX_PLAIN_CRITERIA) {
    throw new DecodeError('criteria_too_long', start, `the criteria are ${text.length} bytes long: over ${MAX_PLAIN_CRITERIA} bytes they are written \`c_\` and a digest`);
  }
  const pairs = [];
  let previous = null;
  let pairStart = start;
  while (pairStart <= end) {
    const amp = key.indexOf(0x26, pairStart);
    const pairEnd = amp < 0 || amp > end ? end : amp;
    const eq = key.indexOf(0x3d, pairStart);
    if (eq < 0 || eq >= pairEnd) {
      const message = pairStart === pairEnd ? 'empty criterion: `&` must separate two `name=value` pairs' : `criterion \`${snippet(key.subarray(pairStart, pairEnd))}\` is not \`name=value\``;
      throw new DecodeError('invalid_criterion', pairStart, message);
    }
    if (eq === pairStart) {
      throw new DecodeError('empty_criterion_name', pairStart, 'a criterion\'s name is empty');
    }
    const name = unescapeBytes(key, pairStart, eq, 'criterion name');
    if (eq + 1 === pairEnd) {
      throw new DecodeError('empty_criterion_value', eq + 1, `criterion \`${snippet(key.subarray(pairStart, eq))}\` has an empty value (empty values are dropped from keys)`);
    }
    const value = unescapeText(key, eq + 1, pairEnd, 'criterion value');
    if (previous !== null) {
      const order = Buffer.compare(previous, name);
      if (order === 0) {
        throw new DecodeError('duplicate_criterion', pairStart, `criterion \`${snippet(key.subarray(pairStart, eq))}\` appears more than once`);
      }
      if (order > 0) {
        throw new DecodeError('unsorted_criteria', pairStart, `criterion \`${snippet(key.subarray(pairStart, eq))}\` comes after \`${snippet(previous)}\`: criteria are sorted by name`);
      }
    }
    pairs.push([Buffer.from(name).toString('utf8'), value]);
    previous = name;
    pairStart = pairEnd + 1;
  }
  return { pairs, digest: null, version: FORMAT_VERSION };
}

/** `text` with the bytes special to Redis globs (`* ? [ ] \`) preceded by a backslash. */
function globEscape(text) {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/**
 * A scope of keys (a namespace, narrowed to a tenant or the global keys, a
 * schema, a generation, an operation) for listing or deleting them in Redis
 * or memcached, as the Rust `KeyPattern`.
 *
 * `glob()` is a glob for `SCAN ... MATCH`, with every value escaped as in a
 * key and then glob-escaped, so tenant `acme*` does not match `acme-corp`.
 * A glob is only a first filter: its `*` for a segment that is not fixed
 * also matches `:` (the glob for tenant `acme*` matches
 * `library:s1:g4:tfoo:tacme*:page=1`, a key of tenant `foo`), so pass what
 * `SCAN` returns through `matches(key)` before deleting it.
 */
export class KeyPattern {
  /** Use the static constructors. */
  constructor({ namespace, schema = null, generation = null, tenant = null, hashTag = false, operation = null }) {
    if (typeof namespace !== 'string') {
      throw new TypeError('the namespace is a string');
    }
    this.namespace = namespace;
    this.schema = schema === null ? null : BigInt(checkInteger(schema, 0xffff_ffffn, 'schema'));
    this.generation = generation === null ? null : BigInt(checkInteger(generation, 0xffff_ffff_ffff_ffffn, 'generation'));
    // null, or the tenant values (none for the global keys).
    this.tenant = tenant === null ? null : Object.freeze([...tenant]);
    this.hashTag = hashTag;
    this.operation = operation;
    Object.freeze(this);
  }

  /** Every key of `namespace`. */
  static namespace(namespace) {
    return new KeyPattern({ namespace });
  }

  /** Every key of `operation` in `namespace`. */
  static operation(namespace, operation) {
    return KeyPattern.namespace(namespace).withOperation(operation);
  }

  /** Every key of one tenant (a string, BigInt or safe integer) in `namespace`. */
  static tenant(namespace, tenant) {
    return KeyPattern.compoundTenant(namespace, [tenant]);
  }

  /** Every key of one compound tenant (its values in the order keys write them) in `namespace`. */
  static compoundTenant(namespace, parts) {
    const texts = parts.map(tenantText);
    const empty = texts.indexOf('');
    if (empty >= 0) {
      throw emptyTenant(empty);
    }
    if (texts.length === 0) {
      throw new KeyError('missing_tenant', 'a tenant pattern needs at least one tenant value');
    }
    return new KeyPattern({ namespace, tenant: texts });
  }

  /** Every global key of `namespace`. */
  static global(namespace) {
    return new KeyPattern({ namespace, tenant: [] });
  }

  withSchema(schema) {
    return new KeyPattern({ ...this, schema });
  }

  withGeneration(generation) {
    return new KeyPattern({ ...this, generation });
  }

  withOperation(operation) {
    if (typeof operation !== 'string') {
      throw new TypeError('the operation is a string');
    }
    return new KeyPattern({ ...this, operation });
  }

  /** Whether the pattern's tenant is written as a hash tag, `t{...}` (plain by default). */
  withHashTag(hashTag) {
    return new KeyPattern({ ...this, hashTag: Boolean(hashTag) });
  }

  /** A glob for Redis `SCAN cursor MATCH glob` or `KEYS glob`: a first filter, see the class. */
  glob() {
    let out = `${globEscape(escape(this.namespace))}:`;
    const fixed = [this.schema !== null, this.generation !== null, this.tenant !== null, this.operation !== null];
    const lastFixed = fixed.lastIndexOf(true);
    if (lastFixed < 0) {
      return `${out}*`;
    }
    // The schema, generation and tenant segments up to the last fixed one, `*` for the others.
    const count = Math.min(lastFixed, 2) + 1;
    if (count >= 1) out += `s${this.schema ?? '*'}:`;
    if (count >= 2) out += `g${this.generation ?? '*'}:`;
    if (count >= 3) out += `t${this.tenant === null ? '*' : this.#tenantGlob()}:`;
    // After the operation come nothing or `:` and the criteria.
    return `${out}${this.operation === null ? '' : globEscape(escape(this.operation))}*`;
  }

  /** The tenant segment as keys write it, glob-escaped. */
  #tenantGlob() {
    const tenant = globEscape(this.tenant.map(escape).join(','));
    return this.hashTag ? `{${tenant}}` : tenant;
  }

  /** Whether `key` is a valid key (format 1 or 2) in the scope: the exact test. */
  matches(key) {
    let decoded;
    try {
      decoded = decode(key);
    } catch (error) {
      if (error instanceof DecodeError) {
        return false;
      }
      throw error;
    }
    const sameTenant =
      this.tenant === null ||
      (decoded.hashTag === this.hashTag &&
        decoded.tenant.length === this.tenant.length &&
        decoded.tenant.every((part, i) => part === this.tenant[i]));
    return (
      decoded.namespace === this.namespace &&
      (this.schema === null || BigInt(decoded.schema) === this.schema) &&
      (this.generation === null || decoded.generation === this.generation) &&
      (this.operation === null || decoded.operation === this.operation) &&
      sameTenant
    );
  }
}
