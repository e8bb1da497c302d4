"""Improvement suggestions (agentsvc_core/use_cases/suggestions.py): the model's lines
read as suggestions, what a generation tells the model about a runner's runs or an
agent's turns, and who lists, generates and dismisses them. Over the memory storage,
a scripted model and the test's clock (tests/unit/runner_world.py)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from agentsvc_adapters.memory.conversations import MemoryThreads
from agentsvc_core.entities import Principal, StoredSpan, TraceRecord, TraceSummary
from agentsvc_core.entities.runner import Runner, RunnerRun, StepRun, StepStatus, Suggestion
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied, Upstream
from agentsvc_core.ports import TextDelta
from agentsvc_core.use_cases.runners.definitions import RunnerDraft
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_core.use_cases.suggestions import (
    MAX_DETAIL,
    MAX_SUGGESTIONS,
    MAX_TITLE,
    RECENT,
    Suggestions,
    parse_suggestions,
)
from agentsvc_core.use_cases.threads import Threads
from tests.contract.test_agents_contract import agent_in
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.turn_world import ORG, WHO, says

MEMBER = Principal(org_id=ORG, method="jwt", role="member", user_id="u1")

# --- the model's answer, line by line ---------------------------------------------------


def test_each_line_is_a_title_and_a_detail_without_its_bullet() -> None:
    text = "\n".join(
        [
            "- Shorter prompt: the prompt repeats itself",
            "  * Cache the lookups:  call the tool once ",
            "• Bullet: dot",
            "1. Numbered: one",
            "12) Parenthesised: twelve",
            "",
        ]
    )
    assert parse_suggestions(text) == [
        ("Shorter prompt", "the prompt repeats itself"),
        ("Cache the lookups", "call the tool once"),
        ("Bullet", "dot"),
        ("Numbered", "one"),
        ("Parenthesised", "twelve"),
    ]


def test_bold_marks_and_spaces_around_a_title_go() -> None:
    assert parse_suggestions("**Use a smaller model**: it is enough") == [
        ("Use a smaller model", "it is enough")
    ]
    assert parse_suggestions("- ** Retry less **: the provider recovers") == [
        ("Retry less", "the provider recovers")
    ]
    assert parse_suggestions("*Starred line*") == [("Starred line", "")]
    # a line's closing mark goes from its detail too
    assert parse_suggestions("**Cap the steps**: at ten**") == [("Cap the steps", "at ten")]


def test_only_marks_and_spaces_are_stripped_not_letters() -> None:
    assert parse_suggestions("Xylophone mode: fix X") == [("Xylophone mode", "fix X")]
    assert parse_suggestions("**X-ray the tools**: first") == [("X-ray the tools", "first")]


def test_the_first_colon_splits_a_line_and_one_without_is_a_title() -> None:
    assert parse_suggestions("Time out sooner: at 5 s: not 30 s\nJust a title") == [
        ("Time out sooner", "at 5 s: not 30 s"),
        ("Just a title", ""),
    ]


def test_blank_lines_and_lines_without_a_title_are_left_out() -> None:
    assert parse_suggestions("\n   \n: a detail alone\n-  \n**: stars\nReal: one\n") == [
        ("Real", "one")
    ]
    assert parse_suggestions("") == []


def test_titles_and_details_are_cut_to_their_bounds() -> None:
    title, detail = "t" * MAX_TITLE, "d" * MAX_DETAIL
    assert parse_suggestions(f"{title}: {detail}") == [(title, detail)]
    assert parse_suggestions(f"{title}x: {detail}y") == [(title, detail)]
    assert (MAX_TITLE, MAX_DETAIL) == (200, 2000)


def test_at_most_five_are_kept_the_first_ones() -> None:
    text = "\n".join(f"t{i}: d{i}" for i in range(9))
    assert parse_suggestions(text) == [(f"t{i}", f"d{i}") for i in range(5)]
    assert MAX_SUGGESTIONS == 5
    # lines left out do not count towards the five
    text = "\n".join(["", ": none", *(f"t{i}: d" for i in range(5))])
    assert [t for t, _ in parse_suggestions(text)] == [f"t{i}" for i in range(5)]


# --- the world ----------------------------------------------------------------------------


class World:
    def __init__(self, rw: RunnerWorld) -> None:
        s = rw.turn.storage
        self.rw = rw
        self.storage = s
        self.clock = rw.turn.clock
        threads = Threads(s.threads, s.agents, s.conversations, self.clock)
        self.suggestions = Suggestions(
            s.runners, s.agents, threads, rw.turn.conversation, s.traces, self.clock
        )
        self.agent = rw.turn.agent

    def answers(self, *lines: str) -> None:
        """What the model says to the next generations."""
        self.rw.turn.model.steps = [says("\n".join(lines))]

    def prompt(self) -> str:
        """What the model was asked last."""
        return self.rw.turn.model.requests[-1].messages[-1].content

    def facts(self) -> list[dict[str, Any]]:
        facts: list[dict[str, Any]] = json.loads(self.prompt().split("\n\n", 1)[1])
        return facts

    async def runner(self, *steps: StepDraft, name: str = "nightly") -> Runner:
        steps = steps or (StepDraft(id="ask", kind="agent", agent_id=self.agent.id, prompt="go"),)
        return await self.rw.runners.create(WHO, RunnerDraft(name=name, steps=list(steps)))

    async def asked_threads(self) -> list[Any]:
        threads = self.storage.threads
        assert isinstance(threads, MemoryThreads)
        return [t for t in threads.all() if t.metadata.get("purpose") == "suggestions"]


async def a_world() -> World:
    w = World(await runner_world())
    w.answers("First: one", "Second: two")
    return w


def a_run(runner: Runner, **over: Any) -> RunnerRun:
    at = over.pop("created_at")
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "org_id": ORG,
        "runner_id": runner.id,
        "agent_id": None,
        "trigger_id": None,
        "trigger_kind": "api",
        "status": "succeeded",
        "input": {},
        "pipeline": (),
        "steps": (),
        "created_at": at,
        "updated_at": at,
    }
    return RunnerRun(**(values | over))


def a_step(step_id: str, status: StepStatus, **over: Any) -> StepRun:
    return StepRun(step_id=step_id, status=status, **over)


# --- generating --------------------------------------------------------------------------


async def test_a_runners_suggestions_come_from_its_runs() -> None:
    w = await a_world()
    runner = await w.runner(name="nightly")
    t0 = w.clock.now()
    runs = [
        a_run(
            runner,
            created_at=t0,
            started_at=t0 + timedelta(seconds=2),
            ended_at=t0 + timedelta(seconds=14, milliseconds=250),
            status="failed",
            error="STEP_FAILED",
            tokens=120,
            cost_usd=0.5,
            trigger_kind="cron",
            steps=(
                a_step("ask", "succeeded", tokens=100),
                a_step("hook", "failed", error="timeout"),
                a_step("later", "pending"),
            ),
        ),
        # never started: its time counts from its creation
        a_run(
            runner,
            created_at=t0 + timedelta(minutes=1),
            ended_at=t0 + timedelta(minutes=1, seconds=3),
        ),
        a_run(runner, created_at=t0 + timedelta(minutes=2), status="running"),  # not ended
    ]
    for r in runs:
        await w.storage.runners.add_run(r)
    w.clock.advance(3600)
    made = await w.suggestions.generate(WHO, runner_id=runner.id)

    assert [(s.title, s.detail) for s in made] == [("First", "one"), ("Second", "two")]
    now = w.clock.now()
    for s in made:
        assert (s.org_id, s.runner_id, s.agent_id, s.dismissed) == (ORG, runner.id, None, False)
        assert s.created_at == s.updated_at == now
    assert await w.suggestions.page(WHO, runner_id=runner.id) == sorted(
        made, key=lambda s: (s.created_at, s.id), reverse=True
    )
    prompt = w.prompt()
    assert prompt.startswith(
        "You review how an AI agent pipeline ('nightly') has been doing. Below are its 3"
        " most recent runs as JSON"
    )
    assert "Suggest at most 5 concrete improvements" in prompt
    assert w.facts() == [
        {
            "status": "running",
            "error": None,
            "trigger": "api",
            "tokens": 0,
            "cost_usd": 0.0,
            "seconds": None,
            "steps": [],
        },
        {
            "status": "succeeded",
            "error": None,
            "trigger": "api",
            "tokens": 0,
            "cost_usd": 0.0,
            "seconds": 3.0,
            "steps": [],
        },
        {
            "status": "failed",
            "error": "STEP_FAILED",
            "trigger": "cron",
            "tokens": 120,
            "cost_usd": 0.5,
            "seconds": 12.2,
            "steps": [
                {"id": "ask", "status": "succeeded", "error": None, "tokens": 100},
                {"id": "hook", "status": "failed", "error": "timeout", "tokens": 0},
            ],
        },
    ]


async def test_a_generation_reads_the_twenty_latest_runs() -> None:
    w = await a_world()
    runner = await w.runner()
    t0 = w.clock.now()
    for i in range(RECENT + 1):
        await w.storage.runners.add_run(
            a_run(runner, created_at=t0 + timedelta(minutes=i), tokens=i)
        )
    await w.suggestions.generate(WHO, runner_id=runner.id)
    assert RECENT == 20
    assert [f["tokens"] for f in w.facts()] == list(range(RECENT, 0, -1))
    assert "its 20 most recent runs" in w.prompt()


async def test_the_model_asked_is_the_first_agent_steps_on_a_thread_of_its_own() -> None:
    w = await a_world()
    second = agent_in(ORG, default_model="local")
    await w.storage.agents.add(second)
    runner = await w.runner(
        StepDraft(id="check", kind="condition", expression="`true`", if_true="next"),
        StepDraft(id="first", kind="agent", agent_id=second.id, prompt="go"),
        StepDraft(id="then", kind="agent", agent_id=w.agent.id, prompt="go"),
    )
    await w.suggestions.generate(WHO, runner_id=runner.id)
    [thread] = await w.asked_threads()
    assert thread.agent_id == second.id
    assert thread.title == f"suggestions {w.clock.now().date().isoformat()}"
    assert thread.metadata == {"purpose": "suggestions", "runner_id": str(runner.id)}


async def test_a_runner_without_an_agent_step_has_no_model_to_ask() -> None:
    w = await a_world()
    runner = await w.runner(
        StepDraft(id="check", kind="condition", expression="`true`", if_true="next")
    )
    with pytest.raises(InvalidInput) as caught:
        await w.suggestions.generate(WHO, runner_id=runner.id)
    assert (caught.value.field, caught.value.problem) == (
        "steps",
        "the runner has no agent step whose model to ask",
    )
    assert w.rw.turn.model.requests == []


def a_trace(agent_id: UUID, at: Any, kind: str = "agent_turn", **over: Any) -> TraceRecord:
    values: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "org_id": ORG,
        "kind": kind,
        "name": "agent",
        "status": "ok",
        "run_status": "completed",
        "started_at": at,
        "ended_at": at,
        "duration_ms": 1500,
        "agent_id": agent_id,
    }
    summary = TraceSummary(**(values | over))
    span = StoredSpan(
        span_id=uuid.uuid4().hex[:16],
        parent_span_id=None,
        name="invoke_agent agent",
        kind="agent",
        status="ok",
        started_at=at,
        duration_ms=1500.0,
    )
    return TraceRecord(
        summary=summary,
        root_span_id=span.span_id,
        spans=[span],
        evaluations=[],
        keep_until=at + timedelta(days=1),
    )


async def test_an_agents_suggestions_come_from_its_turns_traces() -> None:
    w = await a_world()
    t0 = w.clock.now()
    other = agent_in(ORG, default_model="local")
    await w.storage.agents.add(other)
    await w.storage.traces.add_trace(
        a_trace(
            w.agent.id,
            t0,
            status="error",
            run_status="failed",
            error="PROVIDER_ERROR",
            model="local",
            model_calls=2,
            tool_calls=3,
            tool_errors=1,
            input_tokens=40,
            output_tokens=2,
            cost_usd=0.25,
            first_token_ms=900,
        )
    )
    await w.storage.traces.add_trace(
        a_trace(w.agent.id, t0 + timedelta(minutes=1), run_status=None)
    )
    await w.storage.traces.add_trace(
        a_trace(w.agent.id, t0 + timedelta(minutes=2), kind="runner_run")
    )
    await w.storage.traces.add_trace(a_trace(other.id, t0 + timedelta(minutes=3)))
    made = await w.suggestions.generate(WHO, agent_id=w.agent.id)
    assert [(s.runner_id, s.agent_id) for s in made] == [(None, w.agent.id)] * 2
    assert w.prompt().startswith(
        f"You review how an AI agent ({w.agent.name!r}) has been doing. Below are its 2 most"
        " recent turns as JSON"
    )
    common = {"model": None, "model_calls": 0, "tool_calls": 0, "tool_errors": 0}
    assert w.facts() == [
        {
            "status": "ok",  # no run status: the trace's
            "error": None,
            **common,
            "tokens": 0,
            "cost_usd": None,
            "ms": 1500,
            "first_token_ms": None,
        },
        {
            "status": "failed",
            "error": "PROVIDER_ERROR",
            "model": "local",
            "model_calls": 2,
            "tool_calls": 3,
            "tool_errors": 1,
            "tokens": 42,
            "cost_usd": 0.25,
            "ms": 1500,
            "first_token_ms": 900,
        },
    ]
    [thread] = await w.asked_threads()
    assert (thread.agent_id, thread.metadata) == (w.agent.id, {"purpose": "suggestions"})


async def test_a_generation_reads_the_agents_twenty_latest_traces() -> None:
    w = await a_world()
    t0 = w.clock.now()
    for i in range(RECENT + 1):
        await w.storage.traces.add_trace(
            a_trace(w.agent.id, t0 + timedelta(minutes=i), model_calls=i)
        )
    await w.suggestions.generate(WHO, agent_id=w.agent.id)
    assert [f["model_calls"] for f in w.facts()] == list(range(RECENT, 0, -1))


async def test_a_model_that_fails_is_an_upstream_error_and_nothing_is_stored() -> None:
    w = await a_world()
    w.rw.turn.model.steps = [[Upstream("the provider is down", code="PROVIDER_ERROR")]]
    with pytest.raises(Upstream) as caught:
        await w.suggestions.generate(WHO, agent_id=w.agent.id)
    assert str(caught.value).startswith("the model could not answer: ")
    assert "the provider is down" in str(caught.value)
    assert await w.suggestions.page(WHO, agent_id=w.agent.id) == []


async def test_an_answer_without_a_suggestion_stores_none() -> None:
    w = await a_world()
    w.rw.turn.model.steps = [[TextDelta("   ")]]
    assert await w.suggestions.generate(WHO, agent_id=w.agent.id) == []
    assert await w.suggestions.page(WHO, agent_id=w.agent.id) == []


# --- who may do what ------------------------------------------------------------------


async def test_members_list_but_neither_generate_nor_dismiss() -> None:
    w = await a_world()
    [first, _] = await w.suggestions.generate(WHO, agent_id=w.agent.id)
    assert len(await w.suggestions.page(MEMBER, agent_id=w.agent.id)) == 2
    with pytest.raises(PermissionDenied) as refused:
        await w.suggestions.generate(MEMBER, agent_id=w.agent.id)
    assert str(refused.value) == "suggestions are generated by the organization's admins"
    with pytest.raises(PermissionDenied) as refused:
        await w.suggestions.set_dismissed(MEMBER, first.id, True, agent_id=w.agent.id)
    assert str(refused.value) == "suggestions are managed by the organization's admins"
    admin = Principal(org_id=ORG, method="jwt", role="admin", user_id="u2")
    assert (await w.suggestions.set_dismissed(admin, first.id, True, agent_id=w.agent.id)).dismissed


async def test_an_unknown_owner_has_no_suggestions() -> None:
    w = await a_world()
    unknown = uuid.uuid4()
    # the owner is looked for first: its absence is what the answer says
    s = w.suggestions
    for call, missing in (
        (s.page(WHO, runner_id=unknown), "runner not found"),
        (s.generate(WHO, runner_id=unknown), "runner not found"),
        (s.set_dismissed(WHO, uuid.uuid4(), True, runner_id=unknown), "runner not found"),
        (s.page(WHO, agent_id=unknown), "agent not found"),
        (s.generate(WHO, agent_id=unknown), "agent not found"),
        (s.set_dismissed(WHO, uuid.uuid4(), True, agent_id=unknown), "agent not found"),
    ):
        with pytest.raises(NotFound) as caught:
            await call
        assert str(caught.value) == missing
    elsewhere = Principal(org_id="another-org", method="api_key")
    with pytest.raises(NotFound):
        await w.suggestions.page(elsewhere, agent_id=w.agent.id)


# --- listing and dismissing --------------------------------------------------------------


async def test_a_suggestion_is_dismissed_and_brought_back_under_its_owner_only() -> None:
    w = await a_world()
    runner = await w.runner()
    of_runner = await w.suggestions.generate(WHO, runner_id=runner.id)
    of_agent = await w.suggestions.generate(WHO, agent_id=w.agent.id)
    w.clock.advance(30)
    target = of_runner[0]
    for call in (
        w.suggestions.set_dismissed(WHO, target.id, True, agent_id=w.agent.id),
        w.suggestions.set_dismissed(WHO, of_agent[0].id, True, runner_id=runner.id),
    ):
        with pytest.raises(NotFound) as caught:
            await call
        assert str(caught.value) == "suggestion not found"
    gone = await w.suggestions.set_dismissed(WHO, target.id, True, runner_id=runner.id)
    assert (gone.id, gone.dismissed, gone.updated_at) == (target.id, True, w.clock.now())
    assert gone.created_at == target.created_at

    def ids(found: list[Suggestion]) -> set[UUID]:
        return {s.id for s in found}

    page = w.suggestions.page
    assert ids(await page(WHO, runner_id=runner.id, dismissed=True)) == {target.id}
    assert ids(await page(WHO, runner_id=runner.id, dismissed=False)) == {of_runner[1].id}
    assert ids(await page(WHO, runner_id=runner.id)) == ids(of_runner)
    assert ids(await page(WHO, agent_id=w.agent.id)) == ids(of_agent)
    back = await w.suggestions.set_dismissed(WHO, target.id, False, runner_id=runner.id)
    assert back.dismissed is False
    assert await page(WHO, runner_id=runner.id, dismissed=True) == []


async def test_suggestions_come_by_pages_newest_first() -> None:
    w = await a_world()
    made: list[Suggestion] = []
    for _ in range(3):
        made += await w.suggestions.generate(WHO, agent_id=w.agent.id)
        w.clock.advance(60)
    newest = sorted(made, key=lambda s: (s.created_at, s.id), reverse=True)
    first = await w.suggestions.page(WHO, agent_id=w.agent.id, limit=4)
    assert first == newest[:4]
    last = first[-1]
    rest = await w.suggestions.page(
        WHO, agent_id=w.agent.id, before=(last.created_at, last.id), limit=50
    )
    assert rest == newest[4:]
    assert await w.suggestions.page(WHO, agent_id=w.agent.id) == newest  # 50 by default


async def test_a_suggestion_past_the_first_page_is_still_dismissed() -> None:
    """The check that a suggestion is the owner's reads all of them, not one page."""
    w = await a_world()
    w.answers(*(f"t{i}: d" for i in range(5)))
    made: list[Suggestion] = []
    for _ in range(12):
        made += await w.suggestions.generate(WHO, agent_id=w.agent.id)
        w.clock.advance(1)
    oldest = min(made, key=lambda s: (s.created_at, s.id))
    assert len(made) == 60
    gone = await w.suggestions.set_dismissed(WHO, oldest.id, True, agent_id=w.agent.id)
    assert gone.dismissed
    # a page is 50 unless asked otherwise
    assert len(await w.suggestions.page(WHO, agent_id=w.agent.id)) == 50


async def test_a_runners_generation_reads_its_own_runs_only() -> None:
    w = await a_world()
    mine, theirs = await w.runner(name="mine"), await w.runner(name="theirs")
    t0 = w.clock.now()
    await w.storage.runners.add_run(a_run(mine, created_at=t0, tokens=1))
    await w.storage.runners.add_run(a_run(theirs, created_at=t0 + timedelta(seconds=1), tokens=2))
    await w.suggestions.generate(WHO, runner_id=mine.id)
    assert [f["tokens"] for f in w.facts()] == [1]
