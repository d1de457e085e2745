"""Cache keys in format 2 of cache-key/KEY-FORMAT.md, for Python 3.10+.

Standard library only: the bytes the Rust crate's ``KeyBuilder`` writes
(``build_key``), ``decode`` to read keys of format 1 or 2 back into their
parts, and tenant ``KeyPattern``s. tests/data/vectors.json is the contract;
tests/ports.rs compares this module with the Rust crate on random queries,
through ``python3 cache_key.py --batch`` (see ``_batch``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping

__all__ = [
    "FORMAT_VERSION",
    "GLOBAL",
    "CacheKeyError",
    "DecodeError",
    "DecodedKey",
    "KeyPattern",
    "KeyTemplate",
    "build_key",
    "canonical",
    "decode",
    "escape",
    "js_number",
    "tenant_segment",
]

FORMAT_VERSION = 2
"""The format version this module writes."""

MAX_PLAIN_CRITERIA = 48
"""Criteria longer than this many bytes are replaced by ``c_`` and a summary."""

SUMMARY_DIGITS = {1: 16, 2: 32}
"""Hex digits of a summary, by format version."""


class _Global:
    def __repr__(self) -> str:
        return "GLOBAL"


GLOBAL = _Global()
"""The ``tenant`` of a key declared global: its data is the same for every tenant."""


class CacheKeyError(ValueError):
    """An input that must never become a key (the Rust ``KeyError``; named
    apart from Python's built-in ``KeyError``).

    ``kind`` names the Rust variant in snake case: ``empty_tenant`` (with
    ``field``), ``missing_tenant``, ``duplicate_criterion`` (with ``name``),
    ``empty_criterion_name`` (with ``position``), ``empty_namespace``,
    ``empty_operation``, ``too_long`` (with ``len`` and ``max``).
    """

    def __init__(self, kind: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.kind = kind
        for name, value in details.items():
            setattr(self, name, value)


class DecodeError(ValueError):
    """Text that is not a key of format 1 or 2: ``kind`` names the Rust
    ``DecodeErrorKind`` in snake case, ``offset`` is the byte (of the key's
    UTF-8) where the problem is."""

    def __init__(self, kind: str, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.kind = kind
        self.offset = offset


_UNRESERVED = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()"
)


_PLAIN = re.compile(r"[A-Za-z0-9\-_.!~*'()]*")
"""Text ``escape`` leaves as it is."""


def escape(text: str) -> str:
    """``esc``: percent-encoding of the UTF-8 bytes, uppercase hex, leaving
    ``A-Z a-z 0-9 - _ . ! ~ * ' ( )`` (JavaScript's ``encodeURIComponent``).
    A string with a lone surrogate is not text: it raises ``UnicodeEncodeError``."""
    if _PLAIN.fullmatch(text):
        return text
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8"))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def js_number(x: float) -> str:
    """A float as JavaScript's ``String(x)`` writes it (ECMA-262
    Number::toString): ``0`` for -0, ``NaN``, ``Infinity``, ``1e+21``, ``1e-7``.

    ``repr`` gives the shortest digits that read back as ``x``, the closest
    of them to ``x``, an exact tie going to the even digit (David Gay's
    algorithm, as ECMA-262 asks); only their layout differs from JavaScript's.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # x = 0.<digits> × 10^point, with no leading or trailing zero digit.
    point = len(whole) + int(exponent or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        text = digits[0] + (f".{digits[1:]}" if k > 1 else "") + f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def _join_elements(elements: Iterable[str]) -> str:
    """A list's canonical string: ``%`` and ``,`` inside an element are
    escaped, so elements stay apart."""
    return ",".join(text.replace("%", "%25").replace(",", "%2C") for text in elements)


def canonical(value: object) -> str:
    """A criterion value's canonical string; ``""`` means the criterion is
    dropped. ``bool`` is ``true``/``false`` (never an integer), ``int`` is
    exact decimal, ``float`` is JavaScript's form (``js_number``), ``None`` is
    empty; a list or tuple is a list, a set or frozenset a set (Python's
    equality has already merged ``True`` with ``1`` and ``1.0`` in a set, so
    such a set has one element)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, (list, tuple)):
        return _join_elements(canonical(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return _join_elements(sorted({canonical(item) for item in value}, key=_utf8))
    raise TypeError(
        "a criterion value is a str, int, float, bool, None, list, tuple, set or frozenset, "
        f"not {type(value).__name__}"
    )


def _tenant_text(value: object) -> str:
    """A tenant value's text: a str, or an int in decimal. The int 0 is an
    empty value, as in Rust (an id left at its default): ``""``. A Rust
    tenant declared ``#[tenant(allow_zero = "...")]`` writes ``0``, which the
    str ``"0"`` writes here."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return "" if value == 0 else str(value)
    raise TypeError(f"a tenant is a str or an int, not {type(value).__name__}")


_INTEGERS = {
    **{f"u{bits}": (0, 2**bits - 1) for bits in (8, 16, 32, 64, 128)},
    **{f"i{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64, 128)},
    "usize": (0, 2**64 - 1),
    "isize": (-(2**63), 2**63 - 1),
}
_WRAPPED = re.compile(r"(Option|Vec|BTreeSet|HashSet)<(.+)>")


def check_typed(rust_type: str, value: object, what: str) -> None:
    """Checks ``value`` against ``rust_type``, a Rust type as the Rust query
    declares its field (``u32``, ``i64``, ``f64``, ``bool``, ``String``,
    ``char``, ``Option<T>``, ``Vec<T>``, ``BTreeSet<T>``, ``HashSet<T>``), as
    Rust's compiler would: a ``CacheKeyError`` ``not_an_integer`` (1.5, 2.0,
    "7" for an integer), ``out_of_range`` (outside the Rust type's range) or
    ``wrong_type`` (anything else the type cannot hold). ``f32`` is refused
    when declared: Python writes a float as an f64."""
    wrapped = _WRAPPED.fullmatch(rust_type)
    if wrapped is not None:
        outer, inner = wrapped[1], wrapped[2]
        if outer == "Option":
            if value is not None:
                check_typed(inner, value, what)
            return
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise CacheKeyError("wrong_type", f"{what} is a {rust_type}: a list, tuple or set, not {type(value).__name__}", field=what)
        for i, item in enumerate(value):
            check_typed(inner, item, f"{what}[{i}]")
        return
    bounds = _INTEGERS.get(rust_type)
    if bounds is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CacheKeyError("not_an_integer", f"{what} is a {rust_type}, not {type(value).__name__} {value!r}", field=what)
        if not bounds[0] <= value <= bounds[1]:
            raise CacheKeyError(
                "out_of_range", f"{what} is a {rust_type}, from {bounds[0]} to {bounds[1]}, not {value}", field=what
            )
        return
    expected = {"f64": float, "bool": bool, "String": str, "char": str}.get(rust_type)
    if expected is None:
        raise TypeError(
            f"{what}: {rust_type!r} is not a type the port checks "
            "(an integer, f64, bool, String, char, Option<T>, Vec<T>, BTreeSet<T>, HashSet<T>)"
        )
    # An int is a float's value in Python, as in Rust's serde; not for a key:
    # Rust writes 1.0 as `1`, and so does the port, so an int is accepted.
    ok = isinstance(value, expected) or (expected is float and isinstance(value, int) and not isinstance(value, bool))
    if not ok or (rust_type == "char" and len(value) != 1):
        raise CacheKeyError("wrong_type", f"{what} is a {rust_type}, not {type(value).__name__} {value!r}", field=what)


_SCALARS = {*_INTEGERS, "f64", "bool", "String", "char"}


def check_rust_type(rust_type: object) -> str:
    """``rust_type`` if it is a Rust type ``check_typed`` checks; a
    ``TypeError`` naming it otherwise (``f32`` among them: Python writes a
    float as an f64), so a declaration is refused when it is made, not at
    its first query."""
    wrapped = _WRAPPED.fullmatch(rust_type) if isinstance(rust_type, str) else None
    if wrapped is not None:
        check_rust_type(wrapped[2])
        return rust_type
    if rust_type not in _SCALARS:
        raise TypeError(
            f"{rust_type!r} is not a type the port checks "
            "(an integer, f64, bool, String, char, Option<T>, Vec<T>, BTreeSet<T>, HashSet<T>)"
        )
    return rust_type


def check_declared(
    tenant: object, criteria: object, tenant_type: object = None, criterion_types: Mapping[str, str] | None = None
) -> None:
    """Checks a query's tenant and criteria against their declared Rust
    types: ``tenant_type`` (one type, or a list for a compound tenant) and
    ``criterion_types`` (``{name: type}``, every criterion the query gives
    declared; an undeclared one is ``unknown_criterion``). Either may be
    ``None``: not checked."""
    if tenant_type is not None and tenant is not GLOBAL:
        types = list(tenant_type) if isinstance(tenant_type, (list, tuple)) else [tenant_type]
        values = tenant if isinstance(tenant, (list, tuple)) else [tenant]
        for i, value in enumerate(values):
            check_typed(types[min(i, len(types) - 1)], value, "tenant" if i == 0 else f"tenant part {i + 1}")
    if criterion_types is not None:
        entries = criteria.items() if isinstance(criteria, Mapping) else criteria
        for name, value in entries:
            if name not in criterion_types:
                raise CacheKeyError(
                    "unknown_criterion",
                    f"criterion `{name}` is not declared (criterion_types name the Rust query's criteria, "
                    "after rename_all and rename)",
                    name=name,
                )
            check_typed(criterion_types[name], value, f"criterion `{name}`")


def _empty_tenant(index: int) -> CacheKeyError:
    field = "tenant" if index == 0 else f"tenant part {index + 1}"
    return CacheKeyError(
        "empty_tenant",
        f"tenant `{field}` is empty: an empty tenant would share one cache scope among all tenants",
        field=field,
    )


def _check_integer(value: object, maximum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ValueError(f"{what} is an integer from 0 to {maximum}, not {value!r}")
    return value


_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def build_key(
    namespace: str,
    operation: str,
    *,
    tenant: object = None,
    criteria: Mapping[str, object] | Iterable[tuple[str, object]] = (),
    schema: int = 1,
    generation: int = 1,
    hash_tag: bool = False,
    max_len: int | None = None,
    readable: bool = False,
) -> str:
    """Builds a key of format 2.

    - ``tenant``: a str or int; a list or tuple of them for a compound tenant
      (in a fixed order); or ``GLOBAL`` for data that is the same for every
      tenant. Left out, it is a ``missing_tenant`` error.
    - ``criteria``: a mapping or ``(name, value)`` pairs; values as ``canonical``
      takes them (``None`` and empty values are dropped).
    - ``hash_tag``: write the tenant segment as a Redis Cluster hash tag, ``t{...}``.
    - ``max_len``: refuse keys longer than this many bytes (``too_long``).
    - ``readable``: the readable key instead (the Rust ``write_readable_key``):
      criteria never summarized, ``max_len`` not checked. Not a cache key: its
      SHA-256 is what a Redis entry's envelope holds (WIRE-FORMAT.md).

    Mistakes raise ``CacheKeyError``, the first one in the order the parts
    are given (tenant values, then criteria), then an empty namespace or
    operation, a missing tenant, a key too long.
    """
    # Checked in build_key's own order: names, schema, generation, then the rest.
    if not isinstance(namespace, str) or not isinstance(operation, str):
        raise TypeError("namespace and operation are str")
    _check_integer(schema, _U32_MAX, "schema")
    _check_integer(generation, _U64_MAX, "generation")
    template = KeyTemplate(
        namespace, operation, tenant=tenant, criteria=criteria, schema=schema, hash_tag=hash_tag, max_len=max_len
    )
    return template._readable(generation) if readable else template._key(generation)


class KeyTemplate:
    """One query's keys at every generation: its parts checked and written
    once (as ``build_key`` checks and writes them), the generation put
    between them. ``key_at(g)`` and ``readable_key_at(g)`` are
    ``build_key(..., generation=g)`` and the same with ``readable=True``,
    character for character."""

    __slots__ = ("_before", "_after", "_readable_after", "_max_len")

    def __init__(
        self,
        namespace: str,
        operation: str,
        *,
        tenant: object = None,
        criteria: Mapping[str, object] | Iterable[tuple[str, object]] = (),
        schema: int = 1,
        hash_tag: bool = False,
        max_len: int | None = None,
    ) -> None:
        if not isinstance(namespace, str) or not isinstance(operation, str):
            raise TypeError("namespace and operation are str")
        _check_integer(schema, _U32_MAX, "schema")
        if tenant is GLOBAL:
            parts: list[str] | None = []
        elif tenant is None:
            parts = None
        else:
            values = tenant if isinstance(tenant, (list, tuple)) else [tenant]
            parts = [_tenant_text(value) for value in values]
            if "" in parts:
                raise _empty_tenant(parts.index(""))

        entries = criteria.items() if isinstance(criteria, Mapping) else criteria
        names: set[str] = set()
        pairs: list[tuple[str, str]] = []
        for position, (name, value) in enumerate(entries):
            if not isinstance(name, str):
                raise TypeError(f"criterion #{position}'s name is a str, not {type(name).__name__}")
            if name == "":
                raise CacheKeyError(
                    "empty_criterion_name", f"criterion #{position} has an empty name", position=position
                )
            # A name given twice is an error even when one of its values is dropped.
            if name in names:
                raise CacheKeyError(
                    "duplicate_criterion",
                    f"criterion `{name}` is given more than once: each name may appear once in a key",
                    name=name,
                )
            names.add(name)
            text = canonical(value)
            if text:
                pairs.append((name, text))

        if namespace == "":
            raise CacheKeyError("empty_namespace", "the namespace is empty: name the application the key belongs to")
        if operation == "":
            raise CacheKeyError("empty_operation", "the operation is empty: name the query the key caches")
        if parts is None or (not parts and tenant is not GLOBAL):
            raise CacheKeyError(
                "missing_tenant",
                "no tenant given: pass the authorization scope as `tenant`, "
                "or GLOBAL for data that is the same for every tenant",
            )

        segment = ",".join(escape(part) for part in parts)
        if hash_tag:
            segment = "{" + segment + "}"
        self._before = f"{escape(namespace)}:s{schema}:g"
        after = f":t{segment}:{escape(operation)}"
        pairs.sort(key=lambda pair: _utf8(pair[0]))
        tail = "&".join(f"{escape(name)}={escape(text)}" for name, text in pairs)
        self._readable_after = after + ":" + tail if tail else after
        # The tail is ASCII: its length in characters is its length in bytes.
        if len(tail) > MAX_PLAIN_CRITERIA:
            digest = hashlib.sha256(tail.encode("ascii")).hexdigest()
            self._after = after + ":c_" + digest[: SUMMARY_DIGITS[FORMAT_VERSION]]
        else:
            self._after = self._readable_after
        self._max_len = max_len

    def key_at(self, generation: int) -> str:
        """The key at ``generation`` (a u64); a ``CacheKeyError`` ``too_long`` past ``max_len``."""
        _check_integer(generation, _U64_MAX, "generation")
        return self._key(generation)

    def readable_key_at(self, generation: int) -> str:
        """The readable key at ``generation``: criteria never summarized, ``max_len`` not checked."""
        _check_integer(generation, _U64_MAX, "generation")
        return self._readable(generation)

    def _key(self, generation: int) -> str:
        key = f"{self._before}{generation}{self._after}"
        if self._max_len is not None and len(key) > self._max_len:
            raise CacheKeyError(
                "too_long",
                f"the key would be {len(key)} bytes long, over its maximum of {self._max_len}: keys are never truncated",
                len=len(key),
                max=self._max_len,
            )
        return key

    def _readable(self, generation: int) -> str:
        return f"{self._before}{generation}{self._readable_after}"


def tenant_segment(tenant: object) -> str:
    """The tenant segment as a key writes it, without a hash tag's braces:
    each value escaped, the parts joined with ``,``; ``""`` for ``GLOBAL``.
    Generation counters are named by it (WIRE-FORMAT.md). ``tenant`` as
    ``build_key`` takes it; an empty value is ``empty_tenant``, ``None``
    ``missing_tenant``."""
    if tenant is GLOBAL:
        return ""
    if tenant is None:
        raise CacheKeyError("missing_tenant", "no tenant given: pass the authorization scope as `tenant`, or GLOBAL")
    values = tenant if isinstance(tenant, (list, tuple)) else [tenant]
    parts = [_tenant_text(value) for value in values]
    if not parts:
        raise CacheKeyError("missing_tenant", "a tenant needs at least one value")
    if "" in parts:
        raise _empty_tenant(parts.index(""))
    return ",".join(escape(part) for part in parts)


@dataclasses.dataclass(frozen=True)
class DecodedKey:
    """The parts of a key, read back by ``decode``.

    ``tenant`` holds the tenant values (none for a global key), ``criteria``
    the ``(name, canonical value)`` pairs (none when summarized), ``digest``
    the summary's hex digits or ``None``. ``version`` is 1 for a 16-digit
    summary and 2 otherwise: a key whose tail is not summarized is the same
    text in both.
    """

    version: int
    namespace: str
    schema: int
    generation: int
    tenant: tuple[str, ...]
    hash_tag: bool
    operation: str
    criteria: tuple[tuple[str, str], ...]
    digest: str | None

    @property
    def is_global(self) -> bool:
        """Whether the key is global (its tenant segment is empty)."""
        return not self.tenant


# Decoding works on the key's UTF-8 bytes, so that offsets are the Rust
# decoder's byte offsets.

_HEX = {c: int(chr(c), 16) for c in b"0123456789abcdefABCDEF"}
_LOWER_HEX = frozenset(b"0123456789abcdef")


def _snippet(data: bytes) -> str:
    """Text for an error message: at most 40 characters."""
    text = data.decode("utf-8", "replace")
    return (text[:40] + "…" if len(text) > 40 else text).encode("unicode_escape").decode("ascii")


def _unescape_bytes(key: bytes, start: int, end: int, what: str) -> bytes:
    """Checks that bytes ``start:end`` of ``key`` are escaped as the format
    writes them and returns them unescaped."""
    out = bytearray()
    i = start
    while i < end:
        byte = key[i]
        if byte == 0x25:  # %
            if end - i < 3:
                raise DecodeError(
                    "truncated_escape", i, f"an escape in the {what} is cut short: `%` takes two hex digits"
                )
            high, low = key[i + 1], key[i + 2]
            shown = _snippet(key[i : i + 3])
            if high not in _HEX or low not in _HEX:
                raise DecodeError("invalid_escape", i, f"escape `{shown}` in the {what} is not `%` and two hex digits")
            if high >= 0x61 or low >= 0x61:
                raise DecodeError(
                    "lowercase_escape",
                    i,
                    f"escape `{shown}` in the {what} uses lowercase hex: the format writes `{shown.upper()}`",
                )
            decoded = _HEX[high] << 4 | _HEX[low]
            if decoded in _UNRESERVED:
                raise DecodeError(
                    "needless_escape",
                    i,
                    f"escape `{shown}` in the {what} stands for `{chr(decoded)}`, which the format writes as itself",
                )
            out.append(decoded)
            i += 3
        elif byte in _UNRESERVED:
            out.append(byte)
            i += 1
        else:
            shown = repr(chr(byte)) if byte < 0x80 else f"byte {byte:#04x}"
            raise DecodeError("unescaped_byte", i, f"{shown} in the {what} must be escaped")
    try:
        bytes(out).decode("utf-8")
    except UnicodeDecodeError as error:
        # The offset of the escape (or byte) that holds the first byte that is not UTF-8.
        offset, decoded_count = start, 0
        while offset < end and decoded_count < error.start:
            offset += 3 if key[offset] == 0x25 else 1
            decoded_count += 1
        raise DecodeError("invalid_utf8", offset, f"the {what}'s escapes do not decode to UTF-8 text") from None
    return bytes(out)


def _unescape_text(key: bytes, start: int, end: int, what: str) -> str:
    return _unescape_bytes(key, start, end, what).decode("utf-8")


def _decode_number(key: bytes, start: int, end: int, marker: int, maximum: int, what: str) -> int:
    """The schema or generation: ``marker`` and a decimal number without
    leading zeros, at most ``maximum``."""
    text = key[start:end]
    if not text.startswith(bytes([marker])):
        raise DecodeError(
            "missing_marker",
            start,
            f"expected the {what} segment `{chr(marker)}<number>`, found `{_snippet(text)}`",
        )
    digits = text[1:]
    if not digits or not all(0x30 <= b <= 0x39 for b in digits):
        raise DecodeError("invalid_number", start, f"{what} `{_snippet(text)}` is not a decimal number")
    if len(digits) > 1 and digits[0] == 0x30:
        raise DecodeError("invalid_number", start, f"{what} `{_snippet(text)}` has a leading zero")
    value = int(digits)
    if value > maximum:
        raise DecodeError(
            "number_overflow", start, f"{what} `{_snippet(text)}` is too large (the maximum is {maximum})"
        )
    return value


def decode(text: str) -> DecodedKey:
    """Reads a key of format 1 or 2 back into its parts.

    The decoder is strict, as the Rust one: it accepts exactly the keys the
    format writes, and raises ``DecodeError`` otherwise.
    """
    key = text.encode("utf-8", "surrogatepass")
    at = 0

    def next_segment(what: str) -> tuple[int, int]:
        """The next ``:``-separated segment as (start, end)."""
        nonlocal at
        if at > len(key):
            raise DecodeError("missing_segment", len(key), f"the key ends before its {what} segment")
        start = at
        colon = key.find(b":", start)
        end = len(key) if colon < 0 else colon
        at = end + 1
        return start, end

    start, end = next_segment("namespace")
    if start == end:
        raise DecodeError("empty_namespace", start, "the key is empty" if not key else "the namespace is empty")
    namespace = _unescape_text(key, start, end, "namespace")
    start, end = next_segment("schema (`s<number>`)")
    schema = _decode_number(key, start, end, ord("s"), _U32_MAX, "schema")
    start, end = next_segment("generation (`g<number>`)")
    generation = _decode_number(key, start, end, ord("g"), _U64_MAX, "generation")
    start, end = next_segment("tenant (`t<tenant>`)")
    tenant, hash_tag = _decode_tenant(key, start, end)
    start, end = next_segment("operation")
    if start == end:
        raise DecodeError("empty_operation", start, "the operation is empty")
    operation = _unescape_text(key, start, end, "operation")

    pairs: tuple[tuple[str, str], ...] = ()
    digest = None
    version = FORMAT_VERSION
    if at <= len(key):
        start, end = next_segment("criteria")
        pairs, digest, version = _decode_criteria(key, start, end)
    if at <= len(key):
        raise DecodeError(
            "trailing_segment",
            at - 1,
            "unexpected `:` after the criteria (`:` is always escaped inside a segment)",
        )
    return DecodedKey(version, namespace, schema, generation, tenant, hash_tag, operation, pairs, digest)


def _decode_tenant(key: bytes, start: int, end: int) -> tuple[tuple[str, ...], bool]:
    """The tenant segment: ``t``, the escaped values joined with ``,``, maybe inside ``{...}``."""
    if start == end or key[start] != ord("t"):
        raise DecodeError(
            "missing_marker",
            start,
            f"expected the tenant segment `t<tenant>`, found `{_snippet(key[start:end])}`",
        )
    body_start, body_end, hash_tag = start + 1, end, False
    if body_start < end and key[body_start] == ord("{"):
        if end - body_start < 2 or key[end - 1] != ord("}"):
            raise DecodeError(
                "unclosed_hash_tag",
                start + 1,
                "the tenant's hash tag `{` is not closed by `}` at the end of the segment",
            )
        body_start, body_end, hash_tag = body_start + 1, body_end - 1, True
    if body_start == body_end:
        return (), hash_tag
    parts = []
    part_start = body_start
    for index, part in enumerate(key[body_start:body_end].split(b",")):
        if not part:
            raise DecodeError("empty_tenant_part", part_start, f"tenant value #{index + 1} is empty")
        parts.append(_unescape_text(key, part_start, part_start + len(part), "tenant"))
        part_start += len(part) + 1
    return tuple(parts), hash_tag


def _decode_criteria(
    key: bytes, start: int, end: int
) -> tuple[tuple[tuple[str, str], ...], str | None, int]:
    """The criteria segment: sorted ``name=value`` pairs joined with ``&``, or
    ``c_`` and a summary. Returns the pairs, the digest and the format version."""
    text = key[start:end]
    if not text:
        raise DecodeError("empty_criteria", start, "the key ends with `:` but has no criteria")
    # Plain criteria always hold a `=`; a summary never does.
    if text.startswith(b"c_") and b"=" not in text:
        digest = text[2:]
        versions = [v for v, digits in SUMMARY_DIGITS.items() if digits == len(digest)]
        if not versions or not all(b in _LOWER_HEX for b in digest):
            raise DecodeError(
                "invalid_digest",
                start,
                f"summary `{_snippet(text)}` is not `c_` and 16 (format 1) or 32 (format 2) lowercase hex digits",
            )
        return (), digest.decode("ascii"), versions[0]
    if len(text) > MAX_PLAIN_CRITERIA:
        raise DecodeError(
            "criteria_too_long",
            start,
            f"the criteria are {len(text)} bytes long: over {MAX_PLAIN_CRITERIA} bytes "
            "they are written `c_` and a digest",
        )
    pairs = []
    previous = None
    pair_start = start
    for pair in text.split(b"&"):
        name, eq, value = pair.partition(b"=")
        if not eq:
            message = (
                "empty criterion: `&` must separate two `name=value` pairs"
                if not pair
                else f"criterion `{_snippet(pair)}` is not `name=value`"
            )
            raise DecodeError("invalid_criterion", pair_start, message)
        if not name:
            raise DecodeError("empty_criterion_name", pair_start, "a criterion's name is empty")
        name_bytes = _unescape_bytes(key, pair_start, pair_start + len(name), "criterion name")
        value_start = pair_start + len(name) + 1
        if not value:
            raise DecodeError(
                "empty_criterion_value",
                value_start,
                f"criterion `{_snippet(name)}` has an empty value (empty values are dropped from keys)",
            )
        value_text = _unescape_text(key, value_start, value_start + len(value), "criterion value")
        if previous is not None:
            if previous == name_bytes:
                raise DecodeError(
                    "duplicate_criterion", pair_start, f"criterion `{_snippet(name)}` appears more than once"
                )
            if previous > name_bytes:
                raise DecodeError(
                    "unsorted_criteria",
                    pair_start,
                    f"criterion `{_snippet(name)}` comes after `{_snippet(previous)}`: criteria are sorted by name",
                )
        pairs.append((name_bytes.decode("utf-8"), value_text))
        previous = name_bytes
        pair_start += len(pair) + 1
    return tuple(pairs), None, FORMAT_VERSION


_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def _glob_escape(text: str) -> str:
    """``text`` with the bytes special to Redis globs (``* ? [ ] \\``) preceded by a backslash."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


@dataclasses.dataclass(frozen=True)
class KeyPattern:
    """A scope of keys (a namespace, narrowed to a tenant or the global keys,
    a schema, a generation, an operation) for listing or deleting them in
    Redis or memcached, as the Rust ``KeyPattern``. Make one with the class
    methods.

    ``glob()`` is a glob for ``SCAN ... MATCH``, with every value escaped as
    in a key and then glob-escaped, so tenant ``acme*`` does not match
    ``acme-corp``. A glob is only a first filter: its ``*`` for a segment that
    is not fixed also matches ``:`` (the glob for tenant ``acme*`` matches
    ``library:s1:g4:tfoo:tacme*:page=1``, a key of tenant ``foo``), so pass
    what ``SCAN`` returns through ``matches(key)`` before deleting it.
    """

    namespace: str
    schema: int | None = None
    generation: int | None = None
    tenant: tuple[str, ...] | None = None
    """None, or the tenant values (none for the global keys)."""
    hash_tag: bool = False
    operation: str | None = None

    @classmethod
    def for_namespace(cls, namespace: str) -> KeyPattern:
        """Every key of ``namespace``."""
        return cls(namespace)

    @classmethod
    def for_operation(cls, namespace: str, operation: str) -> KeyPattern:
        """Every key of ``operation`` in ``namespace``."""
        return cls(namespace, operation=operation)

    @classmethod
    def for_tenant(cls, namespace: str, tenant: str | int) -> KeyPattern:
        """Every key of one tenant (a str or int) in ``namespace``."""
        return cls.for_compound_tenant(namespace, [tenant])

    @classmethod
    def for_compound_tenant(cls, namespace: str, parts: Iterable[str | int]) -> KeyPattern:
        """Every key of one compound tenant (its values in the order keys write them) in ``namespace``."""
        texts = tuple(_tenant_text(part) for part in parts)
        if "" in texts:
            raise _empty_tenant(texts.index(""))
        if not texts:
            raise CacheKeyError("missing_tenant", "a tenant pattern needs at least one tenant value")
        return cls(namespace, tenant=texts)

    @classmethod
    def for_global(cls, namespace: str) -> KeyPattern:
        """Every global key of ``namespace``."""
        return cls(namespace, tenant=())

    def with_schema(self, schema: int) -> KeyPattern:
        return dataclasses.replace(self, schema=_check_integer(schema, _U32_MAX, "schema"))

    def with_generation(self, generation: int) -> KeyPattern:
        return dataclasses.replace(self, generation=_check_integer(generation, _U64_MAX, "generation"))

    def with_operation(self, operation: str) -> KeyPattern:
        return dataclasses.replace(self, operation=operation)

    def with_hash_tag(self, hash_tag: bool) -> KeyPattern:
        """Whether the pattern's tenant is written as a hash tag, ``t{...}`` (plain by default)."""
        return dataclasses.replace(self, hash_tag=bool(hash_tag))

    def glob(self) -> str:
        """A glob for Redis ``SCAN cursor MATCH glob`` or ``KEYS glob``: a first filter, see the class."""
        out = _glob_escape(escape(self.namespace)) + ":"
        fixed = [self.schema is not None, self.generation is not None, self.tenant is not None, self.operation is not None]
        if not any(fixed):
            return out + "*"
        last_fixed = max(i for i, is_fixed in enumerate(fixed) if is_fixed)
        # The schema, generation and tenant segments up to the last fixed one, `*` for the others.
        count = min(last_fixed, 2) + 1
        if count >= 1:
            out += f"s{'*' if self.schema is None else self.schema}:"
        if count >= 2:
            out += f"g{'*' if self.generation is None else self.generation}:"
        if count >= 3:
            if self.tenant is None:
                out += "t*:"
            else:
                segment = _glob_escape(",".join(escape(part) for part in self.tenant))
                out += f"t{{{segment}}}:" if self.hash_tag else f"t{segment}:"
        # After the operation come nothing or `:` and the criteria.
        return out + ("" if self.operation is None else _glob_escape(escape(self.operation))) + "*"

    def matches(self, key: str) -> bool:
        """Whether ``key`` is a valid key (format 1 or 2) in the scope: the exact test."""
        try:
            decoded = decode(key)
        except DecodeError:
            return False
        return (
            decoded.namespace == self.namespace
            and (self.schema is None or decoded.schema == self.schema)
            and (self.generation is None or decoded.generation == self.generation)
            and (self.operation is None or decoded.operation == self.operation)
            and (self.tenant is None or (decoded.tenant == self.tenant and decoded.hash_tag == self.hash_tag))
        )


# The JSON form of queries shared by the conformance vectors and tests/ports.rs.


def value_from_json(value: Mapping[str, object]) -> object:
    """A criterion value from its JSON form: ``{"type": "str" | "int" |
    "bool" | "f64", "value": ...}`` (ints and floats as decimal strings),
    ``{"type": "none"}`` or ``{"type": "list" | "set", "items": [...]}``."""
    kind = value["type"]
    if kind in ("str", "bool"):
        return value["value"]
    if kind == "int":
        return int(value["value"])
    if kind == "f64":
        return float(value["value"])
    if kind == "none":
        return None
    if kind == "list":
        return [value_from_json(item) for item in value["items"]]
    if kind == "set":
        # A list of canonical strings stands for the set: Python's own set
        # would merge True with 1, which the format keeps apart.
        return {canonical(value_from_json(item)) for item in value["items"]}
    raise TypeError(f"unknown value type {kind}")


def _tenant_from_json(part: object) -> object:
    return part if isinstance(part, str) else value_from_json(part)


def options_from_json(query: Mapping[str, object]) -> dict[str, object]:
    """``build_key``'s arguments for a query: ``tenant`` is a value, a list of
    parts (compound) or null (global); ``generation`` a number or a decimal
    string; ``hash_tag`` and ``max_len`` are optional. A query's
    ``query_tags`` (``[{"criterion", "name", "global"}]``, the wire vectors'
    and the cache drivers') are its type's, not its key's: not among them,
    they go to ``cache_redis.QueryType(query_tags=...)`` as they are."""
    tenant = query["tenant"]
    if tenant is None:
        tenant = GLOBAL
    elif isinstance(tenant, list):
        tenant = [_tenant_from_json(part) for part in tenant]
    else:
        tenant = _tenant_from_json(tenant)
    return {
        "namespace": query["namespace"],
        "operation": query["operation"],
        "schema": query["schema"],
        "generation": int(query["generation"]),
        "tenant": tenant,
        "criteria": [(name, value_from_json(value)) for name, value in query["criteria"]],
        "hash_tag": query.get("hash_tag", False),
        "max_len": query.get("max_len"),
    }


def _answer(request: Mapping[str, object]) -> dict[str, object]:
    try:
        if "decode" in request:
            key = decode(request["decode"])
            return {
                "decoded": {
                    "version": key.version,
                    "namespace": key.namespace,
                    "schema": key.schema,
                    "generation": str(key.generation),
                    "tenant": None if key.is_global else list(key.tenant),
                    "hash_tag": key.hash_tag,
                    "operation": key.operation,
                    "criteria": [list(pair) for pair in key.criteria],
                    "digest": key.digest,
                }
            }
        return {"key": build_key(**options_from_json(request))}
    except DecodeError as error:
        return {"error": error.kind, "offset": error.offset}
    except CacheKeyError as error:
        return {"error": error.kind}
    except Exception as error:  # noqa: BLE001 - reported on its line, see _batch
        return {"error": f"{type(error).__name__}: {error}"}


def _batch() -> None:
    """Batch mode for tests/ports.rs: one JSON object per line on stdin, one
    JSON answer per line on stdout, in order.

    - a query (see ``options_from_json``) gives ``{"key": ...}`` or ``{"error": kind}``;
    - ``{"decode": text}`` gives ``{"decoded": {...}}`` or ``{"error": kind, "offset": n}``.

    Anything else that goes wrong is reported as ``{"error": "<exception>"}``
    on its line, so one bad line cannot shift the answers after it.
    """
    out = sys.stdout
    for line in sys.stdin:
        if line.strip():
            out.write(json.dumps(_answer(json.loads(line))) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--batch"]:
        sys.exit("usage: python3 cache_key.py --batch  (JSON lines in, JSON lines out)")
    _batch()
