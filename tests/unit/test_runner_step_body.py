"""A step's request body (``StepBody``, controllers/runners/schemas.py) is the
core's ``StepDraft`` in camelCase: the same fields, types and defaults, written
once, and the draft derived from it whole."""

from __future__ import annotations

import uuid

import msgspec

from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_web.controllers.runners.schemas import StepBody, StepsBody, step_draft


def test_the_body_has_the_drafts_fields_in_camel_case() -> None:
    draft, body = msgspec.structs.fields(StepDraft), msgspec.structs.fields(StepBody)
    assert [(f.name, f.type, f.default) for f in body] == [
        (f.name, f.type, f.default) for f in draft
    ]
    assert [f.encode_name for f in body] == [
        "id",
        "kind",
        "name",
        "inputMapping",
        "agentId",
        "prompt",
        "model",
        "url",
        "method",
        "timeoutMs",
        "command",
        "expression",
        "ifTrue",
        "ifFalse",
        "headers",
    ]


def test_a_camel_case_body_becomes_the_draft_whole() -> None:
    agent = uuid.uuid4()
    raw = {
        "id": "one",
        "kind": "agent",
        "name": "first",
        "inputMapping": {"t": "input.topic"},
        "agentId": str(agent),
        "prompt": "go",
        "model": "local",
        "url": "https://hooks.example.com/",
        "method": "PUT",
        "headers": {"X-Key": "k"},
        "timeoutMs": 500,
        "command": "ls",
        "expression": "`true`",
        "ifTrue": "stop",
        "ifFalse": "next",
    }
    body = msgspec.json.decode(msgspec.json.encode({"steps": [raw]}), type=StepsBody).steps[0]
    draft = step_draft(body)
    assert type(draft) is StepDraft
    assert draft == StepDraft(
        id="one",
        kind="agent",
        name="first",
        input_mapping={"t": "input.topic"},
        agent_id=agent,
        prompt="go",
        model="local",
        url="https://hooks.example.com/",
        method="PUT",
        headers={"X-Key": "k"},
        timeout_ms=500,
        command="ls",
        expression="`true`",
        if_true="stop",
        if_false="next",
    )


def test_snake_case_names_are_not_read_and_defaults_hold() -> None:
    body = msgspec.json.decode(b'{"id": "a", "kind": "webhook", "timeout_ms": 5}', type=StepBody)
    assert step_draft(body) == StepDraft(id="a", kind="webhook")
