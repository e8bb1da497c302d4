"""``agentsvc_core.json_schema`` at its edges: the work budget at its boundary, the
keys ``unevaluatedProperties`` counts as evaluated through every keyword that
evaluates some, each draft's class matching with RE2, the draft ``$schema`` names
when a schema is checked, and the wording of its refusals. Written to kill the
mutants `make mutation` found alive in ``agentsvc_core.json_schema``
(docs/development.md)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from jsonschema.protocols import Validator
from referencing import Registry

from agentsvc_core import json_schema
from agentsvc_core.json_schema import PatternTooCostly, UnsupportedPattern
from tests.unit.test_json_schema import problems, upstream

# --- the work budget at its boundary -----------------------------------------------

WORD = "^[a-z]+$"


def _program() -> int:
    return int(json_schema.compiled(WORD).programsize)


@pytest.mark.parametrize("texts", [1, 2, 3])
def test_a_check_may_spend_exactly_its_budget_and_not_one_unit_more(
    monkeypatch: pytest.MonkeyPatch, texts: int
) -> None:
    """Compiling is paid once per pattern and check (50 units an instruction);
    each match costs the program's size times the text's length plus one."""
    cost = _program() * 50 + texts * _program() * (len("abc") + 1)
    schema = {"items": {"pattern": WORD}}
    monkeypatch.setattr(json_schema, "WORK_BUDGET", cost)
    assert problems(schema, ["abc"] * texts) == []
    monkeypatch.setattr(json_schema, "WORK_BUDGET", cost - 1)
    with pytest.raises(PatternTooCostly) as refused:
        problems(schema, ["abc"] * texts)
    assert refused.value.pattern == WORD


def test_a_refusal_for_cost_reads_in_full() -> None:
    assert str(PatternTooCostly("a+")) == (
        "checking the pattern 'a+' is more work than one check may do"
        " (texts too long for the schema's patterns, or patterns too large)"
    )


def test_a_pattern_of_a_hundred_characters_is_quoted_whole_and_a_longer_one_cut() -> None:
    whole = "a" * 100
    assert str(UnsupportedPattern(whole, "why")).startswith(f"the pattern {whole!r} is not")
    longer = "b" * 101
    cut = repr("b" * 100 + "…")
    assert str(UnsupportedPattern(longer, "why")).startswith(f"the pattern {cut} is not")


# --- the same answers as jsonschema's, paths and wording included -------------------


def _detailed(found: list[jsonschema.ValidationError]) -> list[tuple[Any, ...]]:
    return sorted((e.message, list(e.path), list(e.schema_path), e.validator) for e in found)


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"patternProperties": {"^s_": {"type": "string"}}}, {"s_a": 1}),
        (
            {"patternProperties": {"^a": {}, "^b": {}}, "additionalProperties": False},
            {"c": 1, "d": 2},
        ),
        ({"patternProperties": {"^a": {}}, "additionalProperties": False}, {"c": 1}),
    ],
)
def test_errors_carry_jsonschemas_paths_and_wording(schema: Any, instance: Any) -> None:
    ours = json_schema.problems(json_schema.validator(schema), instance)
    theirs = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    assert ours
    assert _detailed(ours) == _detailed(theirs)


# each: a schema, instances it accepts, instances it refuses (unevaluatedProperties)
EVALUATED: list[tuple[dict[str, Any], list[Any], list[Any]]] = [
    # a boolean subschema evaluates nothing
    ({"allOf": [True], "unevaluatedProperties": False}, [{}], [{"a": 1}]),
    # a $ref's keys and the schema's own
    (
        {
            "$defs": {"a": {"properties": {"a": {}}}},
            "$ref": "#/$defs/a",
            "properties": {"b": {}},
            "unevaluatedProperties": False,
        },
        [{"a": 1, "b": 2}],
        [{"a": 1, "b": 2, "c": 3}],
    ),
    # additionalProperties evaluates the keys it accepts
    (
        {"allOf": [{"additionalProperties": {"type": "integer"}}], "unevaluatedProperties": False},
        [{"x": 1}],
        [{"x": "s"}],
    ),
    # so does a nested unevaluatedProperties
    (
        {"allOf": [{"unevaluatedProperties": True}], "unevaluatedProperties": False},
        [{"x": 1}],
        [],
    ),
    # $dynamicRef alone, and with a $ref beside it
    (
        {
            "$defs": {"n": {"$dynamicAnchor": "n", "properties": {"a": {}}}},
            "$dynamicRef": "#n",
            "unevaluatedProperties": False,
        },
        [{"a": 1}],
        [{"b": 1}],
    ),
    (
        {
            "$defs": {
                "a": {"properties": {"a": {}}},
                "n": {"$dynamicAnchor": "n", "properties": {"b": {}}},
            },
            "$ref": "#/$defs/a",
            "$dynamicRef": "#n",
            "unevaluatedProperties": False,
        },
        [{"a": 1, "b": 2}],
        [{"a": 1, "b": 2, "c": 3}],
    ),
    # a reference inside a referenced resource resolves against that resource
    (
        {
            "$id": "https://schemas.example.test/root",
            "$ref": "other",
            "unevaluatedProperties": False,
            "$defs": {
                "o": {
                    "$id": "https://schemas.example.test/other",
                    "$ref": "#/$defs/inner",
                    "$defs": {"inner": {"properties": {"a": {}}}},
                }
            },
        },
        [{"a": 1}],
        [{"a": 1, "b": 2}],
    ),
    # ... and one inside a referenced subschema against the document it is in
    (
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"properties": {"x": {}}}},
            "$ref": "#/$defs/a",
            "unevaluatedProperties": False,
        },
        [{"x": 1}],
        [{"x": 1, "y": 2}],
    ),
    # $recursiveRef beside unevaluatedProperties (draft 2019-09)
    (
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
            "properties": {
                "a": {},
                "child": {
                    "$recursiveRef": "#",
                    "properties": {"extra": {}},
                    "unevaluatedProperties": False,
                },
            },
        },
        [{"child": {"a": 1, "extra": 2}}],
        [{"child": {"a": 1, "other": 2}}],
    ),
    # ... resolved in the dynamic scope: here the tree extended, not the tree
    (
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$id": "https://schemas.example.test/strict-tree",
            "$recursiveAnchor": True,
            "$ref": "tree",
            "properties": {"extra": {}},
            "$defs": {
                "tree": {
                    "$id": "https://schemas.example.test/tree",
                    "$recursiveAnchor": True,
                    "properties": {
                        "data": {},
                        "children": {
                            "items": {"$recursiveRef": "#", "unevaluatedProperties": False}
                        },
                    },
                }
            },
        },
        [{"children": [{"extra": 1, "data": 2}]}],
        [{"children": [{"other": 1}]}],
    ),
    # every dependent schema that applies
    (
        {
            "properties": {"a": {}, "c": {}},
            "dependentSchemas": {"a": {"properties": {"b": {}}}, "c": {"properties": {"d": {}}}},
            "unevaluatedProperties": False,
        },
        [{"a": 1, "b": 2, "c": 3, "d": 4}],
        [{"b": 2}, {"c": 3, "b": 2}],
    ),
    # oneOf's valid branch
    (
        {
            "oneOf": [{"properties": {"a": {}}, "required": ["a"]}, {"required": ["z"]}],
            "unevaluatedProperties": False,
        },
        [{"a": 1}],
        [{"a": 1, "q": 1}],
    ),
    # if's own properties, when it holds
    (
        {
            "if": {"properties": {"a": {"const": 1}}},
            "then": {"properties": {"b": {}}},
            "unevaluatedProperties": False,
        },
        [{"a": 1, "b": 2}],
        [{"a": 2, "b": 2}],
    ),
    # an unevaluatedProperties schema checks each value left
    (
        {"properties": {"k": {}}, "unevaluatedProperties": {"type": "integer"}},
        [{"k": "s", "a": 1}],
        [{"a": "s", "b": 1}],
    ),
    (
        {"unevaluatedProperties": {"type": ["integer", "null"]}},
        [{"a": None, "b": 1}],
        [{"a": "s"}],
    ),
]


@pytest.mark.parametrize(("schema", "accepted", "refused"), EVALUATED)
def test_unevaluated_properties_counts_every_keyword_that_evaluates(
    schema: dict[str, Any], accepted: list[Any], refused: list[Any]
) -> None:
    for instance in accepted:
        assert problems(schema, instance) == [], instance
    for instance in refused:
        assert problems(schema, instance), instance
    for instance in [*accepted, *refused]:
        assert problems(schema, instance) == upstream(schema, instance)


# --- each draft's class matches with RE2 -------------------------------------------

# RE2's \d is ASCII; Python's re (jsonschema's own) takes any Unicode digit
ARABIC_THREE = "\u0663"


def _classes(draft: type[Validator]) -> list[type[Validator]]:
    """The class ``validator`` picks for a schema naming ``draft``, and the one
    ``_linear`` makes for it now: the module builds its classes when it is
    imported, so a test of the building calls it."""
    named = {"$schema": draft.META_SCHEMA.get("$schema") or draft.META_SCHEMA["id"]}
    return [type(json_schema.validator(named)), json_schema._linear(draft)]


@pytest.mark.parametrize("draft", json_schema._DRAFTS, ids=lambda d: d.__name__)
def test_every_draft_matches_its_pattern_keywords_with_re2(draft: type[Validator]) -> None:
    evaluates = "unevaluatedProperties" in draft.VALIDATORS
    for cls in _classes(draft):

        def found(schema: dict[str, Any], instance: Any, cls: Any = cls) -> list[str]:
            checker = cls(schema, registry=Registry())
            return [e.message for e in json_schema.problems(checker, instance)]

        digit = {"^\\d$": {"type": "string"}}
        assert found({"pattern": "^\\d$"}, ARABIC_THREE) == [
            f"{ARABIC_THREE!r} does not match '^\\\\d$'"
        ]
        assert found({"patternProperties": digit}, {ARABIC_THREE: 1}) == []
        assert found({"patternProperties": digit, "additionalProperties": False}, {"3": "s"}) == []
        assert found(
            {"patternProperties": digit, "additionalProperties": False}, {ARABIC_THREE: 1}
        ) == [f"{ARABIC_THREE!r} does not match any of the regexes: '^\\\\d$'"]
        unevaluated = found(
            {"patternProperties": digit, "unevaluatedProperties": False}, {ARABIC_THREE: 1}
        )
        assert unevaluated == (
            [f"Unevaluated properties are not allowed ({ARABIC_THREE!r} was unexpected)"]
            if evaluates
            else []
        )
        with pytest.raises(UnsupportedPattern):
            found({"pattern": "a\\Z"}, "a")


def test_a_schema_is_checked_in_the_draft_it_names() -> None:
    # a boolean exclusiveMinimum is draft 4's; 2020-12 (the default) wants a number
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "minimum": 1,
        "exclusiveMinimum": True,
    }
    json_schema.check_schema(draft4)
    with pytest.raises(jsonschema.SchemaError, match="True is not of type 'number'"):
        json_schema.check_schema({k: v for k, v in draft4.items() if k != "$schema"})
