"""A typed cache in Redis that a Python service shares with Rust services
using cache-key's ``RedisCache`` (and with the Node.js port): wire format 6 of
cache-key/WIRE-FORMAT.md on the redis client (redis-py, pinned in
requirements.txt), on one server or a Redis Cluster. ``cache_wire`` holds the
protocol's data; this module only sends and judges. One read is one round
trip when the generation last seen for the query's scope is still current
(the entry's ``GET`` goes with the counters), two otherwise, and one more for
a hit whose entry has tags from its value (their counters). A query's own
tags (``QueryType(query_tags=...)``) are counters among its counters: read
with them, in the same round trip.

Run as ``python3 cache_redis.py --url redis://...`` (or ``--cluster
url,url,...``) it answers JSON lines, for tests/ports_shared_cache.rs and
ports/bench (see ``_batch``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from cache_key import GLOBAL, CacheKeyError, KeyTemplate, build_key, check_declared, check_rust_type, options_from_json, value_from_json
from cache_wire import (
    CLOCK_SCRIPT,
    DEFAULT_MAX_TAGS,
    INSTANCE_SCRIPT,
    FIRST_REDIS_VERSION,
    MAX_STEPS,
    Epoch,
    Expected,
    QueryTag,
    TooManyTagsError,
    UnstorableError,
    WireError,
    clock_names,
    clock_value,
    counter_names,
    decode_envelope,
    encode_envelope,
    exact_json,
    from_spec,
    instance_of,
    kept_tags,
    namespace_counter,
    operation_counter,
    query_digest,
    query_tag_lines,
    query_tags_of,
    raised_value,
    slot_of,
    sum_generation,
    tag_counter,
    tag_line_counter,
    tags_unchanged,
    tenant_counter,
    to_spec,
    trusted_value,
)

__all__ = [
    "GLOBAL",
    "CacheError",
    "Query",
    "QueryTag",
    "QueryType",
    "Read",
    "RedisCache",
    "Scope",
    "TooManyTagsError",
    "UnstorableError",
    "WireError",
]


class CacheError(Exception):
    """A failure of the cache (never a miss): ``kind`` is ``backend`` (Redis
    refused or could not be reached; the client's error is ``__cause__``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


_VALUE_ID = re.compile(r"[\x21-\x7e]{1,128}")


@dataclasses.dataclass(frozen=True)
class Scope:
    """What an invalidation bumps: one counter."""

    counter: str


@dataclasses.dataclass(frozen=True)
class QueryType:
    """What a query type is to the cache: the key parts every query of it
    shares, its value id (the Rust ``CachedQuery::VALUE_ID``: ``value =
    Vec<Book>`` declares ``"Vec<Book>"``) and how long an answer is fresh.
    ``accepts(value)``, if given, checks a value read from Redis the way the
    Rust value type's deserialization would: a value it refuses is a miss
    (``undecodable``).

    ``tags_of(value)``, if given, makes answers tagged from their value (the
    Rust ``CachedQuery::VALUE_TAGS``): the entities an answer shows, as
    ``[{"name": ..., "value": ..., "global": bool}]`` (``value`` a str or an
    int, as a tenant value; ``"global"`` for a tag every tenant of the
    namespace shares, otherwise it is inside the query's tenant). The entry
    keeps them (at most ``max_tags``) with when its fill began, and is served
    only while none was bumped since
    (``cache.invalidate(query_type.tag_scope(tenant, name, value))``).

    ``query_tags`` makes criteria tags of the query itself (the Rust
    ``#[criterion] #[tag = "book"]``, or ``#[tag(name = "author", global =
    ...)]``): ``[{"criterion": "ids", "name": "book", "global": False}, ...]``
    (or ``QueryTag``s; kept as a tuple of ``QueryTag``). Each query's value of
    each such criterion names its tags (``query.query_tags``: a list, tuple,
    set or frozenset one per element, ``None`` none), whose counters are
    among the counters its key's generation is made of: a bump of
    ``tag_scope(tenant, "book", 42)`` (or of ``global_tag_scope``) ends every
    entry of a query asking for book 42, and no other. Its entries record
    them (``qtags``) for the Rust crate's sweep.

    ``tenant_type`` and ``criterion_types`` (``{name: type}``) declare the
    Rust types of the tenant and the criteria (``"u64"``, ``"String"``,
    ``"Option<u32>"``, ``"Vec<u64>"``...; criteria by their names in the key,
    after ``rename_all`` and ``rename``): a query Rust could not form is
    refused when it is made (``check_declared``: ``not_an_integer``,
    ``out_of_range``, ``wrong_type``, ``unknown_criterion``), never cached
    under a key Rust never writes. Without them the values are taken as
    given."""

    namespace: str
    operation: str
    value_id: str
    ttl_ms: int
    schema: int = 1
    hash_tag: bool = False
    max_len: int | None = None
    accepts: Callable[[object], bool] | None = None
    tags_of: Callable[[Any], Iterable[Mapping[str, object]]] | None = None
    max_tags: int = DEFAULT_MAX_TAGS
    query_tags: Sequence[QueryTag | Mapping[str, object]] = ()
    tenant_type: str | Sequence[str] | None = None
    criterion_types: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        # Frozen: the checked form replaces the given one.
        object.__setattr__(self, "query_tags", query_tags_of(self.query_tags))
        if not isinstance(self.value_id, str) or not _VALUE_ID.fullmatch(self.value_id):
            raise ValueError(
                "value_id is 1 to 128 printable ASCII characters without white space, "
                f"as the Rust VALUE_ID, not {self.value_id!r}"
            )
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms <= 0:
            raise ValueError(f"ttl_ms is a positive whole number of milliseconds, not {self.ttl_ms!r}")
        if self.tenant_type is not None:
            types = [self.tenant_type] if isinstance(self.tenant_type, str) else list(self.tenant_type)
            for rust_type in types:
                check_rust_type(rust_type)
        for rust_type in (self.criterion_types or {}).values():
            check_rust_type(rust_type)
        # A key at generation 0 checks the namespace, operation and schema now.
        build_key(self.namespace, self.operation, schema=self.schema, tenant=GLOBAL, generation=0)

    def query(self, tenant: object, criteria: object = ()) -> Query:
        """One query: its tenant (a value, a list of parts, or ``GLOBAL``) and
        criteria (as ``build_key`` takes them); by keyword as in Node.js,
        ``query(tenant=2, criteria={...})``."""
        return Query(self, tenant, criteria)

    def namespace_scope(self) -> Scope:
        """Every key of the namespace, whatever its query type."""
        return Scope(namespace_counter(self.namespace))

    def tenant_scope(self, tenant: object) -> Scope:
        """Every key of a tenant in the namespace; for a compound tenant, its
        first values alone cover every tenant starting with them."""
        return Scope(tenant_counter(self.namespace, tenant))

    def operation_scope(self, tenant: object) -> Scope:
        """Every key of this type's operation for one tenant (``GLOBAL``: of the global keys)."""
        return Scope(operation_counter(self.namespace, tenant, self.operation))

    def tag_scope(self, tenant: object, name: str, value: object) -> Scope:
        """Every entry of the namespace tagged ``name`` = ``value`` inside
        ``tenant`` (the whole tenant, as a query gives it; ``GLOBAL`` for the
        global queries'), whatever its query type. ``value`` is written as
        the tagging side writes it: 42 and "42" are one tag, "042" another."""
        return Scope(tag_counter(self.namespace, tenant, {"name": name, "value": value}))

    def global_tag_scope(self, name: str, value: object) -> Scope:
        """Every entry of the namespace tagged ``name`` = ``value`` as a tag
        every tenant shares (``"global"``)."""
        return Scope(tag_counter(self.namespace, GLOBAL, {"name": name, "value": value, "global": True}))


_DIGESTS = 1024
_DIGESTED_KEY = 512
_digests: dict[str, str] = {}
"""Readable keys hashed lately, for queries made anew for each read: at
most ``_DIGESTS`` keys of at most ``_DIGESTED_KEY`` characters."""


def _digest_of(readable_key: str) -> str:
    """``query_digest(readable_key)``, remembered for a short key."""
    if len(readable_key) > _DIGESTED_KEY:
        return query_digest(readable_key)
    digest = _digests.get(readable_key)
    if digest is None:
        digest = query_digest(readable_key)
        if len(_digests) >= _DIGESTS:
            _digests.clear()
        _digests[readable_key] = digest
    return digest


class Query:
    """A query of a ``QueryType``: its own tag lines (``query_tags``), its
    counters, and its key at a generation."""

    query_tags: list[str]
    """The query's own tags' lines (``#name=value``, ``@name=value``), from
    its criteria as its type's ``query_tags`` declare them, in order,
    repeats kept: what its entries record as ``qtags``."""
    counters: list[str]
    """The counters whose sum is its key's generation: the namespace's, the
    tenant's, the operation's, then one per line of ``query_tags``."""

    def __init__(self, query_type: QueryType, tenant: object, criteria: object) -> None:
        self.type = query_type
        self.tenant = tenant
        self.criteria = list(criteria.items()) if isinstance(criteria, Mapping) else list(criteria)
        check_declared(tenant, self.criteria, query_type.tenant_type, query_type.criterion_types)
        # Written once, reporting a bad tenant or criterion (or a key too
        # long) here, not on a read; then its tags (an empty one, or a
        # missing criterion, raises here).
        t = query_type
        self._keys = KeyTemplate(
            t.namespace,
            t.operation,
            tenant=tenant,
            criteria=self.criteria,
            schema=t.schema,
            hash_tag=t.hash_tag,
            max_len=t.max_len,
        )
        self.key_at(0)
        # What an entry at the generation last read must match (expected_at).
        self._expected: tuple[int, Expected] | None = None
        self.query_tags = query_tag_lines(query_type.query_tags, self.criteria)
        self.counters = counter_names(query_type.namespace, query_type.operation, tenant, self.query_tags)
        operation = len(self.counters) - len(self.query_tags) - 1
        # Queries of one operation and tenant with different tags have
        # different generations: each set of counters is a scope of its own.
        self._scope_key = " ".join(self.counters[operation:])

    def key_at(self, generation: int) -> str:
        return self._keys.key_at(generation)

    def readable_key_at(self, generation: int) -> str:
        """The key with its criteria never summarized: its SHA-256 is the envelope's ``query``."""
        return self._keys.readable_key_at(generation)

    def expected_at(self, generation: int) -> Expected:
        """What an entry of this query at ``generation`` must match, with the
        digest of its readable key: made once per generation."""
        known = self._expected
        if known is None or known[0] != generation:
            readable_key = self.readable_key_at(generation)
            known = (generation, Expected(self.type.schema, self.type.value_id, readable_key, _digest_of(readable_key)))
            self._expected = known
        return known[1]

    def tenant_scope(self) -> Scope:
        return self.type.tenant_scope(self.tenant)

    def operation_scope(self) -> Scope:
        return self.type.operation_scope(self.tenant)

    def tag_scope(self, name: str, value: object) -> Scope:
        """The tag ``name`` = ``value`` inside this query's tenant."""
        return self.type.tag_scope(self.tenant, name, value)

    def tag_counters(self, lines: Sequence[str]) -> list[str]:
        """The counter of each tag line (``#...``, ``@...``) of an entry of this query."""
        return [tag_line_counter(self.type.namespace, self.tenant, line) for line in lines]

    @property
    def clock_names(self) -> list[str]:
        """Where a fill reads the tag clock (the tenant's tags' slot, the namespace's shared tags' slot)."""
        return clock_names(self.type.namespace, self.tenant)

    @property
    def scope_key(self) -> str:
        """What identifies the query's generation scope (namespace, tenant,
        operation, and its own tags): its operation's counter, followed by its
        tags' (names hold no space)."""
        return self._scope_key


class _Flight:
    """One origin call of a key in flight (``get_or_load``), and its waiters:
    it lands answered (``value``), failed (``error``), or neither (its leader
    stopped by a ``BaseException``), and then a waiter leads."""

    __slots__ = ("landed", "answered", "value", "error", "waiters")

    def __init__(self) -> None:
        self.landed = threading.Event()
        self.answered = False
        self.value: object = None
        self.error: Exception | None = None
        # Calls that waited on it (counted under the cache's flights lock).
        self.waiters = 0


@dataclasses.dataclass(frozen=True)
class Read:
    """A read's outcome: a fresh entry of the query (``hit``, ``value``,
    ``fresh``, and its ``tags`` and ``since`` when it has tags: each tag's
    counter was read and found below ``since``), or a miss and its ``reason``:
    ``absent`` (with ``tag_bumped`` when the entry was there but a tag of it
    was bumped since its fill began), ``stale`` (the query's entry, past its
    freshness; its tags are not read), ``wrong_type``, or one of the
    envelope's (``version``, ``undecodable``, ``schema``, ``value_type``,
    ``query``)."""

    key: str
    generation: int
    hit: bool
    value: Any = None
    fresh: int | None = None
    reason: str | None = None
    tags: list[str] | None = None
    since: list[int] | None = None
    tag_bumped: bool = False


def _code(reply: object) -> str | None:
    """The error code (first word) of an error reply, or ``None``."""
    if isinstance(reply, redis.exceptions.NoScriptError):
        return "NOSCRIPT"
    if isinstance(reply, redis.exceptions.ResponseError):
        return str(reply).split(" ", 1)[0]
    return None


def _backend(error: BaseException, what: str) -> Exception:
    if isinstance(error, (WireError, CacheError)):
        return error
    failure = CacheError("backend", f"{what}: {error}")
    failure.__cause__ = error
    return failure


class _Instance:
    """The instance a connection to one server learned (its run id, then its
    replication id), the name it gave itself there, and whether a read found
    the server a replica since: what a plain read of counters trusts
    (WIRE-FORMAT.md, "Reading counters on a connection that knows its server")."""

    __slots__ = ("id", "name", "demoted")

    def __init__(self, instance_id: str, replica: bool) -> None:
        self.id = instance_id
        self.name = f"cache-key:{instance_id}".encode()
        # A replica's dataset may come from another primary: once it is a
        # primary again (a new replication id), the connection learns again.
        self.demoted = replica


def _instance_in(info: object) -> tuple[str, bool]:
    """The instance id in an ``INFO server replication`` text, and whether
    the server is a replica; an error before Redis 7."""
    if isinstance(info, BaseException):
        raise _backend(info, "asking the server for its instance id")
    text = info.decode() if isinstance(info, bytes) else str(info)
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line and not line.startswith("#"))
    run_id, replid, version = (fields.get(name, "").strip() for name in ("run_id", "master_replid", "redis_version"))
    if not run_id or not replid or not version:
        raise WireError("protocol", "INFO server replication names no run id, replication id and version")
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) < FIRST_REDIS_VERSION:
        raise WireError(
            "old_server",
            f"Redis {version} is older than {FIRST_REDIS_VERSION}: its scripts are saved and replicated, "
            "so generation counters could not tell a restarted or promoted server from the one that wrote them",
        )
    # Checked as the script's text will hold it.
    return Epoch.of(run_id + replid).instance_id, fields.get("role", "").strip() != "master"


def _pipeline(connection: Any, commands: Sequence[Sequence[object]]) -> list[object]:
    """``commands`` written on ``connection`` at once, then every reply read
    (raw: no response callback); an error reply stands in its command's
    place. A failure of the connection raises, and leaves it disconnected."""
    return _send_packed(connection, connection.pack_commands(commands), len(commands))


def _packed(args: Sequence[object]) -> bytes:
    """A command as RESP writes it, its arguments as redis-py packs them: text in UTF-8, bytes as they are, an int in decimal."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, int) and not isinstance(arg, bool):
            data = b"%d" % arg
        else:
            raise TypeError(f"a command's argument is a str, bytes or an int, not {type(arg).__name__}")
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


_CHECKS = 3
_CHECKED = _packed(["CLIENT", "GETNAME"]) + _packed(["WAIT", "0", "0"])
_PACKED_READS = 1024
_packed_reads: dict[tuple[str, ...], bytes] = {}
"""The checks of a plain read (``MGET`` of its counters, ``CLIENT GETNAME``,
``WAIT 0 0``) packed, by counters: at most ``_PACKED_READS``."""


def _plain_read(names: Sequence[str]) -> bytes:
    """The checks of a plain read of counters ``names``, packed once."""
    key = tuple(names)
    packed = _packed_reads.get(key)
    if packed is None:
        packed = _packed(["MGET", *names]) + _CHECKED
        if len(_packed_reads) >= _PACKED_READS:
            _packed_reads.clear()
        _packed_reads[key] = packed
    return packed


def _send_packed(connection: Any, packed: Sequence[bytes], count: int) -> list[object]:
    """``count`` commands, ``packed``, written on ``connection`` at once, then
    every reply read as ``_pipeline`` reads them."""
    connection.send_packed_command(packed)
    replies: list[object] = []
    try:
        for _ in range(count):
            try:
                replies.append(connection.read_response(disable_decoding=True))
            except redis.exceptions.ResponseError as error:
                replies.append(error)
    except BaseException:
        # Replies may be left on the socket: never hand it to the next caller.
        connection.disconnect()
        raise
    return replies


class _ServerTransport:
    """One server: every counter in one group. Counters are read plainly
    (``MGET``, checked by ``CLIENT GETNAME`` and ``WAIT 0 0`` in the same
    pipeline) on a connection that learned its server: the transport's own
    when no other thread is reading on it, a pooled one otherwise."""

    # One clock for every tag: the tenant's and the namespace's are one reading.
    clustered = False
    plain = True

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        # The instance each connection learned; dropped when it
        # reconnects (_reconnected), so a new socket learns its own server.
        self._instances: weakref.WeakKeyDictionary[Any, _Instance] = weakref.WeakKeyDictionary()
        # A connection of the transport's own, made as the client's pool makes
        # its connections: a read on it skips the pool's checkout (its lock and
        # a health check of three system calls: some 8 us of a hit's client
        # work). Made again in a new process (after a fork).
        self._own: Any = None
        self._own_pid = 0
        self._own_lock = threading.Lock()

    def group(self, name: str) -> object:
        return None

    def send(self, commands: Sequence[Sequence[object]]) -> list[object]:
        """One round trip: every command written, then every reply read;
        an error reply (or failure) stands in its command's place."""
        pipe = self.client.pipeline(transaction=False)
        for args in commands:
            pipe.execute_command(*args)
        try:
            return pipe.execute(raise_on_error=False)
        except redis.exceptions.RedisError as error:
            return [error] * len(commands)

    def flush_scripts(self) -> None:
        self.client.execute_command("SCRIPT FLUSH")

    def read_plainly(
        self, packed: bytes, count: int, stats: dict[str, Any] | None
    ) -> tuple[Any, _Instance, list[object]]:
        """``count`` commands, ``packed``, in one pipeline on the transport's
        own connection, or a pooled one while another thread reads on it:
        the connection, the instance that very connection learned (learned
        first if it has none), and the replies. Raises a ``CacheError`` when
        the connection fails."""
        if self._own_lock.acquire(blocking=False):
            try:
                if self._own is None or self._own_pid != os.getpid():
                    pool = self.client.connection_pool
                    self._own = pool.connection_class(**pool.connection_kwargs)
                    self._own_pid = os.getpid()
                return self._read_on(self._own, packed, count, stats, again_if_closed=True)
            finally:
                self._own_lock.release()
        pool = self.client.connection_pool
        try:
            connection = pool.get_connection()
        except redis.exceptions.RedisError as error:
            raise _backend(error, "connecting to the server") from error
        try:
            return self._read_on(connection, packed, count, stats)
        finally:
            pool.release(connection)

    def _read_on(
        self, connection: Any, packed: bytes, count: int, stats: dict[str, Any] | None, again_if_closed: bool = False
    ) -> tuple[Any, _Instance, list[object]]:
        """``read_plainly`` on ``connection``, which this thread holds. With
        ``again_if_closed``, a connection the server closed (a restart,
        ``CLIENT KILL``, an idle timeout: found on its first use, where the
        pool's checkout finds it by a health check) reads once more on a new
        socket, which learns its server first; never after a timeout."""
        try:
            instance = self._instances.get(connection)
            if instance is None:
                instance = self._learn(connection, stats)
            if stats is not None:
                stats["round_trips"] += 1
            replies = _send_packed(connection, [packed], count)
            if self._instances.get(connection) is not instance:
                # It reconnected on the way: the replies came from a connection that did not learn this instance.
                raise CacheError("backend", "the connection reconnected during a read of the generation counters: nothing read is trusted")
            return connection, instance, replies
        except redis.exceptions.RedisError as error:
            # The connection failed (_send_packed dropped it): whatever socket it opens next learns its server first.
            self._instances.pop(connection, None)
            if again_if_closed and isinstance(error, redis.exceptions.ConnectionError):
                return self._read_on(connection, packed, count, stats)
            raise _backend(error, "reading the generation counters") from error

    def forget(self, connection: Any, instance: _Instance) -> None:
        """Forgets ``instance``, if ``connection`` still holds it: that
        connection learns its server again before its next read."""
        if self._instances.get(connection) is instance:
            self._instances.pop(connection, None)

    def _reconnected(self, connection: Any) -> None:
        self._instances.pop(connection, None)

    def _learn(self, connection: Any, stats: dict[str, Any] | None) -> _Instance:
        """Learns the server of ``connection``: ``INFO server replication``,
        then the name set in a transaction with the same ``INFO``, so that
        the name and the instance it names belong to one server connection
        (a proxy that moved it between the two is caught)."""
        connection.register_connect_callback(self._reconnected)
        for _ in range(MAX_STEPS):
            if stats is not None:
                stats["round_trips"] += 2
            instance_id, _ = _instance_in(_pipeline(connection, [["INFO", "server", "replication"]])[0])
            replies = _pipeline(
                connection,
                [["MULTI"], ["CLIENT", "SETNAME", f"cache-key:{instance_id}"], ["INFO", "server", "replication"], ["EXEC"]],
            )
            done = replies[-1]
            if isinstance(done, BaseException) or not isinstance(done, list) or len(done) != 2:
                raise _backend(
                    done if isinstance(done, BaseException) else WireError("protocol", f"EXEC answered {done!r}"),
                    "naming the connection after its instance",
                )
            named, replica = _instance_in(done[1])
            if named == instance_id:
                instance = _Instance(instance_id, replica)
                self._instances[connection] = instance
                return instance
        raise WireError("unsettled", f"the connection's server changed on each of {MAX_STEPS} attempts to learn it")


class _ClusterTransport:
    """A Redis Cluster: counters grouped by slot, each command routed by its key."""

    clustered = True
    plain = False

    def __init__(self, cluster: RedisCluster) -> None:
        self.cluster = cluster

    def group(self, name: str) -> object:
        return slot_of(name)

    def send(self, commands: Sequence[Sequence[object]]) -> list[object]:
        # The cluster pipeline writes to every node before it reads a reply.
        pipe = self.cluster.pipeline()
        for args in commands:
            pipe.execute_command(*args)
        try:
            return pipe.execute(raise_on_error=False)
        except redis.exceptions.RedisError as error:
            return [error] * len(commands)

    def flush_scripts(self) -> None:
        # On every primary, as the Rust crate does: a script may sit on any of them.
        self.cluster.execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)


@dataclasses.dataclass
class _Group:
    group: object
    members: list[int]
    stage: str  # "call", "learn", "load" or "done"
    mode: str  # "r", "x" or "b"
    epoch: Epoch | None = None


def _exchange(
    transport: Any,
    epochs: dict[object, Epoch],
    names: Sequence[str],
    mode: str,
    alongside: Sequence[Sequence[object]] = (),
    stats: dict[str, Any] | None = None,
    start: tuple[str, Epoch] | None = None,
) -> tuple[list[int], list[object]]:
    """Reads (``r``) or bumps (``b``) counters ``names``, with the instances
    learned so far in ``epochs`` (group -> Epoch). Each round trip sends one
    command per group not done, all before any reply is read; ``alongside``
    commands go with the first. Returns the values, in the order of
    ``names``, and the replies to ``alongside``. ``start``: the stage and
    instance every group begins with (by default, the instance known or
    learning it)."""
    if mode == "r" and transport.plain:
        return _plain_exchange(transport, epochs, names, alongside, stats)
    values: list[int | None] = [None] * len(names)
    groups: list[_Group] = []
    for i, name in enumerate(names):
        group = transport.group(name)
        found = next((state for state in groups if state.group == group), None)
        if found is not None:
            found.members.append(i)
            continue
        epoch = epochs.get(group)
        stage, epoch = start if start is not None else ("call" if epoch else "learn", epoch)
        groups.append(_Group(group, [i], stage, mode, epoch))
    extra: list[object] = []
    step = 0
    while True:
        pending = [state for state in groups if state.stage != "done"]
        if not pending:
            # Every group done: every counter has its value.
            return [value for value in values if value is not None], extra
        step += 1
        if step > MAX_STEPS:
            raise WireError(
                "unsettled",
                f"the generation counters did not settle in {MAX_STEPS} round trips "
                "(their servers changed on every step)",
            )
        if stats is not None:
            stats["round_trips"] += 1
        commands = [_command(state, names, values) for state in pending]
        # On one server a read is followed by WAIT 0 0, which a replica
        # refuses: a primary demoted by REPLICAOF keeps its scripts, and its
        # `r` read would answer the counters a full resync brought.
        checked = not transport.clustered and any(state.stage == "call" and state.mode == "r" for state in pending)
        checks = [["WAIT", 0, 0]] if checked else []
        first = list(alongside) if step == 1 else []
        replies = transport.send(commands + checks + first)
        if step == 1:
            extra = replies[len(commands) + len(checks) :]
        if checked and isinstance(replies[len(commands)], BaseException):
            # Learned again: once a primary, its replication id is another.
            epochs.pop(transport.group(names[0]), None)
            raise _backend(replies[len(commands)], "checking that the server is still a primary")
        for state, reply in zip(pending, replies):
            _judge(state, reply, names, values, epochs, transport)


def _plain_exchange(
    transport: _ServerTransport,
    epochs: dict[object, Epoch],
    names: Sequence[str],
    alongside: Sequence[Sequence[object]],
    stats: dict[str, Any] | None,
) -> tuple[list[int], list[object]]:
    """Reads counters ``names`` on a server connection that learned its
    instance: ``MGET``, ``CLIENT GETNAME`` and ``WAIT 0 0`` in one pipeline
    with ``alongside``. A value is trusted only when stamped with that
    connection's instance id, and only when the same connection still bears
    the name it took when it learned that instance and its server answers
    ``WAIT`` as a primary; otherwise the read is an error and the connection
    learns again. Values not stamped with that id are raised by its script
    (``x``)."""
    packed = _plain_read(names)
    if alongside:
        packed += b"".join(_packed(args) for args in alongside)
    connection, instance, replies = transport.read_plainly(packed, _CHECKS + len(alongside), stats)
    counters, name, role = replies[0], replies[1], replies[2]
    if name != instance.name:
        transport.forget(connection, instance)
        if isinstance(name, BaseException):
            raise _backend(name, "asking the connection its name")
        raise CacheError(
            "backend",
            f"the connection no longer reaches the instance {instance.id} it learned (moved to another server "
            "under it): its counters are not trusted, and it learns its server again",
        )
    if isinstance(role, BaseException):
        instance.demoted = True
        raise _backend(role, "checking that the server is still a primary")
    if instance.demoted:
        transport.forget(connection, instance)
        raise CacheError(
            "backend",
            f"the server of instance {instance.id} was a replica since, and is a primary again: its counters "
            "are not trusted, and the connection learns its server again",
        )
    if isinstance(counters, BaseException):
        raise _backend(counters, "reading the generation counters")
    if not isinstance(counters, list) or len(counters) != len(names):
        raise WireError("protocol", f"MGET answered {len(names)} counters with {counters!r}")
    values = [trusted_value(counter, raw, instance.id) for counter, raw in zip(names, counters)]
    untrusted = [i for i, value in enumerate(values) if value is None]
    if untrusted:
        # Raised by the connection's instance's script, loaded (and checked) first if it is not the one known.
        known = epochs.get(transport.group(names[0]))
        known = known if known is not None and known.instance_id == instance.id else None
        start = ("call", known) if known is not None else ("load", Epoch.of(instance.id))
        raised, _ = _exchange(transport, epochs, [names[i] for i in untrusted], "x", (), stats, start)
        for i, value in zip(untrusted, raised):
            values[i] = value
    return values, replies[_CHECKS:]


def _members(state: _Group, values: Sequence[int | None]) -> list[int]:
    # Raising (`x`) names only the counters still without a value.
    return [i for i in state.members if values[i] is None] if state.mode == "x" else state.members


def _command(state: _Group, names: Sequence[str], values: Sequence[int | None]) -> list[object]:
    first = names[state.members[0]]
    if state.stage == "call":
        keys = [names[i] for i in _members(state, values)]
        return ["EVALSHA", state.epoch.sha, len(keys), *keys, state.mode]
    if state.stage == "learn":
        return ["EVAL", INSTANCE_SCRIPT, 1, first]
    return ["EVAL", state.epoch.code, 1, first, "v"]


def _flush(transport: Any) -> None:
    """After ``NOTME``: the script of an instance sits on a server that is
    not that instance (a failover between learning and loading). It is
    removed, so that no ``r`` read there returns counters the instance did
    not write, and the instance is learned again."""
    try:
        transport.flush_scripts()
    except redis.exceptions.RedisError as error:
        raise _backend(error, "flushing the scripts of a server that is not their instance") from error


def _judge(
    state: _Group,
    reply: object,
    names: Sequence[str],
    values: list[int | None],
    epochs: dict[object, Epoch],
    transport: Any,
) -> None:
    """Moves the group to its next stage after ``reply``, its values written into ``values``."""
    code = _code(reply)
    if state.stage == "call":
        if code == "NOSCRIPT":
            # Not this instance, or it lost its scripts: learn which it is.
            if epochs.get(state.group) is state.epoch:
                del epochs[state.group]
            state.stage = "learn"
            return
        if code == "NOTME":
            _flush(transport)
            state.stage = "learn"
            return
        if code == "NOTACOUNTER":
            detail = str(reply)[len("NOTACOUNTER ") :]
            name = next((n for n in names if detail.startswith(n)), detail)
            raise WireError("not_a_counter", f"`{name}` holds something other than a generation counter ({detail})", name)
        if isinstance(reply, BaseException):
            raise _backend(reply, "reading the generation counters")
        members = _members(state, values)
        if not isinstance(reply, list) or len(reply) != len(members):
            raise WireError("protocol", f"the counter script answered {len(members)} counters with {reply!r}")
        done = True
        for i, raw in zip(members, reply):
            if state.mode == "r":
                values[i] = trusted_value(names[i], raw, state.epoch.instance_id)
            else:
                values[i] = raised_value(names[i], raw)
            done = done and values[i] is not None
        if done:
            state.stage = "done"
        else:
            state.mode = "x"
        return
    if state.stage == "learn":
        if isinstance(reply, BaseException):
            raise _backend(reply, "asking a server for its instance id")
        state.epoch = instance_of(reply)
        state.stage = "load"
        return
    # "load"
    if code == "NOTME":
        _flush(transport)
        state.stage = "learn"
        return
    if isinstance(reply, BaseException):
        raise _backend(reply, "loading the counter script")
    epochs[state.group] = state.epoch
    state.stage = "call"


_GUESSES = 4096
"""How many generations are remembered for one-round-trip reads; then the table starts afresh."""


class FailurePolicy:
    """What a failure of Redis does to a call, as the Rust ``FailurePolicy``."""

    CALL_ORIGIN = "call_origin"
    """The call is answered without the cache (the default): ``get_or_load``
    asks the origin and stores nothing, ``get`` misses, ``insert`` stores
    nothing; ``stats["degraded"]`` counts it and ``on_failure(error)`` is told."""
    RETURN_ERROR = "return_error"
    """The call raises the ``CacheError`` or ``WireError``."""


class RedisCache:
    """The typed cache: ``RedisCache(client=redis.Redis(...))`` or
    ``RedisCache(cluster=RedisCluster(...))``, the client with
    ``decode_responses=False`` (the default: entries are judged as bytes).
    ``keep_ms`` keeps entries that long past their freshness (the Rust
    fail-safe's ``max_stale``); ``now()`` is the clock, in ms since 1970.
    ``failure_policy`` (``FailurePolicy``, default ``call_origin``) and
    ``on_failure(error)`` are what a failure of Redis does, as the Rust
    ``with_failure_policy`` and ``with_failure_hook``."""

    def __init__(
        self,
        *,
        client: redis.Redis | None = None,
        cluster: RedisCluster | None = None,
        keep_ms: int = 0,
        now: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        failure_policy: str = FailurePolicy.CALL_ORIGIN,
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        if (client is None) == (cluster is None):
            raise TypeError("give the cache either a client or a cluster")
        if failure_policy not in (FailurePolicy.CALL_ORIGIN, FailurePolicy.RETURN_ERROR):
            raise ValueError(f"failure_policy is {FailurePolicy.CALL_ORIGIN!r} or {FailurePolicy.RETURN_ERROR!r}, not {failure_policy!r}")
        self.failure_policy = failure_policy
        self.on_failure = on_failure
        self._transport = _ClusterTransport(cluster) if cluster is not None else _ServerTransport(client)
        self._epochs: dict[object, Epoch] = {}
        self._guesses: dict[str, int] = {}
        # The origin calls in flight, by the key at its generation.
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        self.keep_ms = keep_ms
        self.now = now
        # round_trips: batches sent and awaited (a step of the counters, with
        # the GET that may go with it, is one; a second GET is another).
        # tag_misses: entries whose tags were bumped since their fill began
        # (counted among the misses, reason ``absent``).
        self.stats: dict[str, Any] = {
            "hits": 0,
            "misses": 0,
            "loads": 0,
            "unstorable": 0,
            "tag_misses": 0,
            "round_trips": 0,
            # Calls answered around a failure of Redis (call_origin).
            "degraded": 0,
            # Misses answered by another call's origin call (get_or_load).
            "coalesced": 0,
            "rejected": {},
        }

    def _answers_around(self, error: BaseException) -> bool:
        """Whether the call answers around ``error`` (a failure of Redis,
        under call_origin): then it is counted and told."""
        if self.failure_policy != FailurePolicy.CALL_ORIGIN or not isinstance(error, (CacheError, WireError)):
            return False
        self.stats["degraded"] += 1
        if self.on_failure is not None:
            self.on_failure(error)
        return True

    def read(self, query: Query) -> Read:
        """Reads the query's counters and its entry at their sum. Raises a
        ``CacheError`` or ``WireError`` only when they cannot be read; every
        entry that is not a fresh one of this query is a miss."""
        guess = self._guesses.get(query.scope_key)
        alongside = []
        if guess is not None:
            try:
                alongside = [["GET", query.key_at(guess)]]
            except CacheKeyError:
                # A guess too long for max_len is no guess: the key at the sum decides.
                guess = None
        values, early = _exchange(self._transport, self._epochs, query.counters, "r", alongside, self.stats)
        generation = sum_generation(values)
        if len(self._guesses) >= _GUESSES:
            self._guesses.clear()
        self._guesses[query.scope_key] = generation
        key = query.key_at(generation)
        # The GET sent with the counters holds the entry only when they still
        # sum to the generation it was sent for; otherwise it is asked again.
        reply = early[0] if guess == generation else self._send([["GET", key]])[0]
        found = self._judge_entry(query, key, generation, reply)
        if not found.hit:
            return found
        if found.tags is not None and not self._tags_unchanged(query, found):
            # Never served, not even as stale: the next load overwrites it.
            self.stats["tag_misses"] += 1
            return dataclasses.replace(self._miss(key, generation, "absent"), tag_bumped=True)
        self.stats["hits"] += 1
        return found

    def _tags_unchanged(self, query: Query, found: Read) -> bool:
        """Whether no tag of a found entry was bumped since its fill began:
        their counters, read as counters are."""
        values, _ = _exchange(self._transport, self._epochs, query.tag_counters(found.tags), "r", (), self.stats)
        return tags_unchanged(found.tags, values, found.since)

    def _clock_commands(self, query: Query) -> list[list[object]]:
        """The commands reading the query's tag clock: its tenant's tags'
        slot, and on a cluster its namespace's shared tags' slot."""
        names = query.clock_names if self._transport.clustered else query.clock_names[:1]
        return [["EVAL", CLOCK_SCRIPT, 1, name] for name in names]

    @staticmethod
    def _clock_of(replies: Sequence[object]) -> list[int]:
        """``since`` from the clock commands' replies: ``[tenant, global]``."""
        values = []
        for reply in replies:
            if isinstance(reply, BaseException):
                raise _backend(reply, "reading the tag clock")
            values.append(clock_value(reply))
        return [values[0], values[-1]]

    def _send(self, commands: Sequence[Sequence[object]]) -> list[object]:
        self.stats["round_trips"] += 1
        return self._transport.send(commands)

    def _judge_entry(self, query: Query, key: str, generation: int, reply: object) -> Read:
        if _code(reply) == "WRONGTYPE":
            return self._miss(key, generation, "wrong_type")
        if isinstance(reply, BaseException):
            raise _backend(reply, "reading the entry")
        if reply is None:
            return self._miss(key, generation, "absent")
        decoded = decode_envelope(reply, query.expected_at(generation), query.type.accepts)
        if "miss" in decoded:
            return self._miss(key, generation, decoded["miss"])
        hit = decoded["hit"]
        if hit["fresh"] <= self.now():
            return self._miss(key, generation, "stale")
        return Read(key, generation, True, value=hit["value"], fresh=hit["fresh"], tags=hit.get("tags"), since=hit.get("since"))

    def _miss(self, key: str, generation: int, reason: str) -> Read:
        self.stats["misses"] += 1
        if reason not in ("absent", "stale"):
            rejected = self.stats["rejected"]
            rejected[reason] = rejected.get(reason, 0) + 1
        return Read(key, generation, False, reason=reason)

    def get(self, query: Query, default: object = None) -> object:
        """The value of a fresh entry of the query, or ``default`` on any
        miss (and on a failure of Redis, under call_origin)."""
        try:
            read = self.read(query)
        except (CacheError, WireError) as error:
            if not self._answers_around(error):
                raise
            return default
        return read.value if read.hit else default

    def get_or_load(self, query: Query, origin: Callable[[], object]) -> object:
        """The query's value: a hit, or the origin's answer stored under the
        key read **before** the origin was called (the race rule: a bump while
        the origin works leaves its answer unreachable). For a type with
        ``tags_of``, the tag clock is read too before the origin is called,
        and the answer stored with its tags and that reading (a bump of one of
        its tags that had not returned by then ends the entry, whatever the
        origin saw). An origin error propagates and nothing is stored; an
        answer JSON cannot hold, or whose tags cannot be kept (an empty tag
        value, more than ``max_tags``), is returned, not stored
        (``stats["unstorable"]``). The entry of a query with query tags
        records them (``qtags``). A failure of Redis is answered around under
        call_origin (the origin's answer, nothing stored;
        ``stats["degraded"]``, ``on_failure``), raised under return_error.

        One origin call per key at a time in this cache: a miss of a key
        whose origin call is in flight (another thread's ``get_or_load`` of
        the same key at the same generation) waits for it and answers its
        value, or raises its exception (``stats["coalesced"]``); a leader
        stopped by a ``BaseException`` that is no ``Exception`` (a
        ``KeyboardInterrupt``) leaves the key to a waiter, which calls its own
        origin. Not for a type with ``tags_of`` (each miss calls its origin:
        its answer is checked against tags read after its own read), nor
        while Redis cannot be read."""
        since = None
        try:
            read = self.read(query)
            if read.hit:
                return read.value
            if query.type.tags_of is not None:
                since = self._clock_of(self._send(self._clock_commands(query)))
        except (CacheError, WireError) as error:
            if not self._answers_around(error):
                raise
            self.stats["loads"] += 1
            return origin()
        if query.type.tags_of is not None:
            return self._load(query, read, since, origin, None)
        while True:
            with self._flights_lock:
                flight = self._flights.get(read.key)
                if flight is None:
                    flight = self._flights[read.key] = _Flight()
                    break
                flight.waiters += 1
            flight.landed.wait()
            if flight.answered or flight.error is not None:
                # Waiters wake together: counted under the lock, none lost.
                with self._flights_lock:
                    self.stats["coalesced"] += 1
                if flight.answered:
                    return flight.value
                raise flight.error
            # Vacated: this call leads, or waits on whoever took the key.
        try:
            return self._load(query, read, since, origin, flight)
        except Exception as error:
            # The origin's exception, or (after its answer) the store's, which waiters never see.
            flight.error = error
            raise
        finally:
            with self._flights_lock:
                del self._flights[read.key]
            flight.landed.set()

    def _load(
        self, query: Query, read: Read, since: list[int] | None, origin: Callable[[], object], flight: _Flight | None
    ) -> object:
        """``get_or_load`` after a miss: the origin's answer (given to
        ``flight``'s waiters as soon as it is known), stored."""
        self.stats["loads"] += 1
        value = origin()
        if flight is not None:
            flight.value, flight.answered = value, True
            flight.landed.set()
        try:
            self._store(query, read.key, read.generation, value, since)
        except (UnstorableError, TooManyTagsError):
            self.stats["unstorable"] += 1
        except CacheKeyError as error:
            if error.kind != "empty_tag":
                raise
            self.stats["unstorable"] += 1
        except (CacheError, WireError) as error:
            if not self._answers_around(error):
                raise
        return value

    def insert(self, query: Query, value: object) -> None:
        """Stores ``value`` as the query's entry at its current generation
        (with its tags, the tag clock read with the counters, for a type with
        ``tags_of``); raises ``UnstorableError`` for a value JSON cannot hold,
        ``TooManyTagsError`` or a ``CacheKeyError`` ``empty_tag`` for tags
        that cannot be kept. The entry of a query with query tags records
        them (``qtags``). A failure of Redis stores nothing under call_origin
        (``stats["degraded"]``, ``on_failure``) and is raised under
        return_error."""
        tagged = query.type.tags_of is not None
        alongside = self._clock_commands(query) if tagged else ()
        try:
            values, early = _exchange(self._transport, self._epochs, query.counters, "r", alongside, self.stats)
            since = self._clock_of(early) if tagged else None
            generation = sum_generation(values)
            self._store(query, query.key_at(generation), generation, value, since)
        except (CacheError, WireError) as error:
            if not self._answers_around(error):
                raise

    def _store(self, query: Query, key: str, generation: int, value: object, since: list[int] | None) -> None:
        t = query.type
        tags = kept_tags(t.tags_of(value), t.max_tags) if since is not None else []
        data = encode_envelope(
            schema=t.schema,
            value_id=t.value_id,
            readable_key=query.readable_key_at(generation),
            fresh_ms=self.now() + t.ttl_ms,
            value=value,
            tags=tags,
            since=since,
            qtags=query.query_tags,
        )
        reply = self._send([["SET", key, data, "PX", max(1, t.ttl_ms + self.keep_ms)]])[0]
        if isinstance(reply, BaseException):
            raise _backend(reply, "storing the entry")

    def invalidate(self, scope: Scope) -> None:
        """Bumps a scope's counter (``query_type.tenant_scope(t)``,
        ``query.operation_scope()``, ``query_type.namespace_scope()``,
        ``query_type.tag_scope(t, "book", 42)``,
        ``query_type.global_tag_scope("author", "borges")``...): when this
        returns, every read that starts afterwards, in any process and
        language, misses the scope's old entries (for a tag: every entry
        holding it whose fill began before this bump returned)."""
        _exchange(self._transport, self._epochs, [scope.counter], "b", (), self.stats)


# Batch mode: JSON lines in, JSON lines out (the requests of ports/js/cache-cli.mjs).


def _tag_of(tag: dict) -> dict:
    """A tag from its JSON form: its value text, a number or ``{"type": "int", ...}``."""
    value = tag["value"]
    return {**tag, "value": value_from_json(value) if isinstance(value, dict) else value}


def _query_of(request: dict, tags: list | None = None) -> Query:
    """The query of ``request``, of a type with its ``query_tags`` if it has
    them; with ``tags``, of a type whose answers are tagged ``tags``."""
    options = options_from_json({**request, "generation": "0"})
    query_type = QueryType(
        namespace=options["namespace"],
        operation=options["operation"],
        value_id=request["value_id"],
        ttl_ms=request["ttl_ms"],
        schema=options["schema"],
        hash_tag=options["hash_tag"],
        max_len=options["max_len"],
        tags_of=None if tags is None else lambda _value: [_tag_of(tag) for tag in tags],
        query_tags=request.get("query_tags", ()),
        tenant_type=request.get("tenant_type"),
        criterion_types=request.get("criterion_types"),
    )
    return query_type.query(options["tenant"], options["criteria"])


def _nth(request: dict, name: str, n: int) -> Query:
    """The query of ``request`` with one criterion more, ``name`` = ``n``: one entry per value of a batch."""
    return _query_of({**request, "criteria": [*request["criteria"], [name, {"type": "int", "value": str(n)}]]})


def _fill_exact(cache: RedisCache, request: dict) -> dict:
    """Each value (exact form) loaded through ``get_or_load``: ``None`` when
    stored, else the rule that refused it (returned, not stored)."""
    results: list[str | None] = []
    before = cache.stats["unstorable"]
    for i, spec in enumerate(request["values"]):
        value = from_spec(spec)
        returned = cache.get_or_load(_nth(request["query"], request["criterion"], i), lambda value=value: value)
        if returned is not value:
            raise RuntimeError(f"value {i} was not returned as the origin answered it")
        try:
            exact_json(value)
            results.append(None)
        except UnstorableError as error:
            results.append(error.rule)
    if cache.stats["unstorable"] - before != sum(rule is not None for rule in results):
        raise RuntimeError("the cache counted other refusals than exact_json made")
    return {"results": results}


def _read_exact(cache: RedisCache, request: dict) -> dict:
    results = []
    for i in range(request["count"]):
        read = cache.read(_nth(request["query"], request["criterion"], i))
        results.append({"hit": True, "value": to_spec(read.value)} if read.hit else {"hit": False, "reason": read.reason})
    return {"results": results}


def _scope_of(kind: str, query: Query, tag: dict | None = None) -> Scope:
    t, tenant = query.type, query.tenant
    if kind == "namespace":
        return t.namespace_scope()
    if kind == "tenant":
        return t.tenant_scope(tenant)
    if kind == "leading_tenant":
        return t.tenant_scope([tenant[0] if isinstance(tenant, list) else tenant])
    if kind == "operation":
        return t.operation_scope(tenant)
    if kind == "tag" and tag is not None:
        tag = _tag_of(tag)
        if tag.get("global", False):
            return t.global_tag_scope(tag["name"], tag["value"])
        return t.tag_scope(tenant, tag["name"], tag["value"])
    raise ValueError(f"unknown scope {kind!r}")


def _answer(cache: RedisCache, request: dict) -> dict:
    op = request["op"]
    if op in ("fill_exact", "read_exact"):
        return _fill_exact(cache, request) if op == "fill_exact" else _read_exact(cache, request)
    query = _query_of(request["query"], request.get("tags"))
    if op == "read":
        read = cache.read(query)
        if read.hit:
            out = {"hit": True, "value": read.value, "fresh": read.fresh, "key": read.key}
            return {**out, "tags": read.tags} if read.tags is not None else out
        out = {"hit": False, "reason": read.reason, "key": read.key}
        return {**out, "tag_bumped": True} if read.tag_bumped else out
    if op == "get_or_load":
        loaded = []

        def origin() -> object:
            loaded.append(True)
            if "bump_during_origin" in request:
                cache.invalidate(_scope_of("tag", query, request["bump_during_origin"]))
            return request["value"]

        return {"value": cache.get_or_load(query, origin), "loaded": bool(loaded)}
    if op == "insert":
        cache.insert(query, request["value"])
        return {"ok": True}
    if op == "invalidate":
        scope = _scope_of(request["scope"], query, request.get("tag"))
        cache.invalidate(scope)
        return {"ok": True, "counter": scope.counter}
    if op == "stats":
        return cache.stats
    if op == "read_together":
        return _read_together(cache, query, request["callers"], request["reads"])
    if op == "load_together":
        return _load_together(cache, query, request["callers"], request["value"], request.get("fail", False))
    if op == "time":
        micros = []
        for i in range(request["reads"]):
            start = time.perf_counter_ns()
            read = cache.read(query)
            micros.append((time.perf_counter_ns() - start) / 1000)
            if not read.hit:
                raise RuntimeError(f"timed read {i} missed ({read.reason})")
        return {"micros": micros}
    raise ValueError(f"unknown op {op!r}")


def _load_together(cache: RedisCache, query: Query, callers: int, value: object, fail: bool) -> dict:
    """``callers`` threads each calling ``get_or_load`` of ``query`` (cold) at
    once, with an origin that waits until every other caller waits on its
    flight, then answers ``value`` (or raises): how many times it was
    called, the distinct values and error messages the callers got, and
    how many misses were coalesced."""
    calls, values, errors = [0], [], []
    lock = threading.Lock()
    coalesced = cache.stats["coalesced"]

    def origin() -> object:
        with lock:
            calls[0] += 1
        deadline = time.monotonic() + 60
        while sum(flight.waiters for flight in list(cache._flights.values())) < callers - 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the other callers never waited on the flight")
            time.sleep(0.001)
        if fail:
            raise RuntimeError("the origin failed")
        return value

    def caller() -> None:
        try:
            got = cache.get_or_load(query, origin)
        except RuntimeError as error:
            with lock:
                errors.append(str(error))
            return
        with lock:
            if got not in values:
                values.append(got)

    _at_once(callers, caller)
    return {"calls": calls[0], "values": values, "errors": errors, "coalesced": cache.stats["coalesced"] - coalesced}


def _at_once(count: int, body: Callable[[], None]) -> None:
    """``body`` on ``count`` threads started together; returns once all ended."""
    threads = [threading.Thread(target=body) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _read_together(cache: RedisCache, query: Query, callers: int, reads: int) -> dict:
    """``callers`` threads each reading ``query`` ``reads`` times, all at
    once: how many hit, the distinct values they read, and what every other
    read answered (a miss's reason, an error's text)."""
    hits, values, others = [0], [], []
    lock = threading.Lock()

    def caller() -> None:
        for _ in range(reads):
            try:
                read = cache.read(query)
            except (CacheError, WireError) as error:
                outcome = f"{error.kind}: {error}"
            else:
                outcome = None if read.hit else read.reason
            with lock:
                if outcome is not None:
                    others.append(outcome)
                    continue
                hits[0] += 1
                if read.value not in values:
                    values.append(read.value)

    _at_once(callers, caller)
    return {"hits": hits[0], "values": values, "others": others}


def _connect(argv: Sequence[str]) -> tuple[RedisCache, Any]:
    if len(argv) in (2, 4) and argv[0] == "--url" and (len(argv) == 2 or argv[2] == "--ca"):
        # With --ca, a rediss:// server whose certificate that file signs (a test's own).
        tls = {"ssl_ca_certs": argv[3]} if len(argv) == 4 else {}
        client = redis.Redis.from_url(argv[1], socket_timeout=5, socket_connect_timeout=5, **tls)
        return RedisCache(client=client, failure_policy=FailurePolicy.RETURN_ERROR), client
    if len(argv) == 2 and argv[0] == "--cluster":
        nodes = []
        for url in argv[1].split(","):
            match = re.fullmatch(r"redis://([^:/]+):(\d+)/?", url)
            if match is None:
                raise SystemExit(f"not a redis://host:port/ url: {url}")
            nodes.append(ClusterNode(match[1], int(match[2])))
        cluster = RedisCluster(startup_nodes=nodes, socket_timeout=5, socket_connect_timeout=5)
        return RedisCache(cluster=cluster, failure_policy=FailurePolicy.RETURN_ERROR), cluster
    raise SystemExit(
        "usage: python3 cache_redis.py --url <redis url> [--ca <certificate file>] | --cluster <url,url,...>  (JSON lines in, JSON lines out)"
    )


def _batch(argv: Sequence[str]) -> None:
    """One JSON request per line on stdin, one JSON answer per line on stdout,
    in order; a failure is ``{"error": kind, "message": ...}`` on its line.
    The requests are ports/js/cache-cli.mjs's::

        {"op": "read", "query": Q}        -> {"hit": true, "value": V, "fresh": ms, "key": K[, "tags": [...]]}
                                             or {"hit": false, "reason": R, "key": K[, "tag_bumped": true]}
        {"op": "get_or_load", "query": Q, "value": V[, "tags": T][, "bump_during_origin": tag]}
                                          -> {"value": V, "loaded": bool}  (the origin answers V, tagged T;
                                             it bumps ``tag``, in the query's tenant, before it answers)
        {"op": "insert", "query": Q, "value": V[, "tags": T]} -> {"ok": true}
        {"op": "invalidate", "scope": "namespace" | "tenant" | "leading_tenant" | "operation" | "tag",
         "query": Q[, "tag": tag]}        -> {"ok": true, "counter": name}
        {"op": "stats", "query": Q}       -> the cache's stats since the process started
        {"op": "time", "query": Q, "reads": n} -> {"micros": [...]}  (n hits timed; see ports/bench)
        {"op": "load_together", "query": Q, "callers": c, "value": V[, "fail": true]}
                                          -> {"calls": n, "values": [V...], "errors": [message...], "coalesced": k}
                                             (c threads calling get_or_load of Q at once, cold; the origin, once
                                             every other caller waits on it, answers V or raises)
        {"op": "read_together", "query": Q, "callers": c, "reads": n}
                                          -> {"hits": h, "values": [V...], "others": [reason or error...]}
                                             (c callers, threads here, each reading Q n times, all at once)
        {"op": "fill_exact", "query": Q, "criterion": C, "values": [X...]} -> {"results": [None | rule...]}
                                             (value i loaded through get_or_load as the answer of Q with
                                             criterion C = i: stored, or refused by rule)
        {"op": "read_exact", "query": Q, "criterion": C, "count": n}
                                          -> {"results": [{"hit": true, "value": X} | {"hit": false, "reason": R}...]}

    ``X`` is a value in the exact form of ``cache_wire.from_spec`` and ``to_spec``.

    A query ``Q`` is the JSON form of tests/data/vectors.json (namespace,
    operation, schema, tenant, criteria, hash_tag, max_len) with
    ``"value_id"`` and ``"ttl_ms"``, and optionally ``"query_tags": [{"criterion":
    name, "name": N, "global": bool}]``: its type's query tags (as in
    tests/data/wire-vectors.json), each criterion's value giving the query's
    own tags. A tag is ``{"name": N, "value": text, a number or {"type":
    "int", "value": "..."}, "global": bool}``; with ``"tags"``, the query
    type's answers are tagged from their value (``tags_of``)."""
    cache, client = _connect(argv)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                out = _answer(cache, json.loads(line))
            except (CacheError, WireError, CacheKeyError) as error:
                out = {"error": error.kind, "message": str(error)}
            except Exception as error:  # noqa: BLE001 - reported on its line, the batch goes on
                out = {"error": type(error).__name__, "message": str(error)}
            sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            sys.stdout.flush()
    finally:
        client.close()


if __name__ == "__main__":
    _batch(sys.argv[1:])
