#!/usr/bin/env bash
# A port's hit against the same port's raw GET, for Node.js and Python, on a
# redis-server of its own (loopback, no persistence), stopped by its pid.
#   bash ports/bench/hits.sh [reads]     (after npm ci in ports/js and the pip install of ports/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
reads="${1:-20000}"
dir="$(mktemp -d)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
export REDIS_URL="redis://127.0.0.1:$port/"
redis-server --version
node --version
python3 --version
node ports/js/bench-hit.mjs "$reads"
(cd ports/python && python3 bench_hit.py "$reads")
