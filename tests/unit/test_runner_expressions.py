"""Runner steps' expressions (use_cases/runners/expressions.py): JMESPath over a
run's context, JSONPath's ``$.`` root accepted, JMESPath's truth, templates'
placeholders, and the JSON a step's text is read as."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from agentsvc_core.entities.runner import RunnerRun, Step, StepRun
from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.runners.expressions import (
    MAX_EXPRESSION,
    compile_expression,
    context_of,
    evaluate,
    json_or_none,
    render,
    template_parts,
    truthy,
)

CONTEXT: dict[str, Any] = {
    "input": {"topic": "otters", "n": 3, "tags": ["a", "b"]},
    "steps": {"one": {"status": "succeeded", "output": {"text": "hi", "json": {"ok": True}}}},
}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("input.topic", "otters"),
        ("$.input.topic", "otters"),
        ("  $.input.n  ", 3),
        ("$", CONTEXT),
        ("@", CONTEXT),
        ("steps.one.output.json.ok", True),
        ("length(input.tags)", 2),
        ("input.missing", None),
    ],
)
def test_an_expression_is_evaluated_over_the_context(expression: str, value: Any) -> None:
    assert evaluate(expression, CONTEXT) == value


def test_only_a_leading_dollar_and_dot_or_a_lone_dollar_is_the_root() -> None:
    with pytest.raises(ValueError, match="Unknown token"):
        evaluate("$input", CONTEXT)


def test_an_expression_that_cannot_be_evaluated_says_why() -> None:
    with pytest.raises(ValueError, match=r"^'length\(input.n\)': ") as caught:
        evaluate("length(input.n)", CONTEXT)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("x" * (MAX_EXPRESSION + 1), f"at most {MAX_EXPRESSION} characters"),
        ("a ||", "not a JMESPath expression: "),
        ("$.[", "not a JMESPath expression: "),
    ],
)
def test_a_written_expression_is_checked_naming_its_field(expression: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_expression("steps[c].expression", expression)
    assert caught.value.field == "steps[c].expression"
    assert caught.value.problem.startswith(problem)
    assert "\n" not in caught.value.problem


def test_an_expression_of_the_longest_length_compiles() -> None:
    longest = "a" * MAX_EXPRESSION
    assert compile_expression("f", longest).search({longest: 1}) == 1
    assert compile_expression("f", "$.input").search({"input": 2}) == 2


@pytest.mark.parametrize(
    ("value", "truth"),
    [
        (None, False),
        (False, False),
        ("", False),
        ([], False),
        ({}, False),
        (True, True),
        (0, True),
        (0.0, True),
        ("0", True),
        ([0], True),
        ({"a": None}, True),
    ],
)
def test_truth_is_jmespaths(value: Any, truth: bool) -> None:
    assert truthy(value) is truth


def test_a_template_fills_each_placeholder() -> None:
    template = "About {{ input.topic }} ({{input.n}}), {{ input.missing }}{{ input.tags }}."
    assert template_parts(template) == [
        " input.topic ",
        "input.n",
        " input.missing ",
        " input.tags ",
    ]
    assert render(template, CONTEXT) == 'About otters (3), ["a","b"].'
    assert render("{{\n$.input.topic\n}}", CONTEXT) == "otters"
    assert render("no placeholder", CONTEXT) == "no placeholder"
    assert template_parts("{{ a }} and {{ b }}") == [" a ", " b "]
    with pytest.raises(ValueError, match="length"):
        render("{{ length(input.n) }}", CONTEXT)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]\n", [1, 2]),
        ("", None),
        ("   ", None),
        ("plain", None),
        ("1", None),  # only an object or an array
        ('"s"', None),
        ("{not json", None),
        ('{"a": 1} trailing', None),
    ],
)
def test_a_steps_text_is_json_when_it_is_an_object_or_array(text: str, value: Any) -> None:
    assert json_or_none(text) == value


def test_the_context_is_the_input_and_the_steps_that_ran() -> None:
    t = datetime(2026, 11, 1, tzinfo=UTC)
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id="o",
        runner_id=None,
        agent_id=None,
        trigger_id=None,
        trigger_kind="api",
        status="running",
        input={"a": 1},
        pipeline=(
            Step(id="x", kind="condition"),
            Step(id="y", kind="condition"),
            Step(id="z", kind="condition"),
        ),
        steps=(
            StepRun(step_id="x", status="succeeded", output={"o": 1}),
            StepRun(step_id="y", status="skipped"),
            StepRun(step_id="z"),
        ),
        created_at=t,
        updated_at=t,
    )
    assert context_of(run) == {
        "input": {"a": 1},
        "steps": {
            "x": {"status": "succeeded", "output": {"o": 1}},
            "y": {"status": "skipped", "output": None},
        },
    }
