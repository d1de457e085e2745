"""The Python port against the shared data: python3 -m unittest discover -s ports/python"""

import json
import math
import unittest
from pathlib import Path

from cache_key import (
    GLOBAL,
    CacheKeyError,
    DecodeError,
    KeyPattern,
    KeyTemplate,
    build_key,
    canonical,
    check_declared,
    check_rust_type,
    decode,
    js_number,
    options_from_json,
    value_from_json,
)

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


def data(name):
    return json.loads((DATA / name).read_text(encoding="utf-8"))


VECTORS = data("vectors.json")
FORMAT1 = data("vectors-format1.json")


def outcome(options):
    """What building a case gives: the key, or ``error:<kind>``."""
    try:
        return build_key(**options)
    except CacheKeyError as error:
        return f"error:{error.kind}"


def outcome_of(call):
    """What a call building a key gives: the key, or ``error:<kind>``."""
    try:
        return call()
    except CacheKeyError as error:
        return f"error:{error.kind}"


def kind_of(call):
    try:
        call()
    except (CacheKeyError, DecodeError) as error:
        return error.kind
    return "no error"


def utf8(text):
    return text.encode("utf-8")


class Vectors(unittest.TestCase):
    def test_a_key_template_writes_build_keys_keys_and_readable_keys_at_every_generation(self):
        generations = [0, 1, 7, 656412895717296, 2**64 - 1]
        built = 0
        for vector in VECTORS:
            options = options_from_json(vector)
            options.pop("generation", None)
            options.pop("readable", None)
            try:
                template = KeyTemplate(**options)
            except CacheKeyError as error:
                self.assertEqual(outcome(options), f"error:{error.kind}")
                continue
            for generation in generations:
                self.assertEqual(outcome_of(lambda: template.key_at(generation)), outcome({**options, "generation": generation}))
                self.assertEqual(template.readable_key_at(generation), build_key(**options, generation=generation, readable=True))
            built += 1
        self.assertGreater(built, 300)
        # max_len is checked on the key at each generation, as build_key checks it; never on the readable key.
        short = {"tenant": 1, "criteria": [("q", "x" * 60)], "max_len": 49}
        template = KeyTemplate("ns", "op", **short)
        for generation in (0, 9, 10, 2**64 - 1):
            self.assertEqual(outcome_of(lambda: template.key_at(generation)), outcome({"namespace": "ns", "operation": "op", **short, "generation": generation}))
            self.assertEqual(template.readable_key_at(generation), build_key("ns", "op", **short, generation=generation, readable=True))
        self.assertEqual(outcome_of(lambda: template.key_at(10)), "error:too_long")
        with self.assertRaises(ValueError):
            template.key_at(-1)

    def test_every_conformance_vector_gives_its_key_or_error(self):
        self.assertEqual(len(VECTORS), 400)
        failures = []
        for i, vector in enumerate(VECTORS):
            expected = vector.get("key") or f"error:{vector['error']}"
            got = outcome(options_from_json(vector))
            if got != expected:
                failures.append(f"case {i}: {got}, expected {expected}")
        self.assertEqual(failures, [])

    def test_every_vector_key_decodes_to_the_parts_it_was_built_from(self):
        keys = 0
        for vector in VECTORS:
            if "key" not in vector:
                continue
            keys += 1
            key = decode(vector["key"])
            options = options_from_json(vector)
            self.assertEqual(key.namespace, vector["namespace"])
            self.assertEqual(key.schema, vector["schema"])
            self.assertEqual(key.generation, int(vector["generation"]))
            self.assertEqual(key.is_global, vector["tenant"] is None)
            self.assertEqual(key.tenant, () if vector["tenant"] is None else (vector["tenant"],))
            self.assertEqual(key.operation, vector["operation"])
            self.assertEqual(key.version, 2)
            if ":c_" in vector["key"]:
                self.assertEqual(len(key.digest), 32)
            else:
                self.assertIsNone(key.digest)
                pairs = [(name, canonical(value)) for name, value in options["criteria"]]
                expected = sorted(((n, t) for n, t in pairs if t), key=lambda pair: utf8(pair[0]))
                self.assertEqual(list(key.criteria), expected)
        self.assertEqual(keys, 380)

    def test_every_format1_key_decodes_and_a_summarized_one_as_version_1(self):
        self.assertEqual(len(FORMAT1), len(VECTORS))
        summarized = 0
        for i, (old, new) in enumerate(zip(FORMAT1, VECTORS)):
            old, new = dict(old), dict(new)
            old_key, new_key = old.pop("key", None), new.pop("key", None)
            self.assertEqual(old, new, f"case {i} has the same query in both files")
            if old_key is None:
                continue
            key = decode(old_key)
            if ":c_" in old_key:
                summarized += 1
                self.assertEqual(key.version, 1, old_key)
                self.assertEqual(len(key.digest), 16)
                # The same query's format-2 summary starts with the same 16 digits.
                self.assertTrue(new_key.startswith(old_key), f"{new_key} extends {old_key}")
            else:
                # Not summarized: the same text in both versions.
                self.assertEqual(old_key, new_key)
        self.assertEqual(summarized, 190)


class Decoding(unittest.TestCase):
    def test_a_summary_has_16_or_32_lowercase_hex_digits_nothing_else(self):
        hexdigits = "0123456789abcdef" * 3
        for digits in range(41):
            key = f"ns:s1:g1:tx:op:c_{hexdigits[:digits]}"
            if digits in (16, 32):
                self.assertEqual(decode(key).version, 1 if digits == 16 else 2)
            else:
                self.assertEqual(kind_of(lambda: decode(key)), "invalid_digest", key)
        self.assertEqual(kind_of(lambda: decode("ns:s1:g1:tx:op:c_" + "A" * 32)), "invalid_digest")

    def test_malformed_keys_are_refused_with_the_rust_decoders_kind_and_offset(self):
        cases = [
            ("", "empty_namespace", 0),
            ("ns", "missing_segment", 2),
            ("ns:s1:g1:tx", "missing_segment", 11),
            ("ns:sx:g1:tx:op", "invalid_number", 3),
            ("ns:s01:g1:tx:op", "invalid_number", 3),
            ("ns:s4294967296:g1:tx:op", "number_overflow", 3),
            ("ns:s1:g18446744073709551616:tx:op", "number_overflow", 6),
            ("ns:s1:g1:x:op", "missing_marker", 9),
            ("ns:s1:g1:tx%4:op", "truncated_escape", 11),
            ("ns:s1:g1:tx%G1:op", "invalid_escape", 11),
            ("ns:s1:g1:tx%3a:op", "lowercase_escape", 11),
            ("ns:s1:g1:tx%41:op", "needless_escape", 11),
            ("ns:s1:g1:tx/y:op", "unescaped_byte", 11),
            ("ns:s1:g1:tx:op:a=ç", "unescaped_byte", 17),
            ("ns:s1:g1:t{x:op", "unclosed_hash_tag", 10),
            ("ns:s1:g1:tx,,y:op", "empty_tenant_part", 12),
            ("ns:s1:g1:tx%ED%A0%80:op", "invalid_utf8", 11),
            ("ns:s1:g1:tx:op:a=1%C3", "invalid_utf8", 18),
            ("ns:s1:g1:tx:op:", "empty_criteria", 15),
            ("ns:s1:g1:tx:op:a=1&&b=2", "invalid_criterion", 19),
            ("ns:s1:g1:tx:op:=1", "empty_criterion_name", 15),
            ("ns:s1:g1:tx:op:a=1&b=", "empty_criterion_value", 21),
            ("ns:s1:g1:tx:op:b=1&a=2", "unsorted_criteria", 19),
            ("ns:s1:g1:tx:op:%C3%A9=1&z=2", "unsorted_criteria", 24),
            ("ns:s1:g1:tx:op:a=1&a=2", "duplicate_criterion", 19),
            ("ns:s1:g1:tx:op:q=" + "x" * 47, "criteria_too_long", 15),
            ("ns:s1:g1:tx:op:a=1:b=2", "trailing_segment", 18),
        ]
        for key, kind, offset in cases:
            with self.assertRaises(DecodeError, msg=key) as caught:
                decode(key)
            self.assertEqual((caught.exception.kind, caught.exception.offset), (kind, offset), key)
        # 48 bytes of criteria are the most a plain tail has.
        self.assertEqual(len(decode("ns:s1:g1:tx:op:q=" + "x" * 46).criteria[0][1]), 46)


class Building(unittest.TestCase):
    def error(self, **options):
        arguments = {"namespace": "ns", "operation": "op", "tenant": "t", **options}
        with self.assertRaises(CacheKeyError) as caught:
            build_key(**arguments)
        return caught.exception

    def test_mistakes_are_errors_with_the_rust_kinds_never_keys(self):
        error = self.error(tenant="")
        self.assertEqual((error.kind, error.field), ("empty_tenant", "tenant"))
        self.assertEqual(self.error(tenant=["acme", ""]).field, "tenant part 2")
        self.assertEqual(self.error(tenant=None).kind, "missing_tenant")
        self.assertEqual(self.error(tenant=[]).kind, "missing_tenant")
        self.assertEqual(self.error(namespace="").kind, "empty_namespace")
        self.assertEqual(self.error(operation="").kind, "empty_operation")
        self.assertEqual(self.error(criteria=[("a", 1), ("", 2)]).position, 1)
        # A duplicate name counts even when a value is dropped.
        self.assertEqual(self.error(criteria=[("a", None), ("a", "x")]).name, "a")
        error = self.error(criteria={"q": "x" * 40}, max_len=40)
        self.assertEqual((error.kind, error.len, error.max), ("too_long", len("ns:s1:g1:tt:op:q=") + 40, 40))
        # The first mistake in the order the parts come wins.
        self.assertEqual(self.error(namespace="", tenant="", criteria=[("a", 1), ("a", 2)]).kind, "empty_tenant")
        self.assertEqual(self.error(namespace="", criteria=[("a", 1), ("a", 2)]).kind, "duplicate_criterion")

    def test_global_compound_hash_tag_integers_dropped_criteria(self):
        def key(**options):
            return build_key("crm", "list", **options)

        self.assertEqual(key(tenant=GLOBAL), "crm:s1:g1:t:list")
        self.assertEqual(key(tenant=GLOBAL, hash_tag=True), "crm:s1:g1:t{}:list")
        self.assertEqual(key(tenant=("acme", 42), hash_tag=True), "crm:s1:g1:t{acme,42}:list")
        self.assertEqual(key(tenant="a,b"), "crm:s1:g1:ta%2Cb:list")
        self.assertEqual(
            key(tenant="t", generation=2**64 - 1, criteria={"n": -(2**127), "e": "", "u": None, "l": []}),
            "crm:s1:g18446744073709551615:tt:list:n=-170141183460469231731687303715884105728",
        )
        with self.assertRaises(TypeError):
            key(tenant=1.5)
        with self.assertRaises(TypeError):
            key(tenant=True)
        with self.assertRaises(ValueError):
            key(tenant="t", generation=2**64)
        with self.assertRaises(TypeError):
            key(tenant="t", criteria={"d": object()})

    def test_criteria_sort_by_utf8_bytes(self):
        key = build_key("ns", "op", tenant="t", criteria=[("😀", 2), ("｡", 1)])
        self.assertEqual(key, "ns:s1:g1:tt:op:%EF%BD%A1=1&%F0%9F%98%80=2")
        self.assertEqual(decode(key).criteria, (("｡", "1"), ("😀", "2")))

    def test_bool_is_its_own_kind_and_int_is_exact(self):
        self.assertEqual(canonical(True), "true")
        self.assertEqual(canonical([True, 1, 1.0, False, 0]), "true,1,1,false,0")
        self.assertEqual(canonical(2**64 + 1), "18446744073709551617")
        self.assertEqual(canonical(float(2**64 + 1)), "18446744073709552000")

    def test_lists_escape_their_elements_and_sets_sort_and_merge_theirs(self):
        self.assertEqual(canonical(["a,b", "c%", None, True, 1.5, 10]), "a%2Cb,c%25,,true,1.5,10")
        self.assertEqual(canonical([["a,b", "c"], "d"]), "a%252Cb%2Cc,d")
        self.assertEqual(canonical({2, 10, "2", "1", None}), ",1,10,2")
        self.assertEqual(canonical(frozenset({"😀", "｡"})), "｡,😀")
        self.assertEqual(canonical([None]), "")


class Floats(unittest.TestCase):
    """Floats as JavaScript writes them. node -p 'String(x)' gives the expected texts."""

    def test_layout(self):
        cases = {
            0.0: "0",
            -0.0: "0",
            math.nan: "NaN",
            math.inf: "Infinity",
            -math.inf: "-Infinity",
            1.5: "1.5",
            -2.5: "-2.5",
            100.0: "100",
            0.1: "0.1",
            0.1 + 0.2: "0.30000000000000004",
            1e21: "1e+21",
            1e20: "100000000000000000000",
            123456789012345680000.0: "123456789012345680000",
            1e-7: "1e-7",
            1.5e-7: "1.5e-7",
            0.000001: "0.000001",
            0.0000015: "0.0000015",
            5e-324: "5e-324",
            1.7976931348623157e308: "1.7976931348623157e+308",
            -1e300: "-1e+300",
            2.5e21: "2.5e+21",
        }
        for x, text in cases.items():
            self.assertEqual(js_number(x), text, repr(x))

    def test_exact_ties_go_to_the_even_digit(self):
        # Each value lies exactly halfway between two 17-digit decimals.
        cases = {
            "1459304523984103.25": "1459304523984103.2",
            "137516221151617.875": "137516221151617.88",
            "-129940939551771.375": "-129940939551771.38",
            "3675435369133.46875": "3675435369133.4688",
            "674887813969156.25": "674887813969156.2",
        }
        for decimal, text in cases.items():
            self.assertEqual(js_number(float(decimal)), text, decimal)

    def test_the_shared_ties_are_written_as_node_writes_them(self):
        ties = data("float-ties.json")
        self.assertEqual(len(ties), 120)
        for tie in ties:
            self.assertEqual(js_number(float(tie["value"])), tie["js"], tie["value"])

    def test_every_vector_float_reads_back(self):
        def floats(value):
            if value["type"] == "f64":
                yield value["value"]
            for item in value.get("items", []):
                yield from floats(item)

        seen = 0
        for vector in VECTORS:
            for _, value in vector["criteria"]:
                for decimal in floats(value):
                    seen += 1
                    x = float(decimal)
                    if not math.isnan(x):
                        self.assertEqual(float(js_number(x).replace("Infinity", "inf")), x, decimal)
        self.assertGreater(seen, 100)


def glob_matches(glob, text):
    """Redis's glob matching for what patterns use: ``*``, ``?`` and ``\\x``."""
    if not glob:
        return not text
    c, rest = glob[0], glob[1:]
    if c == "*":
        return any(glob_matches(rest, text[skip:]) for skip in range(len(text) + 1))
    if c == "?":
        return bool(text) and glob_matches(rest, text[1:])
    if c == "\\" and rest:
        return text[:1] == rest[0] and glob_matches(rest[1:], text[1:])
    return text[:1] == c and glob_matches(rest, text[1:])


def pattern_of(spec):
    """The pattern a case of tenant-patterns.json describes."""

    def tenant(part):
        return part if isinstance(part, str) else value_from_json(part)

    namespace = spec["namespace"]
    if "tenant" not in spec:
        pattern = KeyPattern.for_namespace(namespace)
    elif spec["tenant"] is None:
        pattern = KeyPattern.for_global(namespace)
    elif isinstance(spec["tenant"], list):
        pattern = KeyPattern.for_compound_tenant(namespace, [tenant(part) for part in spec["tenant"]])
    else:
        pattern = KeyPattern.for_tenant(namespace, tenant(spec["tenant"]))
    if "operation" in spec:
        pattern = pattern.with_operation(spec["operation"])
    if "schema" in spec:
        pattern = pattern.with_schema(spec["schema"])
    if "generation" in spec:
        pattern = pattern.with_generation(spec["generation"])
    return pattern.with_hash_tag(spec.get("hash_tag", False))


class TenantPatterns(unittest.TestCase):
    def test_globs_and_matches_that_see_through_the_globs_traps(self):
        keys = 0
        for spec in data("tenant-patterns.json")["cases"]:
            if "error" in spec:
                self.assertEqual(kind_of(lambda: pattern_of(spec)), spec["error"], spec)
                continue
            pattern = pattern_of(spec)
            self.assertEqual(pattern.glob(), spec["glob"])
            for case in spec["keys"]:
                keys += 1
                self.assertEqual(pattern.matches(case["key"]), case["matches"], f"{spec['glob']} matches {case['key']}")
                self.assertEqual(glob_matches(spec["glob"], case["key"]), case["glob_matches"], f"glob on {case['key']}")
        self.assertGreaterEqual(keys, 50)


if __name__ == "__main__":
    unittest.main()


class DeclaredTypes(unittest.TestCase):
    def test_a_type_is_checked_when_declared(self):
        for rust_type in ["u8", "i128", "usize", "f64", "String", "Option<Vec<u64>>", "BTreeSet<String>"]:
            self.assertEqual(check_rust_type(rust_type), rust_type)
        for rust_type in ["f32", "Vec<f32>", "u256", "Option<>", 42]:
            with self.assertRaises(TypeError, msg=rust_type):
                check_rust_type(rust_type)

    def test_a_query_rust_could_not_form_is_refused_with_its_reason(self):
        def kind(tenant, criteria=(), tenant_type=None, criterion_types=None):
            try:
                check_declared(tenant, criteria, tenant_type, criterion_types)
                return None
            except CacheKeyError as error:
                return error.kind

        self.assertIsNone(kind(2**64 - 1, tenant_type="u64"))
        self.assertEqual(kind(2.0**53, tenant_type="u64"), "not_an_integer")
        self.assertEqual(kind(["acme", 70000], tenant_type=["String", "u16"]), "out_of_range")
        self.assertIsNone(kind(1, {"page": None}, criterion_types={"page": "Option<u32>"}))
        self.assertEqual(kind(1, [("ids", {1, -1})], criterion_types={"ids": "BTreeSet<u64>"}), "out_of_range")
        self.assertEqual(kind(1, {"c": "ab"}, criterion_types={"c": "char"}), "wrong_type")
        self.assertIsNone(kind(1, {"c": "😀"}, criterion_types={"c": "char"}))
        self.assertEqual(kind(1, {"open": 1}, criterion_types={"open": "bool"}), "wrong_type")
