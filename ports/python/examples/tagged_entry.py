import json
import os
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # ports/python
from cache_redis import QueryType, RedisCache  # noqa: E402

# The Rust service's query type, whose answers carry tags from their value:
#   #[cache_key(namespace = "library", operation = "shelf", hash_tag)]
#   struct Shelf { #[tenant] branch: u32, #[criterion] term: String }
# and its CachedQuery: Value = Vec<Item>, VALUE_ID = "Vec<Item>", TTL 1m,
# VALUE_TAGS = true, write_value_tags pushing each item's id as `book`
# inside the branch and its author as `author`, shared by every branch.
Shelf = QueryType(
    namespace="library",
    operation="shelf",
    hash_tag=True,
    value_id="Vec<Item>",
    ttl_ms=60_000,
    # The same tags as write_value_tags: an answer this service stores is
    # checked by every service, and the other way round.
    tags_of=lambda items: [
        tag
        for item in items
        for tag in ({"name": "book", "value": item["id"]}, {"name": "author", "value": item["author"], "global": True})
    ],
)


def shelf_of(term):
    return [{"id": 42, "author": "Borges", "printing": 0}]  # your database here


client = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/"))
cache = RedisCache(client=client)

query = Shelf.query(tenant=2, criteria={"term": "fiction"})
items = cache.get_or_load(query, lambda: shelf_of("fiction"))  # Rust's entry: a hit, its tags checked
print(json.dumps(items))

# Book 42 of branch 2 changed: every answer showing it misses, in every
# service (Shelf.global_tag_scope("author", "Borges") would end every
# branch's answers showing Borges).
cache.invalidate(Shelf.tag_scope(2, "book", 42))
print(json.dumps(cache.read(query).reason))  # "absent"
client.close()
