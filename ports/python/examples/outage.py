import json
import os
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # ports/python
from cache_redis import CacheError, FailurePolicy, QueryType, RedisCache  # noqa: E402

Search = QueryType(
    namespace="library",
    operation="search",
    hash_tag=True,
    value_id="Vec<Book>",
    ttl_ms=60_000,
)


def search_catalog(title):
    return [{"title": title, "year": 1965, "subtitle": None}]  # your database here


# Redis is down: REDIS_URL names a server that does not answer.
client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"), socket_connect_timeout=1)
query = Search.query(tenant=2, criteria={"title": "Dune"})

# The default, as Rust's FailurePolicy::CallOrigin: the origin answers,
# nothing is stored, the failure is counted and told.
cache = RedisCache(client=client, on_failure=lambda error: print(f"cache: {error.kind}: {error}", file=sys.stderr))
print(json.dumps(cache.get_or_load(query, lambda: search_catalog("Dune"))))  # the origin's answer
print(json.dumps(cache.stats["degraded"]))  # 1

# Strict, as FailurePolicy::ReturnError: the caller handles the failure.
strict = RedisCache(client=client, failure_policy=FailurePolicy.RETURN_ERROR)
try:
    strict.get_or_load(query, lambda: search_catalog("Dune"))
except CacheError as error:
    print(json.dumps(error.kind))  # "backend"
