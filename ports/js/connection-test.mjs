// The cache's own connection (connection.mjs): commands packed as RESP2,
// replies read back to the calls that asked, in order, whatever the chunks
// they arrive in; a socket whose bytes are no reply fails every call waiting
// on it. node --test ports/js/connection-test.mjs (after npm ci: it imports
// the redis client's ErrorReply). The connection against a real server:
// tests/ports_plain_read.rs.

import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';

import { ErrorReply } from 'redis';

import { Link, packed } from './connection.mjs';

/**
 * A Link on a real loopback socket whose peer reads and discards (and does
 * what `peer` does with its end); replies are fed to it by hand, or wired
 * from the socket by `body`.
 */
async function withLink(body, timeout = 60_000, peer = () => {}) {
  const server = net.createServer((end) => {
    end.resume();
    // The link destroys its socket when it drops: the peer's end may then be reset.
    end.on('error', () => {});
    peer(end);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = net.connect(server.address().port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  try {
    await body(new Link(socket, timeout));
  } finally {
    socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = Buffer.concat([Buffer.from('{"v":"a\r\nb"}'), Buffer.from([0xff, 0xfe])]);
/** A plain read's replies (MGET with a nil, CLIENT GETNAME, WAIT 0 0, GET), then another call's (an error reply). */
const replies = Buffer.concat([
  Buffer.from('*3\r\n$4\r\n7:ab\r\n$-1\r\n$1\r\n0\r\n$13\r\ncache-key:abc\r\n:0\r\n'),
  Buffer.from(`$${entry.length}\r\n`),
  entry,
  Buffer.from('\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n'),
]);

test('commands are packed as RESP2 arrays of bulk strings, lengths in bytes', () => {
  assert.equal(packed([['GET', 'ké\r\ny'], ['WAIT', '0', '0']]), '*2\r\n$3\r\nGET\r\n$6\r\nké\r\ny\r\n*3\r\n$4\r\nWAIT\r\n$1\r\n0\r\n$1\r\n0\r\n');
  assert.equal(packed([['GET', '']]), '*2\r\n$3\r\nGET\r\n$0\r\n\r\n');
  // A Buffer's bytes as they are, invalid UTF-8 too; the text around it as before.
  const bytes = Buffer.from([0xff, 0x0d, 0x0a, 0xc3]);
  const mixed = packed([['SET', 'k', bytes, 'PX', '5'], ['GET', 'k']]);
  const expected = Buffer.concat([
    Buffer.from('*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\n'),
    bytes,
    Buffer.from('\r\n$2\r\nPX\r\n$1\r\n5\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n'),
  ]);
  assert.ok(Buffer.isBuffer(mixed) && mixed.equals(expected), mixed.toString('latin1'));
  assert.throws(() => packed([['EXPIRE', 'k', 5]]), TypeError);
});

test('replies answer the calls that asked, in order, split at every byte', async () => {
  for (let split = 0; split <= replies.length; split++) {
    await withLink(async (link) => {
      const read = link.write([['MGET', 'a', 'b', 'c'], ['CLIENT', 'GETNAME'], ['WAIT', '0', '0'], ['GET', 'k']], 3);
      const other = link.write([['GET', 'l']], 0);
      // Copies, so that no chunk shares the buffer a reply was read from.
      link.received(Buffer.from(replies.subarray(0, split)));
      link.received(Buffer.from(replies.subarray(split)));
      const [counters, name, waited, got] = await read;
      assert.deepEqual(counters, { ok: true, value: ['7:ab', null, '0'] }, `split at ${split}`);
      assert.deepEqual(name, { ok: true, value: 'cache-key:abc' });
      assert.deepEqual(waited, { ok: true, value: 0 });
      assert.ok(Buffer.isBuffer(got.value) && got.value.equals(entry), `split at ${split}: ${got.value}`);
      const [refused] = await other;
      assert.ok(!refused.ok && refused.error instanceof ErrorReply);
      assert.equal(refused.error.message, 'WRONGTYPE Operation against a key holding the wrong kind of value');
      assert.equal(link.dropped, null);
    });
  }
});

test('an error reply inside a transaction stays in its array', async () => {
  await withLink(async (link) => {
    const exec = link.write([['EXEC']], 1);
    link.received(Buffer.from('*2\r\n+OK\r\n-ERR no\r\n'));
    const [{ ok, value }] = await exec;
    assert.ok(ok);
    assert.equal(value[0], 'OK');
    assert.ok(value[1] instanceof ErrorReply && value[1].message === 'ERR no');
  });
});

test('bytes that are no reply, or that no call asked for, fail every call waiting and every later one', async () => {
  for (const bytes of ['?what\r\n', '$x1\r\n', '*01\r\n', ':1\r\n:2\r\n:3\r\n']) {
    await withLink(async (link) => {
      const first = link.write([['GET', 'a']], 0);
      const second = link.write([['GET', 'b']], 0);
      link.received(Buffer.from(bytes));
      const outcomes = [...(await first), ...(await second), ...(await link.write([['GET', 'c']], 0))];
      assert.ok(link.dropped instanceof Error, bytes);
      assert.ok(link.socket.destroyed);
      if (bytes.startsWith(':1')) {
        // Both calls had their replies before the stray third dropped the link.
        assert.deepEqual(outcomes.splice(0, 2), [{ ok: true, value: 1 }, { ok: true, value: 2 }]);
      }
      for (const outcome of outcomes) assert.ok(!outcome.ok && outcome.error === link.dropped, `${bytes}: ${JSON.stringify(outcome)}`);
    });
  }
});

test('a call the server does not answer in time drops the link, however it trickles bytes meanwhile', { timeout: 30_000 }, async () => {
  // A reply of 1,000 bytes, one byte every 20 ms (20 s); the call's bound is 300 ms.
  const reply = Buffer.from(`$1000\r\n${'x'.repeat(1000)}\r\n`);
  let sent = 0;
  const trickle = (peer) => {
    const every = setInterval(() => {
      if (sent < reply.length && !peer.destroyed) peer.write(reply.subarray(sent, ++sent));
    }, 20);
    peer.on('close', () => clearInterval(every));
  };
  await withLink(async (link) => {
    link.socket.on('data', (chunk) => link.received(chunk));
    const [outcome] = await link.write([['GET', 'k']], 0);
    assert.ok(!outcome.ok && /did not answer a call in 300 ms/.test(outcome.error.message), String(outcome.error));
    assert.ok(sent > 0 && sent < reply.length, `${sent} bytes sent`);
    assert.ok(link.socket.destroyed);
  }, 300, trickle);
});

test("a call is bounded from its own write, not from the link's first", async () => {
  await withLink(async (link) => {
    const first = link.write([['GET', 'a']], 0);
    link.received(Buffer.from(':1\r\n'));
    assert.deepEqual(await first, [{ ok: true, value: 1 }]);
    // Past the first call's bound: the link's timer fired with nothing waiting.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const second = link.write([['GET', 'b']], 0);
    link.received(Buffer.from(':2\r\n'));
    assert.deepEqual(await second, [{ ok: true, value: 2 }]);
    assert.equal(link.dropped, null);
  }, 200);
});

test('a large reply arriving in many chunks is read whole, its bytes joined once rather than once per chunk', async () => {
  const value = Buffer.alloc(1 << 20, 0x61);
  value[12345] = 0x0d;
  const bytes = Buffer.concat([Buffer.from(`:7\r\n$${value.length}\r\n`), value, Buffer.from('\r\n+OK\r\n')]);
  // Every byte joined is counted: the bound below is what one join per chunk would pass many times.
  const concat = Buffer.concat;
  let joined = 0;
  Buffer.concat = (list, length) => {
    const made = concat(list, length);
    joined += made.length;
    return made;
  };
  try {
    await withLink(async (link) => {
      const calls = [link.write([['INCR', 'n']], 0), link.write([['GET', 'big']], 0), link.write([['SET', 'k', 'v']], 1)];
      // 16 KiB chunks, the first ending inside the length line.
      link.received(Buffer.from(bytes.subarray(0, 8)));
      for (let at = 8; at < bytes.length; at += 16_384) link.received(Buffer.from(bytes.subarray(at, at + 16_384)));
      const [[counter], [got], [ok]] = await Promise.all(calls);
      assert.deepEqual(counter, { ok: true, value: 7 });
      assert.ok(got.ok && got.value.equals(value));
      assert.deepEqual(ok, { ok: true, value: 'OK' });
      assert.ok(joined <= 2 * bytes.length, `${joined} bytes joined for a reply of ${bytes.length}`);
    });
  } finally {
    Buffer.concat = concat;
  }
});
