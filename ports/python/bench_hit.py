"""Times the Python port's hit (RedisCache.read: the counters and the entry,
the envelope checked) against the same client's raw GET of the same key,
with and without json.loads, and the hit of a new Query made for each read.
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


def timed(label: str, once, reads: int) -> dict:
    for _ in range(1000):  # warm up
        once()
    micros = []
    for _ in range(reads):
        start = time.perf_counter_ns()
        once()
        micros.append((time.perf_counter_ns() - start) / 1000)
    micros.sort()

    def at(q: float) -> float:
        return round(micros[min(len(micros) - 1, int(q * len(micros)))], 1)

    return {"label": label, "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "mean": round(statistics.fmean(micros), 1)}


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

    def hit() -> None:
        read = cache.read(query)
        if not read.hit:
            raise RuntimeError(f"a bench read missed: {read.reason}")

    def calls() -> dict:
        return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in client.info("commandstats").items()}

    before = (cache.stats["round_trips"], calls())
    hits = timed("hit", hit, reads)
    after = (cache.stats["round_trips"], calls())
    per_hit = lambda name: (after[1].get(name, 0) - before[1].get(name, 0)) / (reads + 1000)  # noqa: E731
    raw = timed("raw GET", lambda: client.get(key), reads)
    raw_json = timed("raw GET + json.loads", lambda: json.loads(client.get(key)), reads)

    def fresh_hit() -> None:
        # As a service reads: a new Query for each call.
        read = cache.read(search.query(2, {"title": "Dune"}))
        if not read.hit:
            raise RuntimeError(f"a bench read missed: {read.reason}")

    fresh = timed("hit, a new query per read", fresh_hit, reads)
    print(
        json.dumps(
            {
                "port": "python",
                "reads": reads,
                "bytes": len(json.dumps(page, separators=(",", ":"))),
                "round_trips_per_hit": (after[0] - before[0]) / (reads + 1000),
                "commands_per_hit": {name: per_hit(name) for name in ("evalsha", "mget", "wait", "get")},
                "results": [hits, raw, raw_json, fresh],
            }
        )
    )
    client.close()


if __name__ == "__main__":
    main()
