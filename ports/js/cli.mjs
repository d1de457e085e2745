// Batch mode for tests/ports.rs: one JSON object per line on stdin, one JSON
// answer per line on stdout, in order.
//
//   a query (see vectors.mjs)  ->  {"key": "..."} or {"error": "<KeyError kind>"}
//   {"decode": "<text>"}       ->  {"decoded": {...}} or {"error": "<DecodeError kind>", "offset": n}
//
// Anything else that goes wrong is reported as {"error": "<exception>"} on its
// line, so one bad line cannot shift the answers after it.

import { createInterface } from 'node:readline';
import { buildKey, decode, DecodeError, KeyError } from './cache-key.mjs';
import { optionsFromJSON } from './vectors.mjs';

function answer(request) {
  try {
    if ('decode' in request) {
      const key = decode(request.decode);
      return {
        decoded: {
          version: key.version,
          namespace: key.namespace,
          schema: key.schema,
          generation: key.generation.toString(),
          tenant: key.global ? null : key.tenant,
          hash_tag: key.hashTag,
          operation: key.operation,
          criteria: key.criteria,
          digest: key.digest,
        },
      };
    }
    return { key: buildKey(optionsFromJSON(request)) };
  } catch (error) {
    if (error instanceof DecodeError) {
      return { error: error.kind, offset: error.offset };
    }
    if (error instanceof KeyError) {
      return { error: error.kind };
    }
    return { error: String(error) };
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
const answers = [];
for await (const line of lines) {
  if (line !== '') {
    answers.push(JSON.stringify(answer(JSON.parse(line))));
  }
}
process.stdout.write(answers.map((line) => `${line}\n`).join(''));
