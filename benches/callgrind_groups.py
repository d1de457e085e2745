#!/usr/bin/env python3
"""Groups a callgrind profile of one call (a hit) into parts a reader can act
on: key writing, counter names, command packing, reply parsing, SHA-256,
envelope and value decoding, stats, allocations... and says which lines of
cache-key/src each part's instructions come from.

    python3 benches/callgrind_groups.py BINARY LABEL=CALLGRIND_OUT:CALLS...

prints one table, a column per LABEL. Each CALLGRIND_OUT was written by
`valgrind --tool=callgrind --dump-instr=yes` (benches/redis_callgrind.sh)
with collection toggled on in `redis_tier::measured` (ROOT_FN to change
it), which made CALLS calls. BINARY is the bench, built with line tables
(`CARGO_PROFILE_BENCH_DEBUG=line-tables-only`), so that each instruction's
inline stack can be read back (llvm-symbolizer). DETAIL=1 also lists each
part's instructions by innermost function.

Method. Every instruction counted is attributed top-down from ROOT: a
function inherits its caller's part at the call site, and the innermost
rule that matches along the way (a function's name, or a frame of an
inlined function: its source file, and for cache-key's own files the
function a line is in) decides the part. Allocator functions are a part of
their own wherever they are called from. A function called from several
places shares its instructions out in proportion to its whole profile's
(callgrind keeps no call context). The library line of an instruction is
the innermost line of cache-key/src (or cache-key/format/src) on its path.

Valgrind counts a `rep stos` or `rep movs` once per byte it moves: glibc's
memset and memcpy of more than about 2 KB count far more instructions than
their time natively (the redis crate zeroes some 6.5 KB of its read buffer
before each read of a socket: some 6,500 "instructions" per reply read).
"""

import collections
import os
import re
import subprocess
import sys

WORKSPACE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Parts, in the order they are reported; each with rules (regular
# expressions) on a frame's label: a function's full name (from callgrind),
# `<path>:<function>` for an inlined frame of another crate, and
# `cache-key/src/<file>:<Type::fn>` for a line of this crate. The first rule
# matching a label decides; the innermost label matching decides a part.
PARTS = [
    ("allocations", True, [
        r"^(malloc|free|realloc|calloc|cfree|_int_malloc|_int_free|_int_realloc|"
        r"malloc_consolidate|unlink_chunk.*|tcache_\w+|__libc_(malloc|free|realloc|calloc)|"
        r"__rust_(alloc|dealloc|realloc|alloc_zeroed)|__rdl_\w+|__rg_\w+)$",
        r"^alloc::raw_vec::", r"RawVecInner", r"^alloc::alloc::",
        r"<alloc::alloc::Global as core::alloc::Allocator>",
    ]),
    ("SHA-256 of the readable key (software path) and its hex", True, [
        r"^<?sha2::", r"^<?digest::", r"/sha2-[\d.]+/", r"/digest-[\d.]+/",
        r"envelope\.rs:Expected::new$", r"<cache_key::redis::envelope::Expected>::new",
    ]),
    ("value clone (out of moka, or the origin's answer)", False, [
        r"^<(alloc::vec::Vec<redis_tier::Book>|redis_tier::Book|cache_key::redis::local::AtGeneration<.*>|"
        r"cache_key::redis::entry::Stored<.*>) as core::clone::Clone>::clone",
        r"^<\[redis_tier::Book\]>::to_vec", r"to_vec<redis_tier::Book", r"ConvertVec.*redis_tier::Book",
    ]),
    ("dropping the value (the caller's, both sides)", False, [
        r"drop_in_place(::)?<(core::option::Option<)?(alloc::vec::Vec<redis_tier::Book|"
        r"redis_tier::Book|\[redis_tier::Book)",
    ]),
    # A miss: the value checked for floats JSON cannot hold, then written.
    ("finite check (a walk of the value for NaN)", False, [
        r"cache_key::redis::finite", r"redis/finite\.rs:",
    ]),
    ("value encode (JSON, the envelope's fields)", False, [
        r"serde_json::ser::", r"cache_key::redis::envelope::encode", r"envelope\.rs:(encode|derive on Write)$",
        r"impl serde_core::ser::Serialize for", r"as serde_core::ser::Serialize>::serialize",
    ]),
    ("envelope JSON decode (its fields, checks)", False, [
        r"cache_key::redis::envelope::(decode|check|Entry)", r"envelope\.rs:(decode|check)$",
        r"cache_key::redis::envelope::_::<impl serde_core::de::", r"envelope\.rs:derive on (Entry|Header)$",
    ]),
    # Book's own Deserialize, Vec's visitor of Books, and serde_json's entry
    # for a bare Vec<Book> (the raw side); not every function generic over
    # the value type (Entry::judge::<Vec<Book>> is the cache's).
    ("value decode (Vec<Book> from JSON)", False, [
        r"VecVisitor<redis_tier::Book>", r"for redis_tier::Book>", r"redis_tier::_::",
        r"from_slice::<alloc::vec::Vec<redis_tier::Book>>", r"from_trait::<.*alloc::vec::Vec<redis_tier::Book>>",
    ]),
    ("reply reading and parsing (redis crate)", False, [
        r"redis::parser", r"combine::", r"/combine-[\d.]+/", r"redis-[\d.]+/src/parser\.rs",
        r"<redis::connection::Connection>::(recv_response|read)\b", r"extract_error",
        r"<redis::types::Value", r"redis-[\d.]+/src/types\.rs",
        r"pool\.rs:ServerConnection::try_exchange$",
    ]),
    ("command packing (Cmd, args, the pipeline's bytes)", False, [
        r"redis::cmd::", r"<redis::cmd::Cmd", r"write_packed_command", r"redis::pipeline",
        r"ToRedisArgs", r"RedisWrite", r"redis-[\d.]+/src/cmd\.rs", r"redis-[\d.]+/src/pipeline\.rs",
        r"counters\.rs:Epoch::call$", r"entry\.rs:(Entry::)?get$", r"pool\.rs:RedisPool::lay_out$",
        r"batch\.rs:", r"<cache_key::redis::sync::pool::RedisPool>::lay_out",
        r"<cache_key::redis::counters::Epoch>::call", r"cache_key::redis::entry::get",
    ]),
    ("counter names", False, [
        r"redis/counters\.rs:Names::", r"generation/counters\.rs:Counter::write_name$",
        r"<cache_key::redis::counters::Names>", r"<cache_key::generation::counters::Counter>::write_name",
        r"CountersIter",
    ]),
    ("counters: the exchange's setup (instance lookup, groups)", False, [
        r"redis/counters\.rs:(CounterExchange::(read|new)|Epochs::get|CounterSource::tracked)$",
        r"<cache_key::redis::counters::CounterExchange>::(read|new)", r"Epochs>::get",
    ]),
    ("counters: judging their replies, the generation, the guess", False, [
        r"redis/counters\.rs:(CounterExchange::(receive|judge|add_to|is_done|send)|judge_values|"
        r"read_value|parse_digits)$",
        r"<cache_key::redis::counters::CounterExchange>::(receive|judge|send)",
        r"cache_key::redis::counters::(judge_values|read_value|parse_digits)",
        r"generation/counters\.rs:GenerationSum::", r"GenerationSum",
        r"read\.rs:(KeyedRead::generation|Guesses::slot)$", r"foldhash",
    ]),
    ("key writing (the key, its generation, the readable key)", False, [
        r"cache-key/src/(key_writer|canonical|criteria|criteria_segment|std_types|number|cache_key|key)\.rs:",
        r"cache-key/src/generation/draft\.rs:", r"cache-key/format/src/",
        r"cache_key::key_writer", r"cache_key::canonical", r"cache_key_format::",
        r"impl cache_key::\w+ for redis_tier::Search", r"redis_tier::_::<impl cache_key",
        r"entry\.rs:Entry::new$", r"<cache_key::redis::entry::Entry>::new",
        r"<cache_key::generation::draft::KeyDraft>", r"read\.rs:KeyedRead::new$",
    ]),
    ("stats (the query type's counters)", False, [
        r"cache_key::cache::recorder", r"cache/recorder\.rs:", r"cache/stats\.rs:",
        r"state\.rs:CacheState::count_read$",
    ]),
    ("clock reads (Instant, SystemTime)", False, [
        r"Instant>::now", r"std::time::", r"clock_gettime", r"sub_timespec", r"SystemTime",
        r"/std/src/time\.rs:", r"/std/src/sys/pal/unix/time\.rs:", r"/std/src/sys/time/",
    ]),
    ("connection: pool checkout, socket I/O, deadline, circuit", False, [
        r"^r2d2::", r"<r2d2::", r"parking_lot", r"scheduled_thread_pool", r"/r2d2-[\d.]+/",
        r"breaker\.rs:", r"timeouts\.rs:", r"pool\.rs:(RedisPool::(checkout|send_once|send)|"
        r"ServerConnection::(exchange|fit|restore)|Ages::|ServerManager::)",
        r"send_packed_command", r"std::net::", r"std::io::",
        r"^(__libc_)?(send|recv|read|write|poll|sendto|recvfrom|__send|__recv)\b",
        r"std::sys::", r"<redis::connection::", r"redis-[\d.]+/src/connection\.rs",
    ]),
    # The tracked hit in process, and the moka cache beside it.
    ("moka's lookup (its hash table, the entry's checks)", False, [
        r"moka::", r"/moka-[\d.]+/", r"crossbeam", r"triomphe", r"quanta", r"tagptr", r"/equivalent-",
    ]),
    ("hashing (SipHash)", False, [
        r"core::hash::sip", r"/core/src/hash/", r"std::hash::random", r"as core::hash::Hash>::hash",
        r"Hasher",
    ]),
    ("comparing the key or the query", False, [
        r"as core::cmp::PartialEq>::eq", r"^bcmp$", r"^__memcmp", r"^memcmp",
    ]),
    ("tracking: epoch, liveness, the entry's freshness and stamp", False, [
        r"redis/tracking\.rs:", r"redis/local\.rs:", r"coarsetime", r"cache_key::redis::tracking",
        r"cache_key::redis::local", r"read\.rs:tracked_local$", r"state\.rs:CacheState::tracked_hit$",
    ]),
    ("finding the value type's level (MokaCaches::of)", False, [
        r"cache/moka\.rs:MokaCaches::of$", r"state\.rs:CacheState::local$", r"redis/local\.rs:Local::of$",
    ]),
    ("other", False, []),
]

COMPILED = [(name, sticky, [re.compile(rule) for rule in rules]) for name, sticky, rules in PARTS]
STICKY = {name for name, sticky, _ in PARTS if sticky}


def part_of(label):
    for name, _, rules in COMPILED:
        if any(rule.search(label) for rule in rules):
            return name
    return None


def relative(path):
    """A workspace path relative to the workspace, or None."""
    if path.startswith(WORKSPACE + "/"):
        return path[len(WORKSPACE) + 1:]
    if path.startswith(("cache-key/", "benches/")):
        return path
    return None


def is_library(rel):
    return rel is not None and rel.startswith(("cache-key/src/", "cache-key/format/src/"))


class SourceMap:
    """The function (`Type::fn`, or `fn`) each line of a source file is in,
    read from the file by its braces: enough for rustfmt's layout."""

    def __init__(self):
        self.files = {}

    def function(self, rel, line):
        if rel not in self.files:
            self.files[rel] = self._read(rel)
        names = self.files[rel]
        return names[line - 1] if 0 < line <= len(names) else "?"

    @staticmethod
    def _read(rel):
        try:
            with open(os.path.join(WORKSPACE, rel)) as f:
                lines = f.read().split("\n")
        except OSError:
            return []
        impl_re = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:unsafe\s+)?impl\b(?:<.*?>)?\s+(.*?)\s*(?:where\b.*)?\{?\s*$")
        fn_re = re.compile(r"\bfn\s+(\w+)")
        depth, stack, pending, names = 0, [], None, []
        for text in lines:
            code = re.sub(r"//.*$", "", text)
            code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
            code = re.sub(r"'(\\.|[^'\\])'", "''", code)
            match = fn_re.search(code)
            if match:
                pending = ("fn", match.group(1))
            elif re.match(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:unsafe\s+)?impl\b", code):
                head = impl_re.match(code)
                target = head.group(1) if head else ""
                target = target.split(" for ")[-1]
                target = re.sub(r"<.*", "", target).split("::")[-1].strip()
                pending = ("impl", target)
            types = [name for kind, name, _ in stack if kind == "impl"]
            fns = [name for kind, name, _ in stack if kind == "fn"]
            current = None
            if pending and pending[0] == "fn":
                current = pending[1]
            elif fns:
                current = fns[0]
            if current:
                names.append(f"{types[-1]}::{current}" if types else current)
            else:
                names.append(None)
            for char in code:
                if char == "{":
                    depth += 1
                    if pending:
                        stack.append((pending[0], pending[1], depth))
                        pending = None
                elif char == "}":
                    while stack and stack[-1][2] >= depth:
                        stack.pop()
                    depth -= 1
                elif char == ";" and pending and pending[0] == "fn":
                    pending = None
        # A line outside any function: an attribute's code (a derive), named
        # by the item it stands on.
        item_re = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:struct|enum)\s+(\w+)")
        for i, name in enumerate(names):
            if name is None:
                item = next((m.group(1) for m in map(item_re.match, lines[i:i + 8]) if m), None)
                if item is None:
                    item = next((m.group(1) for m in map(item_re.match, reversed(lines[max(0, i - 30):i])) if m), None)
                names[i] = f"derive on {item}" if item else "-"
        return names


class Profile:
    """A callgrind profile with instruction positions: per function, its own
    instructions by address, and its calls by call site."""

    def __init__(self, path):
        self.own = collections.defaultdict(lambda: collections.defaultdict(int))
        self.calls = collections.defaultdict(list)
        self.object = {}
        self.summary = 0
        self._read(path)

    def _read(self, path):
        names = {"ob": {}, "fl": {}, "fn": {}}
        kinds = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
                 "cfl": "fl", "fn": "fn", "cfn": "fn"}

        def name(kind, value):
            match = re.match(r"\((\d+)\)(?: (.*))?$", value)
            if not match:
                return value
            table = names[kinds[kind]]
            if match.group(2) is not None:
                table[match.group(1)] = match.group(2)
            return table.get(match.group(1), "?")

        last = [0, 0]

        def position(tokens):
            values = []
            for i, token in enumerate(tokens):
                if token == "*":
                    values.append(last[i])
                elif token[0] in "+-":
                    values.append(last[i] + int(token, 0))
                else:
                    values.append(int(token, 0))
            return values

        ob = fn = cfn = None
        call = None
        with open(path) as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not line:
                    continue
                if line.startswith("summary:"):
                    self.summary = int(line.split()[1])
                    continue
                key, sep, value = line.partition("=")
                if sep and key in kinds:
                    resolved = name(key, value)
                    if key == "ob":
                        ob = resolved
                    elif key == "fn":
                        fn = resolved
                        # A function's own block names its object.
                        self.object[fn] = ob
                    elif key == "cfn":
                        cfn = resolved
                    continue
                if key == "calls" and sep:
                    call = int(value.split()[0])
                    continue
                if not (line[0].isdigit() or line[0] in "+-*"):
                    continue
                tokens = line.split()
                addr, src = position(tokens[:2])
                cost = int(tokens[2]) if len(tokens) > 2 else 0
                last[0], last[1] = addr, src
                if call is not None:
                    self.calls[fn].append((addr, cfn, cost))
                    call = None
                else:
                    self.own[fn][addr] += cost

    def inclusive(self, fn):
        return sum(self.own[fn].values()) + sum(cost for _, _, cost in self.calls[fn])

    def hot_code(self, calls):
        """The code every call runs: the 64-byte lines (and the 4 KiB pages
        they are in) holding an instruction run at least 0.9 times a call.
        What a call fetches when the caches lost its code between calls (the
        kernel and redis-server ran meanwhile), whatever the layout."""
        lines = collections.defaultdict(int)
        for own in self.own.values():
            for addr, cost in own.items():
                lines[addr >> 6] = max(lines[addr >> 6], cost)
        hot = [line for line, cost in lines.items() if cost >= 0.9 * calls]
        return len(hot), len({line >> 6 for line in hot})


def symbolize(binary, addresses):
    """Each address's inline stack, outermost first: (function, file, line)."""
    addresses = sorted(addresses)
    run = subprocess.run(
        ["llvm-symbolizer", "--obj=" + binary, "--inlines", "--functions=short"],
        input="\n".join(hex(a) for a in addresses) + "\n",
        capture_output=True, text=True, check=True)
    blocks = run.stdout.strip("\n").split("\n\n")
    stacks = {}
    for addr, block in zip(addresses, blocks):
        lines = block.split("\n")
        frames = []
        for fn_name, place in zip(lines[0::2], lines[1::2]):
            parts = place.rsplit(":", 2)
            path = parts[0]
            line = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            frames.append((fn_name, path, line))
        stacks[addr] = list(reversed(frames))
    return stacks


class Grouping:
    def __init__(self, profile, binary, root):
        self.profile = profile
        self.source = SourceMap()
        self.memo = {}
        self.busy = set()
        binary_name = os.path.realpath(binary)

        def ours(fn):
            obj = profile.object.get(fn)
            return obj is not None and os.path.realpath(obj) == binary_name

        addresses = set()
        for fn, own in profile.own.items():
            if ours(fn):
                addresses.update(own.keys())
        for fn, calls in profile.calls.items():
            if ours(fn):
                addresses.update(addr for addr, _, _ in calls)
        self.stacks = symbolize(binary, addresses) if addresses else {}
        self.root = root

    def frame_label(self, fn_name, path, line):
        rel = relative(path)
        if is_library(rel):
            return f"{rel}:{self.source.function(rel, line)}", (rel, line)
        return f"{path}:{fn_name}", None

    @staticmethod
    def enter(part, found):
        """The part after a rule found `found` inside `part`: a sticky part
        (allocations) remembers what it serves."""
        if part.split("\t")[0] in STICKY or not found:
            return part
        if found in STICKY:
            return f"{found}\t{part}"
        return found

    def resolve(self, stack, part, where):
        for fn_name, path, line in stack:
            label, place = self.frame_label(fn_name, path, line)
            if place:
                where = place
            part = self.enter(part, part_of(label))
        return part, where

    def shares(self, fn, part, where):
        """`fn`'s instructions, as fractions by (part, library line, the
        innermost function), entered in `part` at `where`."""
        part = self.enter(part, part_of(fn))
        key = (fn, part, where)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:
            return {(part, where, fn): 1.0}
        self.busy.add(key)
        total = self.profile.inclusive(fn)
        out = collections.defaultdict(float)
        if total:
            for addr, cost in self.profile.own[fn].items():
                stack = self.stacks.get(addr, [])
                at_part, at_where = self.resolve(stack, part, where)
                label = stack[-1][0] if stack else fn
                out[(at_part, at_where, label)] += cost / total
            for addr, callee, cost in self.profile.calls[fn]:
                stack = self.stacks.get(addr, [])
                at_part, at_where = self.resolve(stack, part, where)
                for k, v in self.shares(callee, at_part, at_where).items():
                    out[k] += v * cost / total
        self.busy.discard(key)
        self.memo[key] = dict(out)
        return self.memo[key]

    def place(self, where):
        if where is None:
            return "outside cache-key"
        rel, line = where
        short = rel.replace("cache-key/src/", "")
        return f"{short}:{line} ({self.source.function(rel, line)})"

    def totals(self, calls):
        """Per call: each part's instructions, by library line, by innermost
        function, and (allocations) by the part they serve."""
        total = self.profile.inclusive(self.root)
        per = lambda fraction: fraction * total / calls
        parts = collections.defaultdict(float)
        lines = collections.defaultdict(lambda: collections.defaultdict(float))
        labels = collections.defaultdict(lambda: collections.defaultdict(float))
        served = collections.defaultdict(lambda: collections.defaultdict(float))
        for (part, where, label), fraction in self.shares(self.root, "other", None).items():
            name, _, under = part.partition("\t")
            parts[name] += per(fraction)
            lines[name][where] += per(fraction)
            labels[name][label] += per(fraction)
            if under:
                served[name][under] += per(fraction)
        return per(1.0), parts, lines, labels, served


def report(columns, detail):
    """One table: a column per profile, the parts as rows, and where in
    cache-key each part's instructions are (of the profiles that have them)."""
    results = [(label, grouping, grouping.totals(calls)) for label, grouping, calls in columns]
    for (label, grouping, (total, _, _, _, _)), (_, _, calls) in zip(results, columns):
        lines, pages = grouping.profile.hot_code(calls)
        print(f"- {label}: {total:,.0f} instructions per call, in {grouping.root}; "
              f"hot code {lines} lines of 64 B ({lines * 64 / 1024:.1f} KiB) in {pages} pages")
    print()
    print("| part | " + " | ".join(label for label, _, _ in results) + " | where in cache-key (per call) |")
    print("| --- | " + " | ".join("---" for _ in results) + " | --- |")
    for name, _, _ in PARTS:
        costs = [parts.get(name, 0.0) for _, _, (_, parts, _, _, _) in results]
        if max(costs) < 0.5:
            continue
        where = []
        for label, grouping, (_, _, lines, _, served) in results:
            top = [f"{grouping.place(at)} {cost:,.0f}"
                   for at, cost in sorted(lines[name].items(), key=lambda i: -i[1])[:6]
                   if cost >= 20 and at is not None]
            serving = [f"{under.split(' (')[0]} {cost:,.0f}"
                       for under, cost in sorted(served[name].items(), key=lambda i: -i[1]) if cost >= 20]
            if serving:
                top.append("for: " + ", ".join(serving))
            if top:
                where.append((f"{label}: " if len(results) > 1 else "") + "; ".join(top))
        print(f"| {name} | " + " | ".join(f"{cost:,.0f}" for cost in costs) + f" | {' / '.join(where)} |")
    print("| total | " + " | ".join(f"{total:,.0f}" for _, _, (total, _, _, _, _) in results) + " | |")
    for label, _, (_, parts, _, labels, _) in results:
        for name, _, _ in PARTS:
            if parts.get(name, 0.0) < 0.5 or not (detail or name == "other"):
                continue
            top = sorted(labels[name].items(), key=lambda i: -i[1])[:10]
            print(f"\n{label}, `{name}` by innermost function (per call): " + "; ".join(
                f"{fn[:90]} {cost:,.0f}" for fn, cost in top if cost >= 10))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary = sys.argv[1]
    root = os.environ.get("ROOT_FN", "redis_tier::measured")
    columns = []
    for spec in sys.argv[2:]:
        label, _, rest = spec.partition("=")
        path, _, calls = rest.rpartition(":")
        profile = Profile(path)
        if root not in profile.own and root not in profile.calls:
            sys.exit(f"{root} is not in {path}")
        columns.append((label, Grouping(profile, binary, root), int(calls)))
    report(columns, os.environ.get("DETAIL") == "1")


if __name__ == "__main__":
    main()
