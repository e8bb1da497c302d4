"""Runs of runners through the composed services (the job queue's worker, the
turn with the ``local`` model): steps in order, conditions that branch or stop,
budgets that pause and resume that continues, cancel, idempotency keys, and the
cron scheduler taking a tick once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Organization, Principal
from agentsvc_core.entities.runner import RunnerRun, Trigger
from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases.agents import AgentDraft
from agentsvc_core.use_cases.runners.definitions import BudgetChanges, RunnerDraft
from agentsvc_core.use_cases.runners.runs import RunNotPaused, job_payload
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_core.use_cases.runners.triggers import TriggerDraft, next_tick
from agentsvc_core.use_cases.scheduled_tasks import TaskDraft
from agentsvc_core.use_cases.suggestions import parse_suggestions
from agentsvc_core.use_cases.threads import ThreadDraft
from agentsvc_core.use_cases.turn.send_input import SendInput
from agentsvc_web.bootstrap import Services, build_services
from agentsvc_web.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "postgres"])
def database(request: pytest.FixtureRequest) -> str | None:
    """None: memory storage; else a database of this module's own (its worker takes
    any queued job of its database: on the shared one, other tests' too)."""
    return request.getfixturevalue("own_pg_url") if request.param == "postgres" else None


@asynccontextmanager
async def _services(database: str | None) -> AsyncIterator[Services]:
    own: dict[str, Any] = {}
    if database is not None:
        own["database_url"] = database
    settings = Settings(
        storage="memory" if database is None else "postgres",
        worker=True,
        cron_min_interval_s=1,
        scheduler_tick_ms=100,
        local_slow_delay_ms=40,  # "slowly": a word each 40 ms, a reply of a second or two
        **own,
    )
    services = build_services(settings)
    async with services.running():
        yield services


async def _until_ended(s: Services, who: Principal, run: RunnerRun, *statuses: str) -> RunnerRun:
    wanted = statuses or ("succeeded", "failed", "cancelled")
    return await _until(s, who, run, lambda r: r.status in wanted)


async def _run_trace(s: Services, who: Principal, trace_id: str) -> tuple[Any, Any]:
    """The run's trace once its own record is stored (its turns' come first)."""
    for _ in range(1200):  # 30 s
        summary, spans, _ = await s.traces.get(who, trace_id)
        if summary.kind == "runner_run":
            return summary, spans
        await asyncio.sleep(0.025)
    raise AssertionError(f"no runner_run record under trace {trace_id}: {summary}")


async def _until(
    s: Services, who: Principal, run: RunnerRun, done: Callable[[RunnerRun], bool]
) -> RunnerRun:
    """The run once ``done`` says so of it (asked again and again, for 30 s)."""
    for _ in range(1200):
        got = await s.runner_runs.get(who, run.runner_id or uuid.uuid4(), run.id)
        if done(got):
            return got
        await asyncio.sleep(0.025)
    raise AssertionError(f"run still {got.status}: {got}")


async def _who(s: Services) -> Principal:
    org = f"runners-{uuid.uuid4().hex[:10]}"
    await s.storage.organizations.ensure(Organization(id=org, created_at=datetime.now(UTC)))
    return Principal(org_id=org, method="api_key")


async def _runner(s: Services, who: Principal, steps: list[StepDraft]) -> Any:
    return await s.runners.create(
        who,
        RunnerDraft(
            name="triage",
            input_schema={
                "type": "object",
                "properties": {"topic": {"type": "string"}},
                "required": ["topic"],
            },
            steps=steps,
        ),
    )


async def test_steps_run_in_order_and_a_condition_branches(database: str | None) -> None:
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="writer", default_model="local"))
        runner = await _runner(
            s,
            who,
            [
                StepDraft(
                    id="draft",
                    kind="agent",
                    agent_id=agent.id,
                    prompt="Write about {{ input.topic }}",
                ),
                StepDraft(
                    id="check",
                    kind="condition",
                    expression="contains(steps.draft.output.text, 'otters')",
                    if_true="summary",
                    if_false="stop",
                ),
                StepDraft(id="skipped", kind="agent", agent_id=agent.id, prompt="never"),
                StepDraft(
                    id="summary",
                    kind="agent",
                    agent_id=agent.id,
                    input_mapping={"t": "$.input.topic"},
                ),
            ],
        )
        run, created = await s.runner_runs.start(who, runner.id, {"topic": "otters"}, "key-1")
        assert created
        assert run.status == "queued"
        assert run.trigger_kind == "api"
        done = await _until_ended(s, who, run)
        assert done.status == "succeeded", done
        states = {st.step_id: st for st in done.steps}
        assert [states[i].status for i in ("draft", "check", "skipped", "summary")] == [
            "succeeded",
            "succeeded",
            "skipped",
            "succeeded",
        ]
        # the local model repeats what it was sent: the prompt was filled in
        assert "Write about otters" in states["draft"].output["text"]
        assert states["check"].output == {"value": True, "next": "summary"}
        assert '{"t":"otters"}' in states["summary"].output["text"]
        assert done.output == states["summary"].output
        assert done.tokens == sum(st.tokens for st in done.steps) > 0
        # each agent step had a thread of its own, named after the run
        assert states["draft"].thread_id != states["summary"].thread_id
        # one trace: the run's span, a span per step that ran, and the agent steps'
        # turns under their step's span
        assert done.trace_id is not None
        # the job records the run's trace just after its last write
        summary, spans = await _run_trace(s, who, done.trace_id)
        assert (summary.kind, summary.name, summary.runner_id, summary.run_id) == (
            "runner_run",
            "triage",
            runner.id,
            run.id,
        )
        by_name = {sp.name: sp for sp in spans}
        root = by_name["runner_run triage"]
        assert [by_name[f"step {i}"].kind for i in ("draft", "check", "summary")] == [
            "runner_step",
            "condition",
            "runner_step",
        ]
        assert "step skipped" not in by_name
        assert all(by_name[f"step {i}"].parent_span_id == root.span_id for i in ("draft", "check"))
        turns = [sp for sp in spans if sp.name == "invoke_agent writer"]
        assert sorted(t.parent_span_id or "" for t in turns) == sorted(
            [by_name["step draft"].span_id, by_name["step summary"].span_id]
        )
        # the same idempotency key: the same run, nothing new
        again, created = await s.runner_runs.start(who, runner.id, {"topic": "x"}, "key-1")
        assert (again.id, created) == (run.id, False)

        # analytics: from the runs' rows
        report = await s.runner_analytics.report(who, runner.id, "7d")
        assert (report.totals.runs, report.totals.succeeded, report.totals.success_rate) == (
            1,
            1,
            1.0,
        )
        assert report.totals.tokens == done.tokens
        assert len(report.series) == 8  # the period's days, zero-filled
        assert sum(d.runs for d in report.series) == 1
        assert [(m.model, m.steps, m.tokens) for m in report.by_model] == [
            ("local", 2, done.tokens)
        ]
        # the condition's other way stops the run after it
        run2, _ = await s.runner_runs.start(who, runner.id, {"topic": "badgers"})
        done2 = await _until_ended(s, who, run2)
        assert done2.status == "succeeded"
        # a condition that stops skips the rest
        assert [st.status for st in done2.steps] == ["succeeded", "succeeded", "skipped", "skipped"]
        assert done2.output == done2.steps[0].output


async def test_a_budget_pauses_the_run_and_resume_finishes_it(database: str | None) -> None:
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="writer", default_model="local"))
        runner = await _runner(
            s,
            who,
            [
                StepDraft(
                    id="one", kind="agent", agent_id=agent.id, prompt="first {{input.topic}}"
                ),
                StepDraft(id="two", kind="agent", agent_id=agent.id, prompt="second"),
            ],
        )
        await s.runners.set_budget(who, runner.id, BudgetChanges(max_tokens_per_run=1))
        run, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        paused = await _until_ended(s, who, run, "paused", "failed", "succeeded")
        # the first step's model call fits (nothing spent yet); the second may not start
        assert (paused.status, paused.paused_reason) == ("paused", "budget"), paused
        assert [st.status for st in paused.steps] == ["succeeded", "pending"]
        assert paused.error == f"the run has used {paused.tokens} tokens of its 1"
        # the share actually used, stored with the run
        assert paused.budget_warning == f"{paused.tokens * 100}% of max_tokens_per_run used"
        resumed = await s.runner_runs.resume(who, runner.id, run.id, raise_tokens=100_000)
        assert resumed.status == "queued"
        assert resumed.budget_extra_tokens == 100_000
        done = await _until_ended(s, who, run)
        assert done.status == "succeeded", done
        assert [st.status for st in done.steps] == ["succeeded", "succeeded"]
        assert done.budget_warning is None  # far under the raised limit
        with pytest.raises(RunNotPaused):
            await s.runner_runs.resume(who, runner.id, run.id)

        # a daily limit: what the runner's runs spent today, reached at equality
        await s.runners.set_budget(
            who, runner.id, BudgetChanges(max_tokens_per_run=None, daily_tokens=done.tokens)
        )
        run2, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        at_limit = await _until_ended(s, who, run2, "paused", "failed", "succeeded")
        assert at_limit.status == "paused", at_limit
        assert at_limit.error == f"the runner has used {done.tokens} tokens today of {done.tokens}"
        assert [st.status for st in at_limit.steps] == ["pending", "pending"]
        # one token under the limit: the first step runs, and crosses it
        await s.runners.set_budget(who, runner.id, BudgetChanges(daily_tokens=done.tokens + 1))
        await s.runner_runs.resume(who, runner.id, run2.id)
        crossed = await _until_ended(s, who, run2, "paused", "failed", "succeeded")
        assert crossed.status == "paused", crossed
        assert [st.status for st in crossed.steps] == ["succeeded", "pending"]
        today = done.tokens + crossed.tokens
        assert crossed.error == f"the runner has used {today} tokens today of {done.tokens + 1}"
        share = today * 100 // (done.tokens + 1)
        assert crossed.budget_warning == f"{share}% of daily_tokens used"


async def test_cancel_stops_a_run_between_and_during_steps(database: str | None) -> None:
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="writer", default_model="local"))
        runner = await _runner(
            s,
            who,
            [
                # "slowly": the local model streams a word every 0.2 s
                StepDraft(id="long", kind="agent", agent_id=agent.id, prompt="slowly " * 30),
                StepDraft(id="after", kind="agent", agent_id=agent.id, prompt="never"),
            ],
        )
        run, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        await _until_ended(s, who, run, "running")
        for _ in range(200):
            got = await s.runner_runs.get(who, runner.id, run.id)
            if got.steps[0].thread_id is not None:
                break
            await asyncio.sleep(0.02)
        cancelled = await s.runner_runs.cancel(who, runner.id, run.id)
        assert cancelled.status == "cancelled"
        # the job writes the stopped step's end (what it spent), then stops
        final = await _until(s, who, run, lambda r: r.steps[0].status != "running")
        assert final.status == "cancelled"
        assert final.steps[1].status == "pending"  # the next step never started


async def _due_now(s: Services, trigger: Trigger) -> datetime:
    """Make the trigger's next tick due now (its schedule is tested with a clock
    the test moves: tests/unit/test_runner_jobs.py): the tick."""
    tick = datetime.now(UTC).replace(microsecond=0)
    await s.storage.runners.replace_trigger(msgspec.structs.replace(trigger, next_fire_at=tick))
    return tick


async def test_a_due_cron_tick_runs_once_with_a_second_scheduler_racing(
    database: str | None,
) -> None:
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="writer", default_model="local"))
        runner = await _runner(
            s, who, [StepDraft(id="one", kind="agent", agent_id=agent.id, prompt="tick")]
        )
        trigger, token = await s.runners.add_trigger(
            who,
            runner.id,
            TriggerDraft(
                kind="cron", cron="0 9 * * *", timezone="Europe/Paris", input={"topic": "c"}
            ),
        )
        assert token is None
        assert trigger.next_fire_at is not None
        tick = await _due_now(s, trigger)
        # the service's own scheduler and this one race for the tick: one run
        mine = await s.runner_runs.fire_due()
        runs: list[RunnerRun] = []
        for _ in range(1200):  # 30 s
            runs = await s.runner_runs.runs(who, runner.id, status=None, before=None, limit=10)
            if runs and all(r.ended for r in runs):
                break
            await asyncio.sleep(0.025)
        assert [(r.scheduled_for, r.trigger_id, r.trigger_kind) for r in runs] == [
            (tick, trigger.id, "cron")
        ]
        assert [r.id for r in mine] in ([], [runs[0].id])
        assert runs[0].status == "succeeded", runs[0]
        assert runs[0].input == {"topic": "c"}
        after = await s.storage.runners.get_trigger(who.org_id, trigger.id)
        assert after.last_fired_at == tick
        assert after.next_fire_at == next_tick("0 9 * * *", "Europe/Paris", tick)


async def test_suggestions_are_generated_listed_and_dismissed(database: str | None) -> None:
    """The model of the runner's first agent step (here ``local``, which answers
    with what it was sent) reads the recent runs; each ``title: detail`` line of
    its reply is a suggestion, which an admin dismisses and brings back."""
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="writer", default_model="local"))
        runner = await _runner(
            s, who, [StepDraft(id="one", kind="agent", agent_id=agent.id, prompt="x")]
        )
        run, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        await _until_ended(s, who, run)
        made = await s.suggestions.generate(who, runner_id=runner.id)
        assert made, "the local model's reply has a 'title: detail' line"
        assert all(m.runner_id == runner.id and m.agent_id is None for m in made)
        # the prompt carried the runs: the local model repeats it
        assert any("succeeded" in m.detail for m in made)
        listed = await s.suggestions.page(who, runner_id=runner.id)
        # (one generation's suggestions share their time: the order among them is by id)
        assert sorted(m.id for m in listed) == sorted(m.id for m in made)
        gone = await s.suggestions.set_dismissed(who, made[0].id, True, runner_id=runner.id)
        assert gone.dismissed
        assert made[0].id not in {
            m.id for m in await s.suggestions.page(who, runner_id=runner.id, dismissed=False)
        }
        back = await s.suggestions.set_dismissed(who, made[0].id, False, runner_id=runner.id)
        assert not back.dismissed
        # another runner's suggestion is not this one's to dismiss
        other = await _runner(
            s, who, [StepDraft(id="one", kind="agent", agent_id=agent.id, prompt="y")]
        )
        with pytest.raises(NotFound):
            await s.suggestions.set_dismissed(who, made[0].id, True, runner_id=other.id)
        # an agent's own suggestions come from its turns' traces
        for_agent = await s.suggestions.generate(who, agent_id=agent.id)
        assert for_agent
        assert all(m.agent_id == agent.id and m.runner_id is None for m in for_agent)
        assert {m.id for m in await s.suggestions.page(who, agent_id=agent.id)} == {
            m.id for m in for_agent
        }


def test_suggestion_lines_are_parsed() -> None:
    text = (
        "1. Shorter prompt: the prompt repeats itself\n\n- **Cache**: reuse results\nplain line\n"
    )
    assert parse_suggestions(text) == [
        ("Shorter prompt", "the prompt repeats itself"),
        ("Cache", "reuse results"),
        ("plain line", ""),
    ]
    assert len(parse_suggestions("\n".join(f"t{i}: d" for i in range(9)))) == 5


async def test_a_step_whose_agent_is_gone_fails_the_run(database: str | None) -> None:
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="gone", default_model="local"))
        runner = await _runner(
            s, who, [StepDraft(id="one", kind="agent", agent_id=agent.id, prompt="x")]
        )
        await s.agents.delete(who, agent.id)
        run, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        done = await _until_ended(s, who, run)
        assert done.status == "failed"
        assert done.error is not None
        assert "agent" in done.error
        assert done.steps[0].status == "failed"


async def test_a_second_job_of_a_running_step_leaves_it_alone(database: str | None) -> None:
    """A resumed run's job holds a key of its own, so the sweep may queue another
    job of the run while a long step runs: that job sees the run's lease renewed
    and leaves the step to the first, which ends it once, its tokens counted once."""
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="w", default_model="local"))
        runner = await _runner(
            s,
            who,
            [
                StepDraft(id="one", kind="agent", agent_id=agent.id, prompt="first"),
                StepDraft(id="two", kind="agent", agent_id=agent.id, prompt="slowly"),
            ],
        )
        await s.runners.set_budget(who, runner.id, BudgetChanges(max_tokens_per_run=1))
        run, _ = await s.runner_runs.start(who, runner.id, {"topic": "t"})
        await _until_ended(s, who, run, "paused")
        await s.runner_runs.resume(who, runner.id, run.id, raise_tokens=10**6)
        for _ in range(200):
            if (await s.runner_runs.get(who, runner.id, run.id)).steps[1].status == "running":
                break
            await asyncio.sleep(0.02)
        # a second job of the run (the sweep's, say), while the first runs step two
        before = await s.runner_runs.get(who, runner.id, run.id)
        await s.runner_engine.execute(job_payload(before.org_id, before.id))
        after = await s.runner_runs.get(who, runner.id, run.id)
        # left alone: still the first job's attempt
        assert (after.steps[1].attempt, after.steps[1].started_at) == (
            before.steps[1].attempt,
            before.steps[1].started_at,
        )
        done = await _until_ended(s, who, run)
        assert done.status == "succeeded", done
        assert [st.attempt for st in done.steps] == [1, 1]
        assert done.tokens == sum(st.tokens for st in done.steps)
        assert done.steps[1].thread_id is not None
        msgs, _ = await s.threads.history(who, done.steps[1].thread_id, offset=0, limit=10)
        assert [(m.role, m.status) for m in msgs] == [
            ("user", "complete"),
            ("assistant", "complete"),
        ]


async def test_a_scheduled_task_waits_for_a_users_turn_on_its_thread(
    database: str | None,
) -> None:
    """A task's thread may be a user's chat: a tick while the user's turn runs waits
    for it (no attempt counted), never stops it, and answers with its own turn."""
    async with _services(database) as s:
        who = await _who(s)
        agent = await s.agents.create(who, AgentDraft(name="w", default_model="local"))
        thread = await s.threads.create(who, ThreadDraft(agent_id=agent.id, title="chat"))
        # a word each 40 ms: the user's reply runs for a second or two
        await s.conversation.send(who, thread.id, SendInput(content="slowly " + "word " * 60))
        await s.scheduled_tasks.set_tasks(
            who,
            agent.id,
            [TaskDraft(prompt="daily report", cron="0 9 * * *", thread_id=thread.id)],
        )
        [task] = await s.storage.runners.triggers(who.org_id, agent_id=agent.id)
        await _due_now(s, task)
        runs: list[RunnerRun] = []
        for _ in range(1200):  # 30 s: the task's job tries again every 2 s meanwhile
            runs = await s.storage.runners.runs(who.org_id, agent_id=agent.id)
            if runs and all(r.ended for r in runs):
                break
            await asyncio.sleep(0.025)
        await s.scheduled_tasks.set_tasks(who, agent.id, [])
        assert runs
        assert all(r.status == "succeeded" for r in runs), runs
        assert all(r.steps[0].attempt == 1 for r in runs)
        assert all("daily report" in r.steps[0].output["text"] for r in runs)
        listed = await s.scheduled_tasks.runs(who, agent.id, before=None, limit=50)
        assert sorted(r.id for r in listed) == sorted(r.id for r in runs)
        msgs, _ = await s.threads.history(who, thread.id, offset=0, limit=50)
        assert msgs[1].role == "assistant"
        assert msgs[1].status == "complete"  # the user's turn was not stopped
