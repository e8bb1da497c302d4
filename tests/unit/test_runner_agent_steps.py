"""An agent step (use_cases/runners/agent_steps.py): its thread and what the
thread says of the run, the message it sends, what it passes to the turn (the
model, the budget's gate, the runner's MCP servers, the step's span), its
output, what each end of the turn comes to, and a retried step taking the turn
its earlier attempt finished. Over the memory storage and the test's clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import RunnerRun, Step, StepRun
from agentsvc_core.ports.telemetry import CURRENT, SpanContext
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.runners.agent_steps import AgentSteps, message_of, reply_output
from agentsvc_core.use_cases.runners.definitions import RunnerDraft
from agentsvc_core.use_cases.runners.runs import save_run
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_core.use_cases.runners.trace import step_span_id
from agentsvc_core.use_cases.runners.transitions import Done, Failed, OverBudget, start_of
from agentsvc_core.use_cases.turn.events import Done as TurnDone
from agentsvc_core.use_cases.turn.events import ErrorEvent, UsageOut
from agentsvc_core.use_cases.turn.reply import BUDGET_EXCEEDED
from tests.contract.test_conversations_contract import a_thread
from tests.unit.runner_world import CENT_A_TOKEN, RunnerWorld, runner_world, spends
from tests.unit.turn_world import HANG, ORG, WHO, says

CONTEXT: dict[str, Any] = {"input": {"topic": "otters", "n": 2}, "steps": {}}


def agent_steps(rw: RunnerWorld) -> AgentSteps:
    work = rw.engine._work
    return work._agent


# --- the message ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "mapping", "message"),
    [
        ("About {{ input.topic }}", {}, "About otters"),
        ("About {{ input.topic }}", {"t": "input.topic"}, 'About otters\n\n{"t":"otters"}'),
        (None, {"t": "input.topic", "n": "input.n"}, '{"t":"otters","n":2}'),
        (None, {}, '{"topic":"otters","n":2}'),
        ("", {}, '{"topic":"otters","n":2}'),
    ],
)
def test_the_message_is_the_prompt_then_the_mapped_input(
    prompt: str | None, mapping: dict[str, str], message: str
) -> None:
    step = Step(id="a", kind="agent", prompt=prompt, input_mapping=mapping)
    assert message_of(step, CONTEXT) == message


def test_a_reply_is_the_steps_output_with_its_json_and_where_it_is() -> None:
    thread, message = uuid.uuid4(), uuid.uuid4()
    assert reply_output('{"a": 1}', thread, message) == {
        "text": '{"a": 1}',
        "json": {"a": 1},
        "thread_id": str(thread),
        "message_id": str(message),
    }
    assert reply_output("x" * 100_001, thread, None) == {
        "text": "x" * 100_000,
        "json": None,
        "thread_id": str(thread),
        "message_id": None,
    }


# --- the thread ---------------------------------------------------------------------------


async def test_a_steps_thread_is_named_after_the_run_and_says_whose_it_is() -> None:
    rw = await runner_world()
    runner = await rw.runner("agent")
    run = await rw.run(runner)
    thread_id = run.steps[0].thread_id
    assert thread_id is not None
    thread = await rw.turn.storage.threads.get(ORG, thread_id)
    assert thread.title == f"run {str(run.id)[:8]} · s0-agent"
    assert thread.agent_id == rw.turn.agent.id
    assert thread.metadata == {
        "runner_id": str(runner.id),
        "runner_run_id": str(run.id),
        "runner_step": "s0-agent",
    }
    assert run.steps[0].output == reply_output("done", thread_id, run.steps[0].output["message_id"])
    assert run.steps[0].output["message_id"] is not None


async def test_a_task_without_a_thread_gets_one_per_run_naming_no_runner() -> None:
    rw = await runner_world()
    run = RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=None,
        agent_id=rw.turn.agent.id,
        trigger_id=None,
        trigger_kind="cron",
        status="running",
        input={},
        pipeline=(),
        steps=(),
        created_at=rw.turn.clock.now(),
        updated_at=rw.turn.clock.now(),
    )
    step = Step(id="task", kind="agent", agent_id=rw.turn.agent.id, prompt="p")
    made = await agent_steps(rw).thread(run, step)
    thread = await rw.turn.storage.threads.get(ORG, made)
    assert thread.metadata == {"runner_run_id": str(run.id), "runner_step": "task"}
    own = msgspec.structs.replace(run, thread_id=rw.turn.thread.id)
    assert await agent_steps(rw).thread(own, step) == rw.turn.thread.id


# --- what the turn is given ------------------------------------------------------------------


class Sends:
    """Records what the step passes to ``Conversation.send``, and the span that is
    current when it does."""

    def __init__(self, rw: RunnerWorld) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any], SpanContext | None]] = []
        conversation = agent_steps(rw)._conversation
        self._send = conversation.send

        async def send(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((args, kwargs, CURRENT.get()))
            return await self._send(*args, **kwargs)

        conversation.send = send  # type: ignore[method-assign]


async def test_the_turn_gets_the_steps_model_gate_mcp_servers_and_span() -> None:
    rw = await runner_world()
    sends = Sends(rw)
    attached: list[tuple[Any, ...]] = []

    async def mcps(who: Principal, kind: str, owner: uuid.UUID) -> list[Any]:
        attached.append((who, kind, owner))
        return []

    agent_steps(rw)._mcps.attached = mcps  # type: ignore[method-assign,assignment]
    runner = await rw.runner("agent", max_tokens_per_run=1000)
    run = await rw.run(runner)
    assert run.status == "succeeded", run
    assert attached == [(Principal.organization(ORG), "runner", runner.id)]
    ((who, thread_id, sent), kwargs, current) = sends.calls[0]
    state = run.steps[0]
    assert (who, thread_id) == (Principal.organization(ORG), state.thread_id)
    assert (sent.content, sent.model_override) == ("go", None)
    assert kwargs["extra_mcp"] == []
    assert kwargs["gate"] is not None
    assert kwargs["stored_parent"] == step_span_id(run, state)
    assert current == SpanContext(trace_id=run.trace_id or "", span_id=step_span_id(run, state))
    assert CURRENT.get() is None  # set only for the call


async def test_a_run_without_a_trace_or_budget_passes_neither() -> None:
    rw = await runner_world()
    sends = Sends(rw)
    runner = await rw.runner("agent")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    state = start_of(
        msgspec.structs.replace(run.steps[0], thread_id=rw.turn.thread.id), rw.turn.clock.now()
    )
    running = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(r, status="running", steps=(state,)),
    )
    assert isinstance(running, RunnerRun)
    assert running.trace_id is None
    end = await agent_steps(rw).run(running, runner, runner.steps[0], state, CONTEXT, None, False)
    assert isinstance(end, Done)
    (_, kwargs, current) = sends.calls[0]
    assert (kwargs["gate"], kwargs["stored_parent"], current) == (None, None, None)


async def test_a_steps_model_is_sent_as_the_turns_override() -> None:
    rw = await runner_world()
    sends = Sends(rw)
    runner = await rw.runners.create(
        WHO,
        RunnerDraft(
            name="r",
            steps=[StepDraft(id="a", kind="agent", agent_id=rw.turn.agent.id, model="local")],
        ),
    )
    run = await rw.run(runner)
    assert sends.calls[0][0][2].model_override == "local"
    assert (run.steps[0].model, run.steps[0].tokens, run.steps[0].cost_usd) == ("local", 11, 0.11)


async def test_a_step_whose_input_cannot_be_built_fails_before_its_turn() -> None:
    rw = await runner_world()
    sends = Sends(rw)
    runner = await rw.runner("agent")
    step = msgspec.structs.replace(runner.steps[0], prompt="{{ length(input.n) }}")
    state = StepRun(step_id=step.id, thread_id=rw.turn.thread.id, attempt=1)
    run = msgspec.structs.replace((await rw.runs.start(WHO, runner.id, {}))[0], status="running")
    end = await agent_steps(rw).run(run, runner, step, state, CONTEXT, None, False)
    assert isinstance(end, Failed)
    assert end.error.startswith("the step's input cannot be built: ")
    assert sends.calls == []


# --- what the turn's end comes to ---------------------------------------------------------


def test_a_turns_end_is_the_steps_end_with_what_it_spent() -> None:
    end = AgentSteps._end  # the prices are the only state it reads
    steps = AgentSteps.__new__(AgentSteps)
    steps._prices = CENT_A_TOKEN
    thread, message = uuid.uuid4(), uuid.uuid4()
    usage = UsageOut(input_tokens=10, output_tokens=5, total_tokens=15, cached_input_tokens=4)
    spent: dict[str, Any] = {"tokens": 15, "cost_usd": 0.15, "model": "m"}
    assert end(
        steps, TurnDone(ok=True, content="hi", message_id=message, usage=usage), "m", thread
    ) == Done(output=reply_output("hi", thread, message), **spent)
    assert end(
        steps, TurnDone(ok=True, content="", stopped=True, usage=usage), "m", thread
    ) == Failed(error="the agent's turn was stopped", **spent)
    assert end(steps, None, "m", thread) == Failed(
        error="the agent's turn was stopped", tokens=0, cost_usd=0.0, model="m"
    )
    assert end(
        steps, ErrorEvent(code="PROVIDER_ERROR", detail="down", usage=usage), "m", thread
    ) == Failed(error="PROVIDER_ERROR: down", **spent)
    assert end(steps, ErrorEvent(code="X"), "m", thread) == Failed(
        error="X: ", tokens=0, cost_usd=0.0, model="m"
    )
    assert end(
        steps,
        ErrorEvent(code=BUDGET_EXCEEDED, detail="the run has used 9 tokens of its 8", usage=usage),
        "m",
        thread,
    ) == OverBudget(why="the run has used 9 tokens of its 8", **spent)
    assert end(steps, ErrorEvent(code=BUDGET_EXCEEDED), "m", thread) == OverBudget(
        why="over budget", tokens=0, cost_usd=0.0, model="m"
    )


def test_cached_tokens_are_priced_as_the_table_says_and_an_unknown_model_costs_nothing() -> None:
    steps = AgentSteps.__new__(AgentSteps)
    steps._prices = PriceTable(
        [("m", Price(input=1_000_000.0, output=0.0, cached_input=0.0))], taken="2026-11-01"
    )
    usage = UsageOut(input_tokens=10, output_tokens=0, total_tokens=10, cached_input_tokens=4)
    assert steps._spent(usage, "m") == (10, 6.0)
    uncached = UsageOut(input_tokens=10, output_tokens=0, total_tokens=10)
    assert steps._spent(uncached, "m") == (10, 10.0)
    assert steps._spent(usage, "unknown") == (10, 0.0)
    assert steps._spent(None, "m") == (0, 0.0)


# --- a retried step -----------------------------------------------------------------------------


async def _interrupted(rw: RunnerWorld, **state: Any) -> tuple[RunnerRun, StepRun]:
    """A run whose agent step's earlier attempt ran its turn, then died before the
    step's end was stored (``state``: what differs of the step's state)."""
    runner = await rw.runner("agent")
    run = await rw.run(runner)
    done = run.steps[0]
    interrupted = msgspec.structs.replace(done, status="running", output=None, **state)
    again = await save_run(
        rw.turn.storage.runners,
        run,
        lambda r: msgspec.structs.replace(
            r, status="running", steps=(interrupted,), cursor=0, ended_at=None
        ),
    )
    assert isinstance(again, RunnerRun)
    return again, done


async def _retried(rw: RunnerWorld, run: RunnerRun) -> RunnerRun:
    rw.turn.clock.advance(46)
    await rw.execute(run)
    return await rw.turn.storage.runners.get_run(ORG, run.id)


async def test_a_retry_takes_the_completed_turn_of_its_earlier_attempt() -> None:
    rw = await runner_world(says("first"), spends(3))
    run, done = await _interrupted(rw)
    after = await _retried(rw, run)
    assert after.status == "succeeded", after
    assert after.steps[0].output == done.output
    assert after.steps[0].output["text"] == "first"
    assert len(rw.turn.model.requests) == 1
    assert after.steps[0].model == "local"


async def test_a_retry_whose_earlier_attempt_died_before_its_turn_asks_again() -> None:
    rw = await runner_world(says("first"), says("second"))
    run, _ = await _interrupted(rw, turn_id=None)
    after = await _retried(rw, run)
    assert after.steps[0].output["text"] == "second"
    assert len(rw.turn.model.requests) == 2


async def test_a_retry_never_takes_a_turn_that_is_not_its_own() -> None:
    rw = await runner_world(says("first"), says("second"))
    run, _ = await _interrupted(rw, turn_id=uuid.uuid4())
    after = await _retried(rw, run)
    assert after.steps[0].output["text"] == "second"


async def test_a_retry_stops_its_earlier_turn_still_counted_as_running_and_asks_again() -> None:
    rw = await runner_world(says("first"), says("second"))
    run, done = await _interrupted(rw)
    assert done.thread_id is not None
    runs = rw.turn.store.runs_of(ORG, done.thread_id)
    runs[-1] = msgspec.structs.replace(runs[-1], status="running", heartbeat_at=rw.turn.clock.now())
    # its process is gone: its heartbeat is stale by then, and the stop ends it
    after = await _retried(rw, run)
    statuses = [r.status for r in rw.turn.store.runs_of(ORG, done.thread_id)]
    assert statuses == ["interrupted", "completed"]
    assert after.steps[0].output["text"] == "second", after


@pytest.mark.parametrize("which", ["not the assistant's", "not complete", "another turn's"])
async def test_a_retry_asks_again_when_the_threads_last_message_is_not_its_reply(
    which: str,
) -> None:
    rw = await runner_world(says("first"), says("second"))
    run, done = await _interrupted(rw)
    assert done.thread_id is not None
    messages = rw.turn.store._messages[(ORG, done.thread_id)]
    last = messages[-1]
    by_case: dict[str, dict[str, Any]] = {
        "not the assistant's": {"role": "user"},
        "not complete": {"status": "interrupted"},
        "another turn's": {"run_id": uuid.uuid4()},
    }
    changed = by_case[which]
    messages[-1] = msgspec.structs.replace(last, **changed)
    after = await _retried(rw, run)
    assert after.steps[0].output["text"] == "second"


# --- from the survivors of the retry and of a cancel during the turn's start -----------------


async def test_a_retrys_step_takes_the_model_of_its_agent_when_its_state_has_none() -> None:
    rw = await runner_world(says("first"), spends(3))
    run, _ = await _interrupted(rw, model=None)
    after = await _retried(rw, run)
    assert (after.steps[0].model, after.steps[0].output["text"]) == ("local", "first")


async def test_a_retry_on_a_thread_with_no_turn_asks_again() -> None:
    rw = await runner_world(says("first"), says("second"))
    empty = await rw.turn.storage.threads.add(a_thread(ORG, rw.turn.agent.id))
    run, _ = await _interrupted(rw, thread_id=empty.id)
    after = await _retried(rw, run)
    assert after.status == "succeeded", after
    assert after.steps[0].output["text"] == "second"
    assert after.steps[0].output["thread_id"] == str(empty.id)


async def test_a_retry_sends_a_stop_to_its_earlier_turn_still_running_elsewhere() -> None:
    rw = await runner_world(says("first"), says("second"))
    run, done = await _interrupted(rw)
    assert done.thread_id is not None
    runs = rw.turn.store.runs_of(ORG, done.thread_id)
    rw.turn.clock.advance(46)
    # alive in another process: its heartbeat is fresh
    runs[-1] = msgspec.structs.replace(runs[-1], status="running", heartbeat_at=rw.turn.clock.now())
    stop = rw.turn.stops.watch(runs[-1].id)
    await rw.execute(run)
    assert stop.is_set()
    # the thread is still busy with it: the step waits, no attempt made
    after = await rw.turn.storage.runners.get_run(ORG, run.id)
    assert after.steps[0].attempt == done.attempt


async def test_a_turn_started_as_the_run_was_cancelled_is_stopped_by_the_step() -> None:
    rw = await runner_world([HANG])
    runner = await rw.runner("agent")
    run, _ = await rw.runs.start(WHO, runner.id, {})
    store = rw.turn.storage.runners
    conversation = agent_steps(rw)._conversation
    send = conversation.send

    async def cancelled_meanwhile(*args: Any, **kwargs: Any) -> Any:
        turn = await send(*args, **kwargs)
        # cancelled by a write the turn's start raced (its stop found no turn yet)
        now = await store.get_run(ORG, run.id)
        assert await store.save_run(msgspec.structs.replace(now, status="cancelled")) is not None
        return turn

    conversation.send = cancelled_meanwhile  # type: ignore[method-assign]
    async with asyncio.timeout(10):
        await rw.execute(run)
    after = await store.get_run(ORG, run.id)
    assert after.status == "cancelled"
    assert after.steps[0].error == "the agent's turn was stopped"
