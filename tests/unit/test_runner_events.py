"""A run's events (use_cases/runners/events.py): what each state change of
transitions.py tells (``run_events``, pure), and the feed that pages and follows
them (``RunFeed``) over the memory store, woken by the news of a save."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.memory.runners import MemoryRunners
from agentsvc_adapters.signals import LocalThreadNews
from agentsvc_core.entities.runner import Budget, NewRunEvent, Runner, RunnerRun
from agentsvc_core.use_cases.runners.events import FINAL, RunFeed, run_events
from agentsvc_core.use_cases.runners.runs import save_run
from agentsvc_core.use_cases.runners.transitions import (
    Done,
    Failed,
    OverBudget,
    begun,
    cancelled,
    failed_internally,
    over_budget,
    resumed,
    step_ended,
    step_failed,
    step_started,
    succeeded,
    touched,
    turn_noted,
)
from tests.unit.test_runner_transitions import NOW, PIPELINE, T0, a_run, started_at, with_state

LATER = NOW + timedelta(seconds=7)


def told(before: RunnerRun, after: Any) -> list[tuple[str, dict[str, Any], Any]]:
    assert isinstance(after, RunnerRun)
    return [(e.type, e.data, e.at) for e in run_events(before, after)]


def _ended(run: RunnerRun, index: int, end: Any, *, pause: bool = True) -> Any:
    state = run.steps[index]
    return step_ended(run, index, state, end, warning=None, pause=pause, now=LATER)


# --- what a change tells --------------------------------------------------------------


def test_a_run_begun_tells_its_start_once() -> None:
    queued = a_run("queued")
    assert told(queued, begun(queued, NOW, "trace-1", None)) == [
        ("run.started", {"trace_id": "trace-1"}, NOW)
    ]
    again = a_run("queued", started_at=T0, trace_id="trace-1")  # resumed, begun again
    assert told(again, begun(again, NOW, "trace-2", None)) == []


def test_a_step_started_tells_its_index_attempt_and_thread() -> None:
    run = a_run()
    thread = uuid.uuid4()
    _, state = started_at(run, 0, NOW)
    state = msgspec.structs.replace(state, thread_id=thread)
    after = step_started(run, 0, state, expect=run.steps[0])
    data = {"step_id": "a", "index": 0, "attempt": 1, "thread_id": str(thread)}
    assert told(run, after) == [("step.started", data, NOW)]
    # started again (a killed process's step): its second attempt
    assert isinstance(after, RunnerRun)
    _, second = started_at(after, 0, LATER)
    again = step_started(after, 0, second, expect=after.steps[0])
    assert told(after, again) == [("step.started", data | {"attempt": 2}, LATER)]
    # put back as it was (its thread busy): nothing
    assert isinstance(again, RunnerRun)
    back = step_started(again, 0, after.steps[0], expect=again.steps[0])
    assert told(again, back) == []
    # a condition (no thread)
    _, cond = started_at(run, 1, NOW)
    data = {"step_id": "c", "index": 1, "attempt": 1, "thread_id": None}
    assert told(run, step_started(run, 1, cond, expect=run.steps[1])) == [
        ("step.started", data, NOW)
    ]


def test_a_step_finished_tells_its_output_and_what_it_spent() -> None:
    thread = uuid.uuid4()
    run, _ = started_at(a_run(), 0, NOW)
    run = with_state(run, 0, thread_id=thread, tokens=3, cost_usd=0.5)
    end = Done(output={"text": "hi"}, tokens=10, cost_usd=0.25, model="m1")
    data = {
        "step_id": "a",
        "index": 0,
        "attempt": 1,
        "thread_id": str(thread),
        "output": {"text": "hi"},
        "tokens": 13,
        "cost_usd": 0.75,
        "model": "m1",
    }
    assert told(run, _ended(run, 0, end)) == [("step.finished", data, LATER)]


def test_a_condition_that_jumps_tells_the_steps_it_skipped_in_order() -> None:
    run, _ = started_at(a_run(cursor=1), 1, NOW)
    after = _ended(run, 1, Done(output={"value": True, "next": "z"}, next="z"))
    assert [(t, d["step_id"], d.get("index"), at) for t, d, at in told(run, after)] == [
        ("step.finished", "c", 1, LATER),
        ("step.skipped", "w", 2, LATER),
    ]
    assert told(run, after)[0][1]["thread_id"] is None  # a condition has no thread


def test_a_steps_events_are_dated_by_the_step_not_by_the_runs_last_write() -> None:
    # a step's start and end carry the step's own times; the run's updated_at (its
    # last write, a lease renewal say) only where the step has none
    written = NOW + timedelta(minutes=5)
    run = a_run()
    _, state = started_at(run, 0, NOW)
    after = step_started(run, 0, state, expect=run.steps[0])
    assert isinstance(after, RunnerRun)
    assert [at for _, _, at in told(run, msgspec.structs.replace(after, updated_at=written))] == [
        NOW
    ]
    undated = with_state(after, 0, started_at=None)
    assert [at for _, _, at in told(run, msgspec.structs.replace(undated, updated_at=written))] == [
        written
    ]
    begun_run, _ = started_at(a_run(), 0, NOW)
    for end in (Done(output={"text": "hi"}), Failed(error="boom")):
        ended = _ended(begun_run, 0, end, pause=False)
        assert isinstance(ended, RunnerRun)
        later = msgspec.structs.replace(ended, updated_at=written)
        assert ended.steps[0].ended_at == LATER
        assert told(begun_run, later)[0][2] == LATER
        no_end = with_state(later, 0, ended_at=None)
        assert told(begun_run, no_end)[0][2] == written


def test_a_failed_step_tells_its_error_then_the_runs_end() -> None:
    run, _ = started_at(a_run(tokens=5, cost_usd=1.0), 0, NOW)
    after = _ended(run, 0, Failed(error="boom", output={"status_code": 500}, tokens=2))
    (step, end) = told(run, after)
    assert step[0] == "step.failed"
    assert (step[1]["error"], step[1]["output"], step[1]["tokens"]) == (
        "boom",
        {"status_code": 500},
        2,
    )
    assert end == (
        "run.finished",
        {
            "status": "failed",
            "output": None,
            "error": "step 'a': boom",
            "tokens": 7,
            "cost_usd": 1.0,
        },
        LATER,
    )
    # failed before it started (its agent gone): the step's error, the run's end
    failed = step_failed(a_run(), 0, "no agent", LATER)
    types = [(t, d.get("error")) for t, d, _ in told(a_run(), failed)]
    assert types == [("step.failed", "no agent"), ("run.finished", "no agent")]


def test_a_budget_pause_resume_cancel_and_end_are_told() -> None:
    run, _ = started_at(a_run(tokens=9, cost_usd=2.0), 0, NOW)
    paused = _ended(run, 0, OverBudget(why="over", tokens=1))
    assert told(run, paused) == [
        (
            "run.paused",
            {
                "reason": "budget",
                "error": "over",
                "tokens": 10,
                "cost_usd": 2.0,
                "budget_warning": None,
            },
            LATER,
        )
    ]
    before = a_run()
    stopped = over_budget(before, 0, "daily", "90%", pause=True, now=LATER)
    assert told(before, stopped)[0][1]["budget_warning"] == "90%"
    assert isinstance(paused, RunnerRun)
    back = resumed(paused, 1.5, 100, LATER)
    extra = {"budget_extra_usd": 1.5, "budget_extra_tokens": 100}
    assert told(paused, back) == [("run.resumed", extra, LATER)]
    for status in ("queued", "running", "paused"):
        active = a_run(status, tokens=4, cost_usd=0.5)
        assert told(active, cancelled(active, LATER)) == [
            ("run.cancelled", {"status": "cancelled", "tokens": 4, "cost_usd": 0.5}, LATER)
        ]
    done = a_run(output={"text": "fin"}, cursor=4)
    assert told(done, succeeded(done, LATER)) == [
        (
            "run.finished",
            {
                "status": "succeeded",
                "output": {"text": "fin"},
                "error": None,
                "tokens": 0,
                "cost_usd": 0.0,
            },
            LATER,
        )
    ]
    broken = failed_internally(a_run(), LATER)
    assert [(t, d["status"]) for t, d, _ in told(a_run(), broken)] == [("run.finished", "failed")]
    failed = over_budget(a_run(), 0, "over", None, pause=False, now=LATER)
    assert [(t, d["error"]) for t, d, _ in told(a_run(), failed)] == [("run.finished", "over")]


def test_nothing_is_told_once_the_run_has_ended_nor_of_a_lease_or_a_turn() -> None:
    run, state = started_at(a_run(), 0, NOW)
    gone = cancelled(run, LATER)
    assert isinstance(gone, RunnerRun)
    # the step in flight ends after the cancel: in the run, not in its events
    assert told(gone, _ended(gone, 0, Done(output="late"))) == []
    assert told(run, touched(run, LATER)) == []
    assert told(run, turn_noted(run, 0, state, uuid.uuid4())) == []
    assert told(run, run) == []


# --- the feed ---------------------------------------------------------------------------


class Feed:
    def __init__(self, poll_s: float = 0.05) -> None:
        self.store = MemoryRunners(lambda o, a: True, lambda o, p: True)
        self.news = LocalThreadNews()
        self.heard: list[uuid.UUID] = []
        self.news.on_news(self.heard.append)
        self.feed = RunFeed(self.store, self.news, poll_s=poll_s)

    async def run(self) -> RunnerRun:
        runner = Runner(
            id=uuid.uuid4(),
            org_id="org-t",
            name="r",
            description="",
            input_schema={},
            steps=PIPELINE,
            skills=(),
            budget=Budget(),
            created_at=T0,
            updated_at=T0,
        )
        await self.store.add(runner)
        run = a_run("queued", runner_id=runner.id)
        await self.store.add_run(run)
        return run

    async def change(self, run_id: uuid.UUID, change: Any) -> RunnerRun:
        run = await self.store.get_run("org-t", run_id)
        saved = await save_run(self.store, run, change, self.news)
        assert isinstance(saved, RunnerRun)
        return saved


async def _collect(feed: Any, into: list[Any]) -> None:
    async for batch in feed:
        into.append(batch if batch is None else [(e.seq, e.type) for e in batch])  # noqa: PERF401


@pytest.mark.anyio
async def test_a_follower_gets_each_change_as_it_is_saved_and_ends_with_the_run() -> None:
    f = Feed(poll_s=30)  # only the news wakes the follower in time
    run = await f.run()
    got: list[Any] = []
    follower = asyncio.create_task(_collect(f.feed.follow("org-t", run.id, 0, 60), got))
    await asyncio.sleep(0.01)
    assert got == []
    await f.change(run.id, lambda r: begun(r, NOW, "t", None))
    await asyncio.sleep(0.01)
    saved = await f.change(run.id, lambda r: touched(r, NOW))  # no event: no news
    assert f.heard == [run.id]
    _, state = started_at(saved, 0, NOW)
    await f.change(run.id, lambda r: step_started(r, 0, state, expect=r.steps[0]))
    await asyncio.sleep(0.01)  # woken by the news, before its next poll
    assert got == [[(1, "run.started")], [(2, "step.started")]]
    await f.change(run.id, lambda r: cancelled(r, LATER))
    await asyncio.wait_for(follower, 1)
    assert got[-1] == [(3, "run.cancelled")]
    assert "run.cancelled" in FINAL
    assert f.feed._followers._waiters == {}
    # re-attached after its last event, or from the start: what is left, then the end
    again: list[Any] = []
    await asyncio.wait_for(_collect(f.feed.follow("org-t", run.id, 3, 60), again), 1)
    assert again == []
    await asyncio.wait_for(_collect(f.feed.follow("org-t", run.id, 1, 60), again), 1)
    assert again == [[(2, "step.started"), (3, "run.cancelled")]]


@pytest.mark.anyio
async def test_a_quiet_run_sends_keep_alives_and_an_ended_run_without_events_ends() -> None:
    f = Feed()
    run = await f.run()
    got: list[Any] = []
    follower = asyncio.create_task(_collect(f.feed.follow("org-t", run.id, 0, 0.1), got))
    await asyncio.sleep(0.35)
    assert got[:2] == [None, None]
    assert all(b is None for b in got)
    follower.cancel()
    with pytest.raises(asyncio.CancelledError):
        await follower
    assert f.feed._followers._waiters == {}
    # an ended run whose events are all sent (or that has none): the end at once
    stored = await f.store.get_run("org-t", run.id)
    assert await f.store.save_run(msgspec.structs.replace(stored, status="succeeded")) is not None
    ended: list[Any] = []
    await asyncio.wait_for(_collect(f.feed.follow("org-t", run.id, 0, 60), ended), 1)
    assert ended == []
    # a run that is gone (or another organization's): the end at once
    await asyncio.wait_for(_collect(f.feed.follow("org-x", run.id, 0, 60), ended), 1)
    assert ended == []


@pytest.mark.anyio
async def test_a_run_that_ends_between_the_reads_still_gives_its_last_events() -> None:
    f = Feed()
    run = await f.run()
    real = f.store.get_run

    async def ending_meanwhile(org: str, run_id: uuid.UUID) -> RunnerRun:
        # the run ends (its events stored) just after the follower found none
        f.store.get_run = real  # type: ignore[method-assign]
        current = await real(org, run_id)
        ev = [NewRunEvent("run.cancelled", {"status": "cancelled"}, LATER)]
        await f.store.save_run(msgspec.structs.replace(current, status="cancelled"), ev)
        return await real(org, run_id)

    f.store.get_run = ending_meanwhile  # type: ignore[method-assign,assignment]
    got: list[Any] = []
    await asyncio.wait_for(_collect(f.feed.follow("org-t", run.id, 0, 60), got), 1)
    assert got == [[(1, "run.cancelled")]]


@pytest.mark.anyio
async def test_a_follower_ends_on_the_last_event_and_reads_a_hundred_at_a_time() -> None:
    f = Feed(poll_s=30)  # nothing but the events can end it in time
    run = await f.run()
    stored = await f.store.get_run("org-t", run.id)
    many = [NewRunEvent("step.skipped", {"index": i}, LATER) for i in range(130)]
    last = NewRunEvent("run.cancelled", {"status": "cancelled"}, LATER)
    # the events alone, the run's row left running: the last event ends the follower
    assert await f.store.save_run(stored, [*many, last]) is not None
    got: list[Any] = []
    await asyncio.wait_for(_collect(f.feed.follow("org-t", run.id, 0, 60), got), 2)
    assert [len(b) for b in got] == [100, 31]
    assert got[-1][-1] == (131, "run.cancelled")
    assert f.feed._followers._waiters == {}


@pytest.mark.anyio
async def test_pages_say_where_the_next_one_starts() -> None:
    f = Feed()
    run = await f.run()
    await f.change(run.id, lambda r: begun(r, NOW, "t", None))
    await f.change(run.id, lambda r: cancelled(r, LATER))
    rows, next_after = await f.feed.page("org-t", run.id, after=0, limit=1)
    assert ([e.seq for e in rows], next_after) == ([1], 1)
    rows, next_after = await f.feed.page("org-t", run.id, after=1, limit=2)
    assert ([e.seq for e in rows], next_after) == ([2], None)
    rows, next_after = await f.feed.page("org-t", run.id, after=0, limit=2)
    assert ([e.seq for e in rows], next_after) == ([1, 2], 2)
