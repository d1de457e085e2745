// The cache's own connection to one Redis server, for the plain read of
// counters (WIRE-FORMAT.md, "Reading counters on a connection that knows its
// server"): RESP2 on a socket opened as the node-redis client's options say
// (address, TLS, credentials, database), each call's commands written in one
// piece and their replies read in the order they were sent. node-redis's
// work per command (its queue entry, promise and decoded reply) costs as
// much as a round trip's share on loopback; a plain read pays for four.

import net from 'node:net';
import tls from 'node:tls';

import { ErrorReply } from 'redis';

/** node-redis's connect timeout and command timeout when its options give none. */
const CONNECT_TIMEOUT_MS = 5000;
const COMMAND_TIMEOUT_MS = 5000;

/** The longest delay a Node timer takes. */
const MAX_DELAY_MS = 2 ** 31 - 1;

/** A reply not all read yet. */
const INCOMPLETE = Symbol('incomplete');

/** Where the last reply `replyAt` read ends. */
let replyEnd = 0;

/**
 * Where the bytes `replyAt` last found INCOMPLETE must reach at least (a
 * bulk string whose length was read), or 0 when that is not known yet.
 */
let replyNeed = 0;

/**
 * The RESP2 reply at `at` in `bytes` (bulk strings as Buffers when
 * `asBytes`, as UTF-8 text otherwise; an error reply as an ErrorReply, in an
 * array too), or INCOMPLETE. Sets `replyEnd` past it. Throws on bytes that
 * are no RESP2 reply; sets `replyNeed` for an INCOMPLETE one.
 */
function replyAt(bytes, at, asBytes) {
  replyNeed = 0;
  const line = bytes.indexOf('\r\n', at);
  if (line < 0) return INCOMPLETE;
  switch (bytes[at]) {
    case 0x2b: // +
      replyEnd = line + 2;
      return bytes.toString('utf8', at + 1, line);
    case 0x2d: // -
      replyEnd = line + 2;
      return new ErrorReply(bytes.toString('utf8', at + 1, line));
    case 0x3a: // :
      replyEnd = line + 2;
      return Number(bytes.toString('latin1', at + 1, line));
    case 0x24: {
      // $
      const length = lengthOf(bytes, at, line);
      if (length < 0) {
        replyEnd = line + 2;
        return null;
      }
      const start = line + 2;
      const stop = start + length;
      if (stop + 2 > bytes.length) {
        replyNeed = stop + 2;
        return INCOMPLETE;
      }
      replyEnd = stop + 2;
      return asBytes ? bytes.subarray(start, stop) : bytes.toString('utf8', start, stop);
    }
    case 0x2a: {
      // *
      const count = lengthOf(bytes, at, line);
      if (count < 0) {
        replyEnd = line + 2;
        return null;
      }
      const items = new Array(count);
      let next = line + 2;
      for (let i = 0; i < count; i++) {
        const item = replyAt(bytes, next, asBytes);
        if (item === INCOMPLETE) return INCOMPLETE;
        items[i] = item;
        next = replyEnd;
      }
      replyEnd = next;
      return items;
    }
    default:
      throw new Error(`the server sent bytes that are no RESP2 reply: ${JSON.stringify(bytes.toString('latin1', at, Math.min(line, at + 40)))}`);
  }
}

/** The length on a `$` or `*` line (-1 for nil); throws on anything else. */
function lengthOf(bytes, at, line) {
  const text = bytes.toString('latin1', at + 1, line);
  if (!/^(-1|0|[1-9][0-9]*)$/.test(text)) throw new Error(`a RESP2 length that is no length: ${JSON.stringify(text)}`);
  return Number(text);
}

/**
 * `commands` (arrays of strings and Buffers) as the bytes a pipeline writes:
 * text when every argument is a string, a Buffer otherwise, so that an
 * argument's bytes (an entry's envelope) are written as they are.
 */
export function packed(commands) {
  let text = '';
  let parts = null;
  for (const args of commands) {
    text += `*${args.length}\r\n`;
    for (const arg of args) {
      if (typeof arg === 'string') {
        text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
      } else if (Buffer.isBuffer(arg)) {
        parts ??= [];
        parts.push(Buffer.from(`${text}$${arg.length}\r\n`), arg);
        text = '\r\n';
      } else {
        throw new TypeError(`a command's argument is a string or a Buffer, not ${typeof arg}`);
      }
    }
  }
  if (parts === null) return text;
  parts.push(Buffer.from(text));
  return Buffer.concat(parts);
}

/** A reply as a pipeline's outcome: `{ok, value}`, or `{ok: false, error}` for an error reply. */
const outcomeOf = (reply) => (reply instanceof ErrorReply ? { ok: false, error: reply } : { ok: true, value: reply });

/**
 * How to open a socket to the server a node-redis client (`client.options`,
 * its URL already parsed into them) connects to, and the commands that make
 * it the client's (`AUTH`, `SELECT`). Throws a TypeError for credentials
 * that stream (a `streaming-credentials-provider`), which only the client
 * can follow.
 */
function dialOf(options) {
  const socket = options.socket ?? {};
  const provider = options.credentialsProvider;
  if (provider !== undefined && provider.type !== 'async-credentials-provider') {
    throw new TypeError(
      `the cache reads counters on a connection of its own, which can use a client's username and password or an async credentials provider, not a ${provider.type}`,
    );
  }
  const base = { ...socket, noDelay: socket.noDelay ?? true, timeout: undefined, onread: undefined };
  let create;
  let event = 'connect';
  if (socket.tls === true) {
    const tlsOptions = { ...base, port: socket.port ?? 6379 };
    create = () => tls.connect(tlsOptions);
    event = 'secureConnect';
  } else if ('path' in socket) {
    create = () => net.createConnection(base);
  } else {
    const tcp = { ...base, host: socket.host ?? 'localhost', port: socket.port ?? 6379 };
    create = () => net.createConnection(tcp);
  }
  return {
    create,
    event,
    connectTimeout: socket.connectTimeout ?? CONNECT_TIMEOUT_MS,
    commandTimeout: options.commandOptions?.timeout ?? COMMAND_TIMEOUT_MS,
    /** The commands that authenticate the connection and select the client's database. */
    async handshake() {
      const commands = [];
      if (provider !== undefined) {
        const { username, password } = await provider.credentials();
        if (username || password) commands.push(username ? ['AUTH', username, password ?? ''] : ['AUTH', password]);
      }
      if (options.database) commands.push(['SELECT', String(options.database)]);
      return commands;
    },
  };
}

/**
 * One socket and what it owes: the calls written on it and not answered, in
 * the order they were written, and the bytes read past the last whole reply.
 * Each call is answered within `timeout` ms of being written (none for 0),
 * whatever the server sends meanwhile (a server trickling bytes too).
 * Dropped once (its error, a close, a call not answered in time, bytes that
 * are no reply): it is destroyed and every call still waiting on it answers
 * the error, at once, so that no later socket's replies can meet them.
 */
export class Link {
  pending = [];
  /** The bytes read and not yet answered, from `#at`; then chunks not yet joined to them. */
  #read = null;
  #at = 0;
  #more = [];
  #moreLength = 0;
  /** How many bytes past `#at` the reply being read needs at least: chunks are joined only then (a large bulk string arrives in many). */
  #want = 0;
  /** The timer of the oldest call's bound; armed while a call may wait. */
  #timer = null;

  constructor(socket, timeout) {
    this.socket = socket;
    this.timeout = timeout;
    this.dropped = null;
  }

  /** Writes `commands` in one piece; answers their outcomes, the first `texts` replies as text, the rest as Buffers. */
  write(commands, texts) {
    return new Promise((resolve) => {
      if (this.dropped !== null) {
        resolve(failedAll(commands.length, this.dropped));
        return;
      }
      const by = this.timeout > 0 ? performance.now() + this.timeout : Infinity;
      this.pending.push({ count: commands.length, texts, replies: [], resolve, by });
      this.socket.write(packed(commands));
      if (this.#timer === null && by !== Infinity) this.#arm(by);
    });
  }

  /**
   * Sets the timer for `by`. Replies come in the order calls were written,
   * so the oldest call's bound is the first to pass: one timer, set again
   * when it fires (not per call) while calls wait.
   */
  #arm(by) {
    // A longer delay than a timer takes (about 24.8 days) is waited in steps.
    const delay = Math.min(Math.max(0, by - performance.now()), MAX_DELAY_MS);
    this.#timer = setTimeout(() => this.#due(), delay);
    this.#timer.unref();
  }

  #due() {
    this.#timer = null;
    if (this.dropped !== null || this.pending.length === 0) return;
    const { by } = this.pending[0];
    if (performance.now() < by) {
      this.#arm(by);
    } else {
      this.drop(new Error(`the server did not answer a call in ${this.timeout} ms`));
    }
  }

  /** Reads `chunk`: each whole reply answers the oldest call waiting. */
  received(chunk) {
    if (this.dropped !== null) return;
    if (this.#read === null) {
      this.#read = chunk;
    } else {
      const have = this.#read.length - this.#at + this.#moreLength + chunk.length;
      this.#more.push(chunk);
      this.#moreLength += chunk.length;
      // Joined once the reply can be whole: joining each chunk to the
      // bytes before it would copy a large reply's bytes once per chunk.
      if (have < this.#want) return;
      this.#read = Buffer.concat([this.#read.subarray(this.#at), ...this.#more], have);
      this.#at = 0;
      this.#more = [];
      this.#moreLength = 0;
    }
    try {
      while (this.pending.length > 0) {
        const call = this.pending[0];
        const reply = replyAt(this.#read, this.#at, call.replies.length >= call.texts);
        if (reply === INCOMPLETE) {
          this.#want = replyNeed > 0 ? replyNeed - this.#at : 0;
          return;
        }
        this.#at = replyEnd;
        call.replies.push(outcomeOf(reply));
        if (call.replies.length === call.count) {
          this.pending.shift();
          call.resolve(call.replies);
        }
      }
      if (this.#at < this.#read.length) throw new Error('the server sent a reply no call asked for');
      this.#read = null;
      this.#at = 0;
    } catch (error) {
      this.drop(error);
    }
  }

  /** Destroys the socket; every call still waiting answers `error`. */
  drop(error) {
    if (this.dropped !== null) return;
    this.dropped = error;
    clearTimeout(this.#timer);
    this.#timer = null;
    this.socket.destroy();
    const waiting = this.pending;
    this.pending = [];
    for (const call of waiting) call.resolve(failedAll(call.count, error));
  }
}

/** `count` outcomes failed with `error`. */
function failedAll(count, error) {
  const failed = { ok: false, error };
  return Array.from({ length: count }, () => failed);
}

/**
 * One socket at a time to the client's server, opened when a call needs it
 * (after the last one was dropped: a server restart, a killed connection, a
 * call not answered within `commandTimeout`). Each call's commands are
 * written in one piece, and its replies answered as outcomes once they are
 * all read. `opened` counts the sockets, so that
 * what a connection learned about its server is tied to one. The socket
 * never keeps the process alive (the client's does), and closes with the
 * client.
 */
export class OwnConnection {
  #dial;
  #link = null;
  #opening = null;
  /** How many times the client closed: a socket opening across a close is dropped. */
  #closes = 0;

  constructor(client) {
    if (client?.options === undefined || typeof client.on !== 'function') {
      throw new TypeError('give the cache a node-redis client (createClient): it opens its own connection to that client\'s server from the client\'s options');
    }
    this.#dial = dialOf(client.options);
    this.opened = 0;
    client.on('end', () => this.close());
  }

  /**
   * Writes `commands` in one piece and answers the outcome of each, in
   * order: the first `texts` replies as text, the rest as Buffers. A socket
   * that fails, or cannot be opened, answers every outcome with its error:
   * a call never rejects.
   */
  async call(commands, texts) {
    let link = this.#link;
    if (link === null || link.dropped !== null) {
      try {
        link = await (this.#opening ??= this.#open());
      } catch (error) {
        return failedAll(commands.length, error);
      }
    }
    return link.write(commands, texts);
  }

  /** Closes the socket; a call after this opens another. */
  close() {
    this.#closes += 1;
    this.#link?.drop(new Error("the cache's connection was closed with its client"));
  }

  async #open() {
    const closes = this.#closes;
    try {
      const { create, event, connectTimeout, commandTimeout } = this.#dial;
      const socket = create();
      this.opened += 1;
      socket.unref();
      socket.setTimeout(connectTimeout);
      await new Promise((resolve, reject) => {
        socket.once(event, resolve);
        socket.once('error', reject);
        socket.once('timeout', () => socket.destroy(new Error(`no connection to the server in ${connectTimeout} ms`)));
      });
      socket.removeAllListeners('timeout');
      socket.removeAllListeners('error');
      socket.setTimeout(0);
      const link = new Link(socket, commandTimeout);
      socket.on('data', (chunk) => link.received(chunk));
      socket.on('error', (error) => link.drop(error));
      socket.on('close', () => link.drop(new Error('the server closed the connection')));
      const handshake = await this.#dial.handshake();
      if (handshake.length > 0) {
        const refused = (await link.write(handshake, handshake.length)).find((outcome) => !outcome.ok);
        if (refused !== undefined) {
          link.drop(refused.error);
          throw refused.error;
        }
      }
      if (this.#closes !== closes) {
        const closed = new Error("the cache's connection was closed with its client while it opened");
        link.drop(closed);
        throw closed;
      }
      this.#link = link;
      return link;
    } finally {
      this.#opening = null;
    }
  }
}
