"""An ended run's trace record (use_cases/runners/trace.py): the run's span, one
span per step that started (its kind, attempt, thread, payloads capped), the
summary, and where the record goes (``RunTraces``: once, kept for the retention,
nothing without one)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.memory.traces import MemoryTraces
from agentsvc_core.entities import TraceRecord
from agentsvc_core.entities.runner import Runner, RunnerRun, Step, StepRun
from agentsvc_core.errors import Conflict, StorageError
from agentsvc_core.use_cases.runners.trace import (
    PAYLOAD_CAP,
    RunTraces,
    run_span_id,
    run_trace,
    step_span_id,
)
from tests.contract.test_runners_contract import runner_in
from tests.unit.turn_world import ORG, T0, Clock

THREAD = uuid.uuid4()
PIPELINE = (
    Step(id="a", kind="agent", agent_id=uuid.uuid4(), prompt="go"),
    Step(id="c", kind="condition", expression="`true`"),
    Step(id="w", kind="webhook", url="https://hooks.example.com/"),
    Step(id="s", kind="webhook", url="https://hooks.example.com/"),
    Step(id="p", kind="agent", agent_id=uuid.uuid4()),
)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def a_run(**over: Any) -> RunnerRun:
    steps = (
        StepRun(
            step_id="a",
            status="succeeded",
            attempt=2,
            started_at=at(1),
            ended_at=at(3.5),
            output={"text": "hi"},
            tokens=12,
            cost_usd=0.25,
            model="m",
            thread_id=THREAD,
        ),
        StepRun(step_id="c", status="succeeded", attempt=1, started_at=at(4), ended_at=at(4)),
        StepRun(
            step_id="w",
            status="failed",
            attempt=1,
            started_at=at(5),
            error="the webhook answered 500",
            cost_usd=1.0,
        ),
        StepRun(step_id="s", status="skipped", started_at=at(6)),
        StepRun(step_id="p"),
    )
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=uuid.uuid4(),
        agent_id=None,
        trigger_id=uuid.uuid4(),
        trigger_kind="cron",
        status="failed",
        error="step 'w': the webhook answered 500",
        input={"topic": "otters"},
        output={"text": "hi"},
        pipeline=PIPELINE,
        steps=steps,
        thread_id=None,
        trace_id="ab" * 16,
        created_at=T0,
        started_at=at(0.5),
        ended_at=at(10),
        updated_at=at(11),
    )
    return msgspec.structs.replace(run, **over)


def test_span_ids_are_the_runs_and_each_attempts_own() -> None:
    run = a_run()
    assert run_span_id(run) == hashlib.sha256(f"run:{run.id}".encode()).hexdigest()[:16]
    state = run.steps[0]
    assert (
        step_span_id(run, state) == (hashlib.sha256(f"run:{run.id}:a:2".encode()).hexdigest()[:16])
    )
    again = msgspec.structs.replace(state, attempt=3)
    assert step_span_id(run, again) != step_span_id(run, state)
    assert step_span_id(run, msgspec.structs.replace(state, status="running")) == step_span_id(
        run, state
    )


def test_a_failed_runs_record_has_its_span_and_one_per_step_that_started() -> None:
    run = a_run()
    keep = at(3600)
    record = run_trace(run, "nightly", keep)
    assert record.keep_until == keep
    assert record.evaluations == []
    root, *steps = record.spans
    assert record.root_span_id == root.span_id == run_span_id(run)
    assert (root.parent_span_id, root.name, root.kind, root.status) == (
        None,
        "runner_run nightly",
        "chain",
        "error",
    )
    assert (root.started_at, root.duration_ms, root.error) == (at(0.5), 9500.0, run.error)
    assert root.attributes == {
        "agentsvc.run.id": str(run.id),
        "agentsvc.run.status": "failed",
        "agentsvc.run.trigger": "cron",
    }
    assert (root.input, root.output, root.truncated, root.original_bytes) == (
        {"topic": "otters"},
        {"text": "hi"},
        False,
        None,
    )
    # the skipped and the pending step have no span
    assert [(s.name, s.kind, s.status) for s in steps] == [
        ("step a", "runner_step", "ok"),
        ("step c", "condition", "ok"),
        ("step w", "webhook", "error"),
    ]
    agent, condition, webhook = steps
    assert all(s.parent_span_id == root.span_id for s in steps)
    assert agent.span_id == step_span_id(run, run.steps[0])
    assert agent.attributes == {
        "agentsvc.step.id": "a",
        "agentsvc.step.kind": "agent",
        "agentsvc.step.attempt": 2,
        "gen_ai.conversation.id": str(THREAD),
    }
    assert (agent.started_at, agent.duration_ms, agent.model, agent.cost_usd) == (
        at(1),
        2500.0,
        "m",
        0.25,
    )
    assert (agent.input, agent.output, agent.error) == (None, {"text": "hi"}, None)
    assert "gen_ai.conversation.id" not in condition.attributes
    assert condition.duration_ms == 0.0
    # a webhook step's cost is not a model's; a step without an end lasts to the run's
    assert (webhook.cost_usd, webhook.duration_ms, webhook.error) == (
        None,
        5000.0,
        "the webhook answered 500",
    )
    s = record.summary
    assert (s.id, s.org_id, s.kind, s.name, s.status, s.run_status, s.error) == (
        run.trace_id,
        ORG,
        "runner_run",
        "nightly",
        "error",
        "failed",
        "FAILED",
    )
    assert (s.started_at, s.ended_at, s.duration_ms) == (at(0.5), at(10), 9500)
    assert (s.run_id, s.runner_id, s.agent_id, s.thread_id) == (run.id, run.runner_id, None, None)


def test_a_succeeded_runs_record_says_ok_and_no_error() -> None:
    run = a_run(status="succeeded", error=None, steps=a_run().steps[:2], pipeline=PIPELINE[:2])
    record = run_trace(run, "nightly", at(60))
    assert [s.status for s in record.spans] == ["ok", "ok", "ok"]
    assert (record.spans[0].error, record.summary.status, record.summary.error) == (
        None,
        "ok",
        None,
    )


def test_an_unstarted_run_is_timed_from_its_creation_to_its_last_write() -> None:
    run = a_run(status="cancelled", started_at=None, ended_at=None, steps=a_run().steps[:1])
    run = msgspec.structs.replace(run, pipeline=PIPELINE[:1])
    record = run_trace(run, "nightly", at(60))
    root = record.spans[0]
    assert (root.started_at, root.duration_ms) == (T0, 11000.0)
    assert (record.summary.error, record.summary.status) == ("CANCELLED", "error")
    assert record.spans[0].error == run.error


def test_a_step_ended_before_it_started_lasts_no_time() -> None:
    steps = (msgspec.structs.replace(a_run().steps[0], ended_at=at(0)),)
    record = run_trace(a_run(steps=steps, pipeline=PIPELINE[:1]), "n", at(60))
    assert record.spans[1].duration_ms == 0.0


@pytest.mark.parametrize(("extra", "cut"), [(0, False), (1, True)])
def test_payloads_past_the_cap_are_dropped_and_their_size_kept(extra: int, cut: bool) -> None:
    # a JSON string of exactly PAYLOAD_CAP bytes (its two quotes included), or one more
    big = "x" * (PAYLOAD_CAP - 2 + extra)
    steps = (msgspec.structs.replace(a_run().steps[0], output=big),)
    run = a_run(input={}, output=big, steps=steps, pipeline=PIPELINE[:1])
    root, step = run_trace(run, "n", at(60)).spans
    size = PAYLOAD_CAP + extra
    if not cut:
        assert (root.output, root.truncated, root.original_bytes) == (big, False, None)
        assert (step.output, step.truncated) == (big, False)
        return
    assert (root.input, root.output, root.truncated, root.original_bytes) == ({}, None, True, size)
    assert (step.input, step.output, step.truncated, step.original_bytes) == (
        None,
        None,
        True,
        size,
    )
    both = a_run(input={"t": big}, output=big, steps=steps, pipeline=PIPELINE[:1])
    root = run_trace(both, "n", at(60)).spans[0]
    assert root.original_bytes == size + len(msgspec.json.encode({"t": big}))


# --- where the record goes -----------------------------------------------------------


def _memory(storage: MemoryStorage) -> MemoryTraces:
    traces = storage.traces
    assert isinstance(traces, MemoryTraces)
    return traces


async def _stored(storage: MemoryStorage, run: RunnerRun) -> Runner:
    runner = msgspec.structs.replace(runner_in(ORG), id=run.runner_id, name="nightly")
    await storage.runners.add(runner)
    return runner


async def test_a_record_is_kept_for_the_retention_once() -> None:
    storage, clock = MemoryStorage(), Clock()
    run = a_run()
    await _stored(storage, run)
    traces = RunTraces(storage.runners, storage.traces, clock, timedelta(days=3))
    await traces.record(run)
    await traces.record(run)  # a cancel racing the job: the second is dropped
    found = await storage.traces.get_trace(ORG, run.trace_id or "")
    assert found is not None
    summary, spans, _ = found
    assert summary.name == "nightly"
    assert [s.name for s in spans].count("runner_run nightly") == 1
    listed = [r for r in _memory(storage)._records() if r.summary.id == run.trace_id]
    assert [r.keep_until for r in listed] == [clock.now() + timedelta(days=3)]


async def test_a_scheduled_tasks_run_is_named_so() -> None:
    storage, clock = MemoryStorage(), Clock()
    run = a_run(runner_id=None, agent_id=uuid.uuid4())
    await RunTraces(storage.runners, storage.traces, clock, timedelta(days=1)).record(run)
    found = await storage.traces.get_trace(ORG, run.trace_id or "")
    assert found is not None
    assert found[0].name == "scheduled task"


@pytest.mark.parametrize(
    "why", ["no retention", "no trace id", "runner gone", "no trace store"], ids=str
)
async def test_nothing_is_recorded(why: str) -> None:
    storage, clock = MemoryStorage(), Clock()
    run = a_run(trace_id=None) if why == "no trace id" else a_run()
    if why != "runner gone":
        await _stored(storage, run)
    retention = timedelta(0) if why == "no retention" else timedelta(days=1)
    store = None if why == "no trace store" else storage.traces
    await RunTraces(storage.runners, store, clock, retention).record(run)
    assert list(_memory(storage)._records()) == []


class Failing:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.tried: list[TraceRecord] = []

    async def add_trace(self, record: TraceRecord) -> None:
        self.tried.append(record)
        raise self.error


async def test_a_record_that_cannot_be_stored_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage, clock = MemoryStorage(), Clock()
    run = a_run()
    await _stored(storage, run)
    caplog.set_level(logging.WARNING, logger="agentsvc.runners")
    taken = Failing(Conflict("recorded"))
    await RunTraces(storage.runners, taken, clock, timedelta(days=1)).record(run)  # type: ignore[arg-type]
    assert len(taken.tried) == 1
    assert caplog.records == []
    down = Failing(StorageError("the database is down"))
    await RunTraces(storage.runners, down, clock, timedelta(days=1)).record(run)  # type: ignore[arg-type]
    (record,) = caplog.records
    assert record.getMessage() == (
        f"the trace of run {run.id} could not be stored: the database is down"
    )
