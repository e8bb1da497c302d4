"""``agentsvc_core.json_schema``: JSON Schemas from outside validated with their
patterns in RE2. It refuses what RE2 cannot compile, names the pattern, fetches
nothing, and otherwise answers what jsonschema answers (checked against jsonschema
itself on schemas whose patterns both engines read alike)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import pytest
from referencing import Registry
from referencing.exceptions import Unresolvable

from agentsvc_core import json_schema
from agentsvc_core.json_schema import PatternTooCostly, UnsupportedPattern

NESTED = "^(a+)+$"  # exponential for a backtracking engine on "aaaa…a!"
STALLING = "a" * 40 + "!"


def problems(schema: Any, instance: Any) -> list[tuple[str, str]]:
    found = json_schema.problems(json_schema.validator(schema), instance)
    return sorted(("/".join(map(str, e.path)), e.message) for e in found)


def upstream(schema: Any, instance: Any) -> list[tuple[str, str]]:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    found = cls(schema, registry=Registry()).iter_errors(instance)
    return sorted(("/".join(map(str, e.path)), e.message) for e in found)


NO_MATCH = f"{STALLING!r} does not match {NESTED!r}"


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        ({"properties": {"x": {"pattern": NESTED}}}, {"x": STALLING}, [("x", NO_MATCH)]),
        ({"items": {"pattern": NESTED}}, [STALLING, "aaaa"], [("0", NO_MATCH)]),
        ({"propertyNames": {"pattern": NESTED}}, {STALLING: 1, "aaaa": 2}, [("", NO_MATCH)]),
        (
            {"patternProperties": {NESTED: {"type": "integer"}}},
            {STALLING: "s", "aaaa": "s"},
            [("aaaa", "'s' is not of type 'integer'")],
        ),
        (
            {"patternProperties": {NESTED: {}}, "additionalProperties": False},
            {STALLING: 1, "aaaa": 2},
            [("", f"{STALLING!r} does not match any of the regexes: {NESTED!r}")],
        ),
        (
            {"patternProperties": {NESTED: {}}, "unevaluatedProperties": False},
            {STALLING: 1, "aaaa": 2},
            [("", f"Unevaluated properties are not allowed ({STALLING!r} was unexpected)")],
        ),
    ],
)
def test_a_nested_quantifier_is_matched_in_linear_time(
    schema: dict[str, Any], instance: Any, expected: list[tuple[str, str]]
) -> None:
    """Each keyword that matches a pattern. With Python's ``re`` none of these ends."""
    assert problems(schema, instance) == expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("^(?=a)", "invalid perl operator: (?="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        (r"(a)\1", r"invalid escape sequence: \1"),
        ("a{1001}", "invalid repetition size: {1001}"),
        ("[a", "missing ]: [a"),
    ],
)
def test_a_pattern_re2_cannot_compile_is_refused_by_name(pattern: str, reason: str) -> None:
    for schema, path, instance in (
        ({"properties": {"x": {"pattern": pattern}}}, ["properties", "x", "pattern"], {"x": "a"}),
        (
            {"$defs": {"d": {"items": {"pattern": pattern}}}, "$ref": "#/$defs/d"},
            ["$defs", "d", "items", "pattern"],
            ["a"],
        ),
        ({"patternProperties": {pattern: {}}}, ["patternProperties"], {"k": 1}),
    ):
        with pytest.raises(jsonschema.SchemaError) as refused:
            json_schema.check_schema(schema)
        assert list(refused.value.path) == path
        assert isinstance(refused.value.cause, UnsupportedPattern)
        assert refused.value.cause.pattern == pattern
        assert refused.value.cause.reason == reason
        assert str(refused.value.cause).startswith(f"the pattern {pattern!r} is not supported")
        # a schema stored before patterns were checked: applying it names the pattern
        with pytest.raises(UnsupportedPattern) as unsupported:
            problems(schema, instance)
        assert unsupported.value.pattern == pattern


# RE2's time is linear in the text and in the pattern's program: about a thousand
# instructions against a megabyte of "a" and "b" would take it some 15 s.
LARGE = "[ab]*a[ab]{999}c"


def test_a_match_past_the_work_budget_is_refused_before_it_runs() -> None:
    program = json_schema.compiled(LARGE).programsize
    # compiling costs 50 units an instruction, matching the text's length plus one
    longest = json_schema.WORK_BUDGET // program - 50 - 1
    schema = {"pattern": LARGE}
    text = "ab" * (longest // 2)
    assert problems(schema, text) == [("", f"{text!r} does not match {LARGE!r}")]
    with pytest.raises(PatternTooCostly) as refused:
        problems(schema, text + "ab")
    assert refused.value.pattern == LARGE
    assert str(refused.value).startswith(f"checking the pattern {LARGE!r} is more work than")


def test_the_budget_is_one_for_the_whole_check() -> None:
    """Many texts each well under the budget: the check as a whole is bounded."""
    program = json_schema.compiled(LARGE).programsize
    each = json_schema.WORK_BUDGET // program // 10
    schema = {"items": {"pattern": LARGE}}
    assert len(problems(schema, ["a" * each] * 5)) == 5
    with pytest.raises(PatternTooCostly):
        problems(schema, ["a" * each] * 11)
    # the next check has a budget of its own
    assert len(problems(schema, ["a" * each] * 5)) == 5


def test_long_texts_against_small_patterns_are_fine() -> None:
    schema = {"properties": {"x": {"pattern": "^[a-z ]*$"}}}
    assert problems(schema, {"x": "lorem ipsum " * 100_000}) == []


def test_compiling_is_bounded_in_memory_and_counted_in_the_budget() -> None:
    with pytest.raises(UnsupportedPattern, match="pattern too large"):
        json_schema.compiled(r"\p{L}{1000}")
    # each of these compiles to about 50,000 instructions: a schema of many is refused
    heavy = {"properties": {f"p{i}": {"pattern": rf"\p{{Greek}}{{800}}{i}"} for i in range(40)}}
    with pytest.raises(jsonschema.SchemaError) as refused:
        json_schema.check_schema(heavy)
    assert isinstance(refused.value.cause, PatternTooCostly)
    json_schema.check_schema({"properties": {"p": {"pattern": r"\p{Greek}{800}"}}})


def test_a_long_pattern_is_shortened_in_the_message() -> None:
    refused = UnsupportedPattern("(?=" + "a" * 500, "invalid perl operator: (?=")
    assert len(str(refused)) < 250
    assert str(refused).startswith("the pattern '(?=aaaa")


def test_patterns_re2_reads_are_accepted() -> None:
    json_schema.check_schema(
        {
            "type": "object",
            "properties": {"x": {"pattern": r"^\p{L}[\w.-]{0,1000}$"}},
            "patternProperties": {"^[a-z]+$": {}, NESTED: {}},
        }
    )
    json_schema.check_schema({"$schema": "http://json-schema.org/draft-07/schema#"})


def test_other_schema_errors_are_still_found() -> None:
    with pytest.raises(jsonschema.SchemaError, match="'nope' is not valid"):
        json_schema.check_schema({"type": "nope"})


# --- the same answers as jsonschema's, where the engines agree ----------------------

SAME = [
    ({"pattern": "^[A-Z]-[0-9]+$"}, ["A-1", "a-1", 7]),
    (
        {"type": "object", "patternProperties": {"^s_": {"type": "string"}, "^n_": {}}},
        [{"s_a": "x", "s_b": 1, "n_c": None, "other": 1}],
    ),
    (
        {
            "type": "object",
            "properties": {"id": {}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{"id": 1, "x-a": 1}, {"id": 1, "x-a": "s", "y": 1, "z": 2}, {"y": 1}],
    ),
    (
        {"properties": {"id": {}}, "additionalProperties": False},
        [{"id": 1}, {"a": 1}, {"a": 1, "b": 2}],
    ),
    (
        {"properties": {"id": {}}, "additionalProperties": {"type": "integer"}},
        [{"id": "s", "a": 1}, {"a": "s"}],
    ),
    (
        {
            "$defs": {"base": {"patternProperties": {"^b_": {}}, "properties": {"k": {}}}},
            "allOf": [{"$ref": "#/$defs/base"}],
            "anyOf": [{"properties": {"a": {"const": 1}}}, {"patternProperties": {"^z": {}}}],
            "if": {"required": ["f"]},
            "then": {"patternProperties": {"^t_": {}}},
            "else": {"patternProperties": {"^e_": {}}},
            "dependentSchemas": {"d": {"patternProperties": {"^dd": {}}}},
            "unevaluatedProperties": False,
        },
        [
            {"b_1": 1, "k": 1, "a": 1, "zz": 1, "t_1": 1, "e_1": 1},
            {"f": 1, "b_1": 1, "t_1": 1, "a": 1},
            {"e_1": 1, "a": 2, "zz": 1, "d": 1, "dd": 1, "q": 1},
        ],
    ),
    (
        {
            "$defs": {"node": {"$dynamicAnchor": "n", "patternProperties": {"^p": {}}}},
            "$ref": "#/$defs/node",
            "unevaluatedProperties": {"type": "integer"},
        },
        [{"p1": "s", "q": 1}, {"q": "s", "r": "t"}],
    ),
    (
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
            "patternProperties": {"^p": {}},
            "properties": {"child": {"$recursiveRef": "#"}},
            "unevaluatedProperties": False,
        },
        [{"p": 1, "child": {"p2": 1}}, {"child": {"q": 1}}],
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "patternProperties": {"^[0-9]+$": {"type": "string"}},
            "additionalProperties": False,
        },
        [{"1": "a"}, {"1": 2, "x": 1}],
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "properties": {"s": {"pattern": "^a"}},
        },
        [{"s": "ab"}, {"s": "ba"}],
    ),
]


@pytest.mark.parametrize(("schema", "instances"), SAME)
def test_answers_are_jsonschemas_where_the_engines_agree(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    for instance in instances:
        assert problems(schema, instance) == upstream(schema, instance)
    assert any(upstream(schema, i) for i in instances), "a case with no error proves little"


# --- nothing is fetched ------------------------------------------------------------


@pytest.fixture
def counting_server() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_reference_is_never_fetched(counting_server: tuple[str, list[str]]) -> None:
    base, asked = counting_server
    schema = {"properties": {"a": {"$ref": f"{base}/item.json"}}}
    with pytest.raises(Unresolvable, match=r"item\.json"):
        problems(schema, {"a": "x"})
    assert asked == []
