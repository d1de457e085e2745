"""Times the Python port's hit (RedisCache.read: the counters and the entry,
the envelope checked) against the same client's raw GET of the same key,
with and without json.loads, the hit of a new Query made for each read, and
a floor: the strict hit's four commands written by hand in one pipeline
(MGET of the query's counters, CLIENT GETNAME, WAIT 0 0, GET of the entry)
on a connection of their own made as the client's pool makes its
connections, as the port's hit reads, packed once and written at once as
the port writes its own, the replies read raw, the envelope parsed whole as
the raw GET + json.loads does.
REDIS_URL=redis://... python3 ports/python/bench_hit.py [reads]
ports/bench/hits.sh runs it on a server of its own; ports/README.md has the numbers."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import redis

from cache_redis import QueryType, RedisCache


ROUND = 500
"""Reads of each kind in a round: the kinds take turns, so that every kind
meets the machine's load of the same moment, and a ratio is taken per round."""


def at(micros: list[float], q: float) -> float:
    """The sample at quantile ``q`` of sorted ``micros``."""
    return micros[min(len(micros) - 1, int(q * len(micros)))]


def main() -> None:
    reads = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
    cache = RedisCache(client=client)
    search = QueryType(namespace="bench", operation="search", hash_tag=True, value_id="Vec<Book>", ttl_ms=3_600_000)
    query = search.query(2, {"title": "Dune"})
    # A page of 20 books: strings, numbers and an optional field (about 2.3 KB of JSON).
    page = [
        {
            "title": f"The Book of Sand, volume {i}",
            "author": "Jorge Luis Borges",
            "year": 1975 + i,
            "pages": 200 + 7 * i,
            "subtitle": None if i % 2 == 0 else f"Stories, part {i}",
        }
        for i in range(20)
    ]
    cache.insert(query, page)
    key = cache.read(query).key

    # The floor reads the counters the hit reads for this query (the port's
    # own names), on a connection of its own made as the client's pool makes
    # its connections and named as the cache named its own (CLIENT SETNAME)
    # when it learned its server: where the port's hit reads.
    counters = list(query.counters)
    if len(counters) != 3:
        raise RuntimeError(f"the bench query reads {len(counters)} counters, not 3: {counters}")
    if client.exists(*counters) != len(counters):
        raise RuntimeError(f"not every counter of {counters} exists")
    cache_name = next((c["name"] for c in client.client_list() if c["name"].startswith("cache-key:")), None)
    if cache_name is None:
        raise RuntimeError("the cache's own connection is not named")
    pool = client.connection_pool
    floor = pool.connection_class(**pool.connection_kwargs)
    floor.send_command("CLIENT", "SETNAME", cache_name)
    floor.read_response()

    # The strict hit's four commands packed once, as the port packs its own.
    packed = b"".join(floor.pack_commands([("MGET", *counters), ("CLIENT", "GETNAME"), ("WAIT", 0, 0), ("GET", key)]))

    def strict_replies() -> list[object]:
        # Written at once and the four replies read raw, as the port's hit does.
        floor.send_packed_command([packed])
        return [floor.read_response(disable_decoding=True) for _ in range(4)]

    def raw_strict() -> object:
        # None judged; the entry parsed whole.
        return json.loads(strict_replies()[3])

    # Checked once, untimed: the replies a strict hit judges are all there.
    values, name, replicas, entry = strict_replies()
    if None in values:
        raise RuntimeError(f"a counter read nil: {values}")
    if name != cache_name.encode():
        raise RuntimeError(f"the floor's connection is not named as the cache's: {name!r}")
    if replicas != 0:
        raise RuntimeError(f"WAIT 0 0 answered {replicas!r}")
    if len(json.loads(entry)["value"]) != len(page):
        raise RuntimeError("the floor read another entry")

    def hit() -> None:
        read = cache.read(query)
        if not read.hit:
            raise RuntimeError(f"a bench read missed: {read.reason}")

    def fresh_hit() -> None:
        # As a service reads: a new Query for each call.
        read = cache.read(search.query(2, {"title": "Dune"}))
        if not read.hit:
            raise RuntimeError(f"a bench read missed: {read.reason}")

    kinds = [
        ("hit", hit),
        ("raw GET", lambda: client.get(key)),
        ("raw GET + json.loads", lambda: json.loads(client.get(key))),
        ("hit, a new query per read", fresh_hit),
        ("raw strict read (floor)", raw_strict),
    ]
    for _, once in kinds:
        for _ in range(1000):  # warm up
            once()

    def calls() -> dict:
        return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in client.info("commandstats").items()}

    # What a hit sends, counted on untimed hits.
    counted = 1000
    before = (cache.stats["round_trips"], calls())
    for _ in range(counted):
        hit()
    after = (cache.stats["round_trips"], calls())
    per_hit = lambda name: (after[1].get(name, 0) - before[1].get(name, 0)) / counted  # noqa: E731

    samples: list[list[float]] = [[] for _ in kinds]
    medians: list[list[float]] = [[] for _ in kinds]
    for done in range(0, reads, ROUND):
        for k, (_, once) in enumerate(kinds):
            micros = []
            for _ in range(min(ROUND, reads - done)):
                start = time.perf_counter_ns()
                once()
                micros.append((time.perf_counter_ns() - start) / 1000)
            samples[k] += micros
            medians[k].append(at(sorted(micros), 0.5))

    def result(k: int) -> dict:
        micros = sorted(samples[k])
        return {
            "label": kinds[k][0],
            **{name: round(at(micros, q), 1) for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
            "mean": round(statistics.fmean(micros), 1),
        }

    def ratio(a: int, b: int) -> dict:
        """The ratio of kind ``a``'s median to kind ``b``'s, per round: their median, least and most."""
        each = sorted(m / medians[b][r] for r, m in enumerate(medians[a]))
        return {"median": round(at(each, 0.5), 2), "min": round(each[0], 2), "max": round(each[-1], 2)}

    print(
        json.dumps(
            {
                "port": "python",
                "reads": reads,
                "rounds": len(medians[0]),
                "bytes": len(json.dumps(page, separators=(",", ":"))),
                "round_trips_per_hit": (after[0] - before[0]) / counted,
                "commands_per_hit": {name: per_hit(name) for name in ("evalsha", "mget", "wait", "get")},
                "results": [result(k) for k in range(len(kinds))],
                "ratios": {
                    "hit / raw GET": ratio(0, 1),
                    "hit / raw GET + parse": ratio(0, 2),
                    "new query hit / raw GET": ratio(3, 1),
                    "floor / raw GET": ratio(4, 1),
                    "hit / floor": ratio(0, 4),
                },
            }
        )
    )
    client.close()


if __name__ == "__main__":
    main()
