"""A step's work by its kind (use_cases/runners/work.py) and the signed calls of
an organization's webhooks (use_cases/webhook_signing.py): a webhook step's body,
headers and key, what each answer comes to, a condition's choice."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.runner import RunnerRun, Step, StepRun
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports.webhooks import WebhookAnswer, WebhookCall
from agentsvc_core.use_cases.runners.steps import step_headers_context
from agentsvc_core.use_cases.runners.transitions import MAX_OUTPUT_CHARS, Done, Failed
from agentsvc_core.use_cases.runners.work import WEBHOOK_MAX_BYTES, WebhookSteps, condition
from agentsvc_core.use_cases.webhook_signing import (
    MAX_HEADERS,
    checked_headers,
    idempotency_key,
    opened_headers,
    signed_call,
)
from tests.unit.turn_world import BOX

ORG = "org-work"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Answering:
    def __init__(self, answer: WebhookAnswer) -> None:
        self.answer = answer
        self.calls: list[WebhookCall] = []

    async def call(self, call: WebhookCall) -> WebhookAnswer:
        self.calls.append(call)
        return self.answer


class Secrets:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def signing_secrets(self, org: str) -> list[str]:
        self.asked.append(org)
        return ["new", "old"]


def a_run(step: Step, **over: Any) -> RunnerRun:
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=uuid.uuid4(),
        agent_id=None,
        trigger_id=None,
        trigger_kind="api",
        status="running",
        input={"topic": "otters", "n": 2},
        pipeline=(step,),
        steps=(StepRun(step_id=step.id),),
        created_at=T0,
        updated_at=T0,
    )
    return msgspec.structs.replace(run, **over)


def hook(**over: Any) -> Step:
    fields: dict[str, Any] = {"url": "https://hooks.example.com/x", **over}
    return Step(id="w", kind="webhook", **fields)


async def _run(step: Step, answer: WebhookAnswer, **over: Any) -> tuple[Any, Answering, RunnerRun]:
    caller = Answering(answer)
    run = a_run(step, **over)
    end = await WebhookSteps(caller, Secrets(), BOX).run(
        run, step, {"input": run.input, "steps": {}}
    )
    return end, caller, run


# --- a webhook step ------------------------------------------------------------------------


async def test_a_webhook_steps_call_carries_the_run_signed_with_a_key_for_every_attempt() -> None:
    step = hook(method="PUT", timeout_ms=700)
    runner_id = uuid.uuid4()
    step = msgspec.structs.replace(
        step, headers=BOX.seal(b'{"X-Key": "k"}', step_headers_context(ORG, runner_id, "w"))
    )
    end, caller, run = await _run(
        step, WebhookAnswer(outcome="ok", status_code=200, body='{"a": 1}'), runner_id=runner_id
    )
    assert end == Done(output={"status_code": 200, "body": '{"a": 1}', "json": {"a": 1}})
    (call,) = caller.calls
    assert (call.url, call.method, call.timeout_ms, call.max_bytes) == (
        "https://hooks.example.com/x",
        "PUT",
        700,
        WEBHOOK_MAX_BYTES,
    )
    assert call.headers == {"X-Key": "k"}
    assert call.secrets == ["new", "old"]
    assert call.idempotency_key == idempotency_key(ORG, run.id, "w")
    assert msgspec.json.decode(call.body) == {
        "runnerId": str(runner_id),
        "runId": str(run.id),
        "stepId": "w",
        "orgId": ORG,
        "input": {"topic": "otters", "n": 2},
    }


async def test_a_mapped_webhook_step_sends_the_mapping_and_a_task_names_no_runner() -> None:
    step = hook(input_mapping={"t": "input.topic", "twice": "input.n"})
    end, caller, _ = await _run(step, WebhookAnswer(outcome="ok", status_code=204), runner_id=None)
    body = msgspec.json.decode(caller.calls[0].body)
    assert (body["input"], body["runnerId"]) == ({"t": "otters", "twice": 2}, None)
    assert caller.calls[0].headers == {}
    assert end == Done(output={"status_code": 204, "body": "", "json": None})


async def test_a_run_without_a_runner_opens_its_steps_headers_under_the_runs_id() -> None:
    step = hook()
    run = a_run(step, runner_id=None)
    step = msgspec.structs.replace(
        step, headers=BOX.seal(b'{"A": "1"}', step_headers_context(ORG, run.id, "w"))
    )
    caller = Answering(WebhookAnswer(outcome="ok", status_code=200))
    await WebhookSteps(caller, Secrets(), BOX).run(run, step, {"input": {}, "steps": {}})
    assert caller.calls[0].headers == {"A": "1"}


async def test_a_mapping_that_cannot_be_evaluated_fails_the_step_before_any_call() -> None:
    end, caller, _ = await _run(
        hook(input_mapping={"n": "length(input.n)"}), WebhookAnswer(outcome="ok")
    )
    assert isinstance(end, Failed)
    assert end.error.startswith("the step's input cannot be built: 'length(input.n)': ")
    assert caller.calls == []


async def test_a_non_2xx_answer_fails_the_step_keeping_the_answer() -> None:
    long = "x" * (MAX_OUTPUT_CHARS + 5)
    end, _, _ = await _run(hook(), WebhookAnswer(outcome="status", status_code=503, body=long))
    assert isinstance(end, Failed)
    assert end.error == "the webhook answered 503"
    assert end.output == {"status_code": 503, "body": long[:MAX_OUTPUT_CHARS], "json": None}


@pytest.mark.parametrize("outcome", ["timeout", "too_large", "refused", "unreachable"])
async def test_no_usable_answer_fails_the_step_with_its_reason(outcome: Any) -> None:
    end, _, _ = await _run(hook(), WebhookAnswer(outcome=outcome, reason="why not"))
    assert end == Failed(error="the webhook call failed: why not")


# --- a condition ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "chosen"), [("input.n", "yes"), ("input.none", "no")])
def test_a_condition_goes_where_its_value_says(value: str, chosen: str) -> None:
    step = Step(id="c", kind="condition", expression=value, if_true="yes", if_false="no")
    got = condition(step, {"input": {"n": 0}, "steps": {}})
    value_seen = 0 if value == "input.n" else None
    assert got == Done(output={"value": value_seen, "next": chosen}, next=chosen)


def test_a_condition_that_cannot_be_evaluated_fails() -> None:
    step = Step(id="c", kind="condition", expression="length(input.n)")
    got = condition(step, {"input": {"n": 1}, "steps": {}})
    assert isinstance(got, Failed)
    assert got.error.startswith("the condition cannot be evaluated: ")


# --- signing -------------------------------------------------------------------------------


def test_the_idempotency_key_is_the_calls_own() -> None:
    scope = uuid.uuid4()
    key = idempotency_key(ORG, scope, "c1")
    assert key == hashlib.sha256(f"{ORG}:{scope}:c1".encode()).hexdigest()
    assert idempotency_key(ORG, None, "c1") == hashlib.sha256(f"{ORG}:None:c1".encode()).hexdigest()
    assert len({key, idempotency_key(ORG, scope, "c2"), idempotency_key("o2", scope, "c1")}) == 3


async def test_a_signed_call_is_made_with_the_organizations_secrets_of_now() -> None:
    caller, secrets = Answering(WebhookAnswer(outcome="ok", status_code=200)), Secrets()
    answer = await signed_call(
        caller,
        secrets,
        org=ORG,
        url="https://h/",
        method="PATCH",
        headers={"A": "1"},
        body=b"{}",
        timeout_ms=5,
        max_bytes=6,
        key="k",
    )
    assert answer is caller.answer
    assert secrets.asked == [ORG]
    assert caller.calls == [
        WebhookCall(
            url="https://h/",
            method="PATCH",
            headers={"A": "1"},
            body=b"{}",
            secrets=["new", "old"],
            timeout_ms=5,
            max_bytes=6,
            idempotency_key="k",
        )
    ]


def test_sealed_headers_are_opened_under_their_context() -> None:
    sealed = BOX.seal(b'{"A": "1"}', "here")
    assert opened_headers(BOX, sealed, "here") == {"A": "1"}
    assert opened_headers(BOX, None, "here") == {}
    assert opened_headers(BOX, "", "here") == {}
    with pytest.raises(Exception):  # noqa: B017, PT011 (the box refuses another context)
        opened_headers(BOX, sealed, "elsewhere")


@pytest.mark.parametrize(
    "name",
    [
        "Content-Type",
        "content-length",
        "HOST",
        "Idempotency-Key",
        "Transfer-Encoding",
        "Connection",
        "X-Service-Timestamp",
        "x-service-nonce",
        "X-Service-Signature",
    ],
)
def test_headers_the_service_sets_may_not_be_given(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        checked_headers("headers", {name: "x"})
    assert (caught.value.field, caught.value.problem) == (
        "headers",
        f"{name!r} is set by the service",
    )


def test_headers_are_bounded_ascii_and_valid() -> None:
    most = {f"X-{i}": "v" for i in range(MAX_HEADERS)}
    assert checked_headers("h", most) == most
    with pytest.raises(InvalidInput) as caught:
        checked_headers("h", {**most, "X-more": "v"})
    assert caught.value.problem == f"at most {MAX_HEADERS} headers"
    with pytest.raises(InvalidInput) as caught:
        checked_headers("h", {"X-A": "café"})
    assert caught.value.problem == "the value of 'X-A' must be ASCII"
    with pytest.raises(InvalidInput) as caught:
        checked_headers("h", {"X-A": "v" * 8193})
    assert caught.value.problem == "must be at most 8192 characters"
    assert checked_headers("h", {"X-A": "v" * 8192}) == {"X-A": "v" * 8192}
    with pytest.raises(InvalidInput):
        checked_headers("h", {"X A": "v"})
