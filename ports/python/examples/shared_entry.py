import json
import os
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # ports/python
from cache_redis import QueryType, RedisCache  # noqa: E402

# The Rust service's query type, as it declares it:
#   #[cache_key(namespace = "library", operation = "search", hash_tag, value = Vec<Book>, ttl = "1m")]
#   struct Search { #[tenant] branch: u32, #[criterion] title: String }
Search = QueryType(
    namespace="library",
    operation="search",
    hash_tag=True,
    value_id="Vec<Book>",  # CachedQuery::VALUE_ID: `value` as written
    ttl_ms=60_000,
)


def search_catalog(title):
    return [{"title": title, "year": 0, "subtitle": "from the Python service"}]  # your database here


client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
cache = RedisCache(client=client)

query = Search.query(tenant=2, criteria={"title": "Dune"})
books = cache.get_or_load(query, lambda: search_catalog("Dune"))  # Rust's entry: a hit
print(json.dumps(books))

cache.invalidate(Search.tenant_scope(2))  # branch 2: every service's next read misses
print(json.dumps(cache.read(query).reason))  # "absent"
client.close()
