// The Node.js port against the shared data: node --test ports/js/test.mjs

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { buildKey, canonical, checkDeclared, checkRustType, decode, DecodeError, GLOBAL, KeyError, KeyPattern, KeyTemplate } from './cache-key.mjs';
import { optionsFromJSON, valueFromJSON } from './vectors.mjs';

const data = (name) => JSON.parse(readFileSync(new URL(`../../tests/data/${name}`, import.meta.url), 'utf8'));
const vectors = data('vectors.json');
const format1 = data('vectors-format1.json');

/** What building a case gives: the key, or `error:<kind>`. */
function outcome(options) {
  try {
    return buildKey(options);
  } catch (error) {
    if (error instanceof KeyError) {
      return `error:${error.kind}`;
    }
    throw error;
  }
}

function kindOf(fn) {
  try {
    fn();
  } catch (error) {
    if (error instanceof KeyError || error instanceof DecodeError) {
      return error.kind;
    }
    throw error;
  }
  return 'no error';
}

test('every conformance vector gives its key or error', () => {
  assert.equal(vectors.length, 400);
  const failures = [];
  for (const [i, vector] of vectors.entries()) {
    const expected = vector.key ?? `error:${vector.error}`;
    const got = outcome(optionsFromJSON(vector));
    if (got !== expected) {
      failures.push(`case ${i}: ${got}, expected ${expected}`);
    }
  }
  assert.deepEqual(failures, []);
});

test('a key template writes buildKey\'s keys and readable keys at every generation', () => {
  const generations = [0n, 1n, 7, 656412895717296n, 0xffff_ffff_ffff_ffffn];
  const attempt = (build) => {
    try {
      return build();
    } catch (error) {
      if (error instanceof KeyError) return `error:${error.kind}`;
      throw error;
    }
  };
  let built = 0;
  for (const vector of vectors) {
    const options = optionsFromJSON(vector);
    let template;
    try {
      template = new KeyTemplate(options);
    } catch (error) {
      if (!(error instanceof KeyError)) throw error;
      assert.equal(outcome(options), `error:${error.kind}`, vector.name);
      continue;
    }
    for (const generation of generations) {
      assert.equal(attempt(() => template.keyAt(generation)), outcome({ ...options, generation }), vector.name);
      assert.equal(template.readableKeyAt(generation), buildKey({ ...options, generation, readable: true }), vector.name);
    }
    built += 1;
  }
  assert.ok(built > 300, `${built} vectors built`);
  // maxLen is checked on the key at each generation, as buildKey checks it; never on the readable key.
  const short = { namespace: 'ns', operation: 'op', tenant: 1, criteria: [['q', 'x'.repeat(60)]], maxLen: 49 };
  const template = new KeyTemplate(short);
  for (const generation of [0n, 9n, 10n, 0xffff_ffff_ffff_ffffn]) {
    assert.equal(attempt(() => template.keyAt(generation)), outcome({ ...short, generation }));
    assert.equal(template.readableKeyAt(generation), buildKey({ ...short, generation, readable: true }));
  }
  assert.equal(attempt(() => template.keyAt(10n)), 'error:too_long');
  assert.throws(() => new KeyTemplate({ namespace: 'ns', operation: 'op', tenant: 1 }).keyAt(-1n), RangeError);
});

test('every vector key decodes to the parts it was built from', () => {
  let keys = 0;
  for (const vector of vectors.filter((v) => v.key)) {
    keys += 1;
    const key = decode(vector.key);
    const options = optionsFromJSON(vector);
    assert.equal(key.namespace, vector.namespace);
    assert.equal(key.schema, vector.schema);
    assert.equal(key.generation, BigInt(vector.generation));
    assert.equal(key.global, vector.tenant === null);
    assert.deepEqual(key.tenant, vector.tenant === null ? [] : [vector.tenant]);
    assert.equal(key.operation, vector.operation);
    assert.equal(key.version, 2);
    const summarized = vector.key.includes(':c_');
    assert.equal(key.digest?.length, summarized ? 32 : undefined);
    if (!summarized) {
      const pairs = options.criteria.map(([name, value]) => [name, canonical(value)]).filter(([, text]) => text !== '');
      assert.deepEqual(key.criteria, pairs.sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
    }
  }
  assert.equal(keys, 380);
});

test('every format-1 key decodes; a summarized one as version 1', () => {
  assert.equal(format1.length, vectors.length);
  let summarized = 0;
  for (const [i, old] of format1.entries()) {
    const { key: oldKey, ...oldCase } = old;
    const { key: newKey, ...newCase } = vectors[i];
    assert.deepEqual(oldCase, newCase, `case ${i} has the same query in both files`);
    if (oldKey === undefined) {
      continue;
    }
    const key = decode(oldKey);
    if (oldKey.includes(':c_')) {
      summarized += 1;
      assert.equal(key.version, 1, oldKey);
      assert.equal(key.digest.length, 16);
      // The same query's format-2 summary starts with the same 16 digits.
      assert.ok(newKey.startsWith(oldKey), `${newKey} extends ${oldKey}`);
    } else {
      // Not summarized: the same text in both versions.
      assert.equal(oldKey, newKey);
    }
  }
  assert.equal(summarized, 190);
});

test('a summary has 16 or 32 lowercase hex digits, nothing else', () => {
  const hex = '0123456789abcdef'.repeat(3);
  for (let digits = 0; digits <= 40; digits++) {
    const key = `ns:s1:g1:tx:op:c_${hex.slice(0, digits)}`;
    const kind = kindOf(() => decode(key));
    if (digits === 16 || digits === 32) {
      assert.equal(kind, 'no error', key);
      assert.equal(decode(key).version, digits === 16 ? 1 : 2);
    } else {
      assert.equal(kind, 'invalid_digest', key);
    }
  }
  assert.equal(kindOf(() => decode(`ns:s1:g1:tx:op:c_${'A'.repeat(32)}`)), 'invalid_digest');
});

test('malformed keys are refused with the Rust decoder\'s kind and offset', () => {
  const cases = [
    ['', 'empty_namespace', 0],
    ['ns', 'missing_segment', 2],
    ['ns:s1:g1:tx', 'missing_segment', 11],
    ['ns:sx:g1:tx:op', 'invalid_number', 3],
    ['ns:s01:g1:tx:op', 'invalid_number', 3],
    ['ns:s4294967296:g1:tx:op', 'number_overflow', 3],
    ['ns:s1:g18446744073709551616:tx:op', 'number_overflow', 6],
    ['ns:s1:g1:x:op', 'missing_marker', 9],
    ['ns:s1:g1:tx%4:op', 'truncated_escape', 11],
    ['ns:s1:g1:tx%G1:op', 'invalid_escape', 11],
    ['ns:s1:g1:tx%3a:op', 'lowercase_escape', 11],
    ['ns:s1:g1:tx%41:op', 'needless_escape', 11],
    ['ns:s1:g1:tx/y:op', 'unescaped_byte', 11],
    ['ns:s1:g1:tx:op:a=ç', 'unescaped_byte', 17],
    ['ns:s1:g1:t{x:op', 'unclosed_hash_tag', 10],
    ['ns:s1:g1:tx,,y:op', 'empty_tenant_part', 12],
    ['ns:s1:g1:tx%ED%A0%80:op', 'invalid_utf8', 11],
    ['ns:s1:g1:tx:op:a=1%C3', 'invalid_utf8', 18],
    ['ns:s1:g1:tx:op:', 'empty_criteria', 15],
    ['ns:s1:g1:tx:op:a=1&&b=2', 'invalid_criterion', 19],
    ['ns:s1:g1:tx:op:=1', 'empty_criterion_name', 15],
    ['ns:s1:g1:tx:op:a=1&b=', 'empty_criterion_value', 21],
    ['ns:s1:g1:tx:op:b=1&a=2', 'unsorted_criteria', 19],
    ['ns:s1:g1:tx:op:%C3%A9=1&z=2', 'unsorted_criteria', 24],
    ['ns:s1:g1:tx:op:a=1&a=2', 'duplicate_criterion', 19],
    [`ns:s1:g1:tx:op:q=${'x'.repeat(47)}`, 'criteria_too_long', 15],
    ['ns:s1:g1:tx:op:a=1:b=2', 'trailing_segment', 18],
  ];
  for (const [key, kind, offset] of cases) {
    assert.throws(() => decode(key), (error) => error instanceof DecodeError && error.kind === kind && error.offset === offset, key);
  }
  // 48 bytes of criteria are the most a plain tail has.
  assert.equal(decode(`ns:s1:g1:tx:op:q=${'x'.repeat(46)}`).criteria[0][1].length, 46);
});

test('builder mistakes are errors with the Rust kinds, never keys', () => {
  const base = { namespace: 'ns', operation: 'op', tenant: 't' };
  const error = (options) => {
    try {
      buildKey({ ...base, ...options });
    } catch (e) {
      assert.ok(e instanceof KeyError, String(e));
      return { ...e };
    }
    assert.fail('a key was built');
  };
  assert.deepEqual(error({ tenant: '' }), { name: 'KeyError', kind: 'empty_tenant', field: 'tenant' });
  assert.equal(error({ tenant: ['acme', ''] }).field, 'tenant part 2');
  assert.equal(error({ tenant: undefined }).kind, 'missing_tenant');
  assert.equal(error({ tenant: [] }).kind, 'missing_tenant');
  assert.equal(error({ namespace: '' }).kind, 'empty_namespace');
  assert.equal(error({ operation: '' }).kind, 'empty_operation');
  assert.equal(error({ criteria: [['a', 1], ['', 2]] }).position, 1);
  // A duplicate name counts even when a value is dropped.
  assert.equal(error({ criteria: [['a', null], ['a', 'x']] }).name, 'a');
  const len = 'ns:s1:g1:tt:op:q='.length + 40;
  assert.deepEqual(error({ criteria: { q: 'x'.repeat(40) }, maxLen: 40 }), { name: 'KeyError', kind: 'too_long', len, max: 40 });
  // The first mistake in the order the parts come wins.
  assert.equal(error({ namespace: '', tenant: '', criteria: [['a', 1], ['a', 2]] }).kind, 'empty_tenant');
  assert.equal(error({ namespace: '', criteria: [['a', 1], ['a', 2]] }).kind, 'duplicate_criterion');
});

test('keys: global, compound tenants, hash tags, integers, dropped criteria', () => {
  const key = (options) => buildKey({ namespace: 'crm', operation: 'list', ...options });
  assert.equal(key({ tenant: GLOBAL }), 'crm:s1:g1:t:list');
  assert.equal(key({ tenant: GLOBAL, hashTag: true }), 'crm:s1:g1:t{}:list');
  assert.equal(key({ tenant: ['acme', 42n, 7], hashTag: true }), 'crm:s1:g1:t{acme,42,7}:list');
  assert.equal(key({ tenant: 'a,b' }), 'crm:s1:g1:ta%2Cb:list');
  assert.equal(
    key({ tenant: 't', generation: 18446744073709551615n, criteria: new Map([['n', -(2n ** 127n)], ['e', ''], ['u', undefined], ['l', []]]) }),
    'crm:s1:g18446744073709551615:tt:list:n=-170141183460469231731687303715884105728',
  );
  assert.throws(() => key({ tenant: 1.5 }), TypeError);
  assert.throws(() => key({ tenant: 't', generation: 2 ** 64 }), RangeError);
  assert.throws(() => key({ tenant: 't', criteria: { d: new Date(0) } }), TypeError);
});

test('criteria sort by UTF-8 bytes, not UTF-16 code units', () => {
  // U+FF61 is one UTF-16 unit above the surrogates of U+1F600, and below its UTF-8 bytes.
  const key = buildKey({ namespace: 'ns', operation: 'op', tenant: 't', criteria: [['😀', 2], ['｡', 1]] });
  assert.equal(key, 'ns:s1:g1:tt:op:%EF%BD%A1=1&%F0%9F%98%80=2');
  assert.deepEqual(decode(key).criteria, [['｡', '1'], ['😀', '2']]);
  assert.equal(canonical(new Set(['😀', '｡', '😀'])), '｡,😀');
});

test('lists escape their elements; sets sort and merge theirs', () => {
  assert.equal(canonical(['a,b', 'c%', null, true, 1.5, 10n]), 'a%2Cb,c%25,,true,1.5,10');
  assert.equal(canonical([['a,b', 'c'], 'd']), 'a%252Cb%2Cc,d');
  assert.equal(canonical(new Set([2, 10, 2n, '1', null])), ',1,10,2');
  assert.equal(canonical([null]), '');
  assert.equal(canonical([-0, 1e21, 1e-7, NaN, -Infinity]), '0,1e+21,1e-7,NaN,-Infinity');
});

test('the shared float ties are written as Node writes them', () => {
  const ties = data('float-ties.json');
  assert.equal(ties.length, 120);
  for (const tie of ties) {
    assert.equal(canonical(Number(tie.value)), tie.js, tie.value);
  }
});

/** Redis's glob matching for what patterns use: `*`, `?` and `\x`. */
function globMatches(glob, text) {
  if (glob.length === 0) return text.length === 0;
  const [c, rest] = [glob[0], glob.slice(1)];
  if (c === '*') return [...Array(text.length + 1).keys()].some((skip) => globMatches(rest, text.slice(skip)));
  if (c === '?') return text.length > 0 && globMatches(rest, text.slice(1));
  if (c === '\\' && rest.length > 0) return text[0] === rest[0] && globMatches(rest.slice(1), text.slice(1));
  return text[0] === c && globMatches(rest, text.slice(1));
}

/** The pattern a case of tenant-patterns.json describes. */
function patternOf(spec) {
  const tenant = (part) => (typeof part === 'string' ? part : valueFromJSON(part));
  let pattern;
  if (!('tenant' in spec)) pattern = KeyPattern.namespace(spec.namespace);
  else if (spec.tenant === null) pattern = KeyPattern.global(spec.namespace);
  else if (Array.isArray(spec.tenant)) pattern = KeyPattern.compoundTenant(spec.namespace, spec.tenant.map(tenant));
  else pattern = KeyPattern.tenant(spec.namespace, tenant(spec.tenant));
  if (spec.operation !== undefined) pattern = pattern.withOperation(spec.operation);
  if (spec.schema !== undefined) pattern = pattern.withSchema(spec.schema);
  if (spec.generation !== undefined) pattern = pattern.withGeneration(spec.generation);
  return pattern.withHashTag(spec.hash_tag ?? false);
}

test('tenant patterns: globs, and matches that see through the glob\'s traps', () => {
  const { cases } = data('tenant-patterns.json');
  let keys = 0;
  for (const spec of cases) {
    if (spec.error !== undefined) {
      assert.equal(kindOf(() => patternOf(spec)), spec.error, JSON.stringify(spec));
      continue;
    }
    const pattern = patternOf(spec);
    assert.equal(pattern.glob(), spec.glob);
    for (const { key, matches, glob_matches: byGlob } of spec.keys) {
      keys += 1;
      assert.equal(pattern.matches(key), matches, `${spec.glob} matches ${key}`);
      assert.equal(globMatches(spec.glob, key), byGlob, `glob ${spec.glob} on ${key}`);
    }
  }
  assert.ok(keys >= 50, `${keys} keys`);
});

test('declared Rust types: checked when declared, and a query Rust could not form refused with its reason', () => {
  for (const type of ['u8', 'i128', 'usize', 'f64', 'String', 'Option<Vec<u64>>', 'BTreeSet<String>']) {
    assert.equal(checkRustType(type), type);
  }
  for (const type of ['f32', 'Vec<f32>', 'u256', 'Option<>', 42]) {
    assert.throws(() => checkRustType(type), TypeError, String(type));
  }
  const kind = (options) => {
    try {
      checkDeclared(options);
      return null;
    } catch (error) {
      return error.kind;
    }
  };
  assert.equal(kind({ tenant: 2n ** 64n - 1n, tenantType: 'u64' }), null);
  assert.equal(kind({ tenant: 2 ** 53, tenantType: 'u64' }), 'not_an_integer');
  assert.equal(kind({ tenant: ['acme', 70000], tenantType: ['String', 'u16'] }), 'out_of_range');
  assert.equal(kind({ tenant: 1, criteria: { page: null }, criterionTypes: { page: 'Option<u32>' } }), null);
  assert.equal(kind({ tenant: 1, criteria: [['ids', new Set([1, -1])]], criterionTypes: { ids: 'BTreeSet<u64>' } }), 'out_of_range');
  assert.equal(kind({ tenant: 1, criteria: { c: 'ab' }, criterionTypes: { c: 'char' } }), 'wrong_type');
  assert.equal(kind({ tenant: 1, criteria: { c: '😀' }, criterionTypes: { c: 'char' } }), null);
});
