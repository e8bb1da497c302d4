"""An agent's scheduled tasks (agentsvc_core/use_cases/scheduled_tasks.py): the list
that replaces the stored one, every task checked before anything is written, who may
write them, and the runs they made. Over the memory storage and the test's clock
(tests/unit/runner_world.py)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import RunnerRun, Trigger
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.rules import MAX_CONTENT, MAX_NAME
from agentsvc_core.use_cases.scheduled_tasks import MAX_TASKS, ScheduledTasks, TaskDraft
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.turn_world import ORG, WHO


class Tasks:
    """The use case over a runner world, and what the tests read back."""

    def __init__(self, rw: RunnerWorld) -> None:
        s = rw.turn.storage
        self.rw = rw
        self.tasks = ScheduledTasks(s.runners, rw.runners, s.agents, s.threads, rw.turn.clock)
        self.agent = rw.turn.agent.id
        self.thread = rw.turn.thread.id

    async def set(self, *drafts: TaskDraft, who: Principal = WHO) -> list[Trigger]:
        return await self.tasks.set_tasks(who, self.agent, list(drafts))

    async def stored(self) -> list[Trigger]:
        return await self.rw.turn.storage.runners.triggers(ORG, agent_id=self.agent)

    async def refusal(self, *drafts: TaskDraft) -> tuple[str, str]:
        with pytest.raises(InvalidInput) as caught:
            await self.set(*drafts)
        return caught.value.field, caught.value.problem


async def tasks() -> Tasks:
    return Tasks(await runner_world())


def task(prompt: str = "report", cron: str = "0 9 * * *", **over: Any) -> TaskDraft:
    return TaskDraft(prompt=prompt, cron=cron, **over)


async def test_a_task_is_a_cron_trigger_of_the_agent_with_every_field_kept() -> None:
    t = await tasks()
    ends = t.rw.turn.clock.now() + timedelta(days=90)
    [made] = await t.set(
        task(
            "the daily report",
            "30 8 * * *",
            name="daily",
            timezone="Europe/Paris",
            enabled=True,
            thread_id=t.thread,
            overlap="queue",
            end_at=ends,
        )
    )
    assert (made.kind, made.agent_id, made.runner_id, made.org_id) == ("cron", t.agent, None, ORG)
    assert (made.prompt, made.cron, made.name, made.timezone) == (
        "the daily report",
        "30 8 * * *",
        "daily",
        "Europe/Paris",
    )
    assert (made.enabled, made.thread_id, made.overlap, made.end_at) == (
        True,
        t.thread,
        "queue",
        ends,
    )
    assert made.next_fire_at is not None
    assert await t.stored() == [made]
    assert await t.tasks.list_tasks(WHO, t.agent) == [made]


async def test_the_list_replaces_the_stored_one() -> None:
    t = await tasks()
    first, second = await t.set(task("a"), task("b", "0 10 * * *"))
    t.rw.turn.clock.advance(60)
    # the first named by its id is changed; the second, named by none, goes; a new one comes
    kept, new = await t.set(
        task("a, changed", "0 7 * * *", id=first.id, enabled=False, name="renamed"),
        task("c"),
    )
    assert kept.id == first.id
    assert (kept.prompt, kept.cron, kept.enabled, kept.name) == (
        "a, changed",
        "0 7 * * *",
        False,
        "renamed",
    )
    assert kept.next_fire_at is None  # disabled
    assert kept.updated_at == t.rw.turn.clock.now() != first.updated_at
    assert new.id not in (first.id, second.id)
    assert new.prompt == "c"
    assert {x.id for x in await t.stored()} == {first.id, new.id}
    assert await t.set() == []
    assert await t.stored() == []


async def test_another_agents_tasks_are_neither_listed_nor_changed_nor_removed() -> None:
    t = await tasks()
    other = agent_in(ORG, default_model="local")
    await t.rw.turn.storage.agents.add(other)
    others = ScheduledTasks(
        t.rw.turn.storage.runners,
        t.rw.runners,
        t.rw.turn.storage.agents,
        t.rw.turn.storage.threads,
        t.rw.turn.clock,
    )
    [theirs] = await others.set_tasks(WHO, other.id, [task("theirs")])
    [mine] = await t.set(task("mine"))
    assert await t.tasks.list_tasks(WHO, t.agent) == [mine]
    assert await t.refusal(task("x", id=theirs.id)) == ("id", f"the agent has no task {theirs.id}")
    assert await t.set() == []
    assert await others.list_tasks(WHO, other.id) == [theirs]


async def test_every_task_is_checked_before_anything_is_written() -> None:
    t = await tasks()
    [kept] = await t.set(task("kept"))
    other = agent_in(ORG, default_model="local")
    await t.rw.turn.storage.agents.add(other)
    theirs = await t.rw.turn.storage.threads.add(a_thread(ORG, other.id))
    unknown = uuid.uuid4()
    cases = [
        (task("   "), ("prompt", "must not be empty")),
        (task("x" * (MAX_CONTENT + 1)), ("prompt", f"must be at most {MAX_CONTENT} characters")),
        (task(name="n" * (MAX_NAME + 1)), ("name", f"must be at most {MAX_NAME} characters")),
        (task(cron=""), ("cron", "must not be empty")),
        (task(thread_id=unknown), ("thread_id", "no such thread")),
        (task(thread_id=theirs.id), ("thread_id", "a thread of another agent")),
        (task(id=unknown), ("id", f"the agent has no task {unknown}")),
    ]
    for bad, refused in cases:
        # the good task first: it is not added, and the stored one not removed
        assert await t.refusal(task("new"), bad) == refused, bad
        assert await t.stored() == [kept]
    field, problem = await t.refusal(task(cron="every day"))
    assert field == "cron"
    assert problem.startswith("not a cron expression")
    field, problem = await t.refusal(task(cron="* * * * *"), task(cron="*/30 * * * * *"))
    assert (field, problem) == (
        "cron",
        "fires every 30 s; the least interval allowed is 60 s (AGENTSVC_CRON_MIN_INTERVAL_S)",
    )
    assert await t.stored() == [kept]


async def test_the_longest_prompt_and_name_are_allowed() -> None:
    t = await tasks()
    [made] = await t.set(task("x" * MAX_CONTENT, name="n" * MAX_NAME))
    assert (len(made.prompt or ""), len(made.name)) == (MAX_CONTENT, MAX_NAME)


async def test_an_agent_has_at_most_fifty_tasks() -> None:
    t = await tasks()
    assert MAX_TASKS == 50
    made = await t.set(*(task(f"t{i}") for i in range(50)))
    assert len(made) == 50
    assert await t.refusal(*(task(f"t{i}") for i in range(51))) == ("tasks", "at most 50")
    assert len(await t.stored()) == 50


async def test_only_admins_set_tasks_and_members_read_them() -> None:
    t = await tasks()
    [made] = await t.set(task())
    member = Principal(org_id=ORG, method="jwt", role="member", user_id="u1")
    with pytest.raises(PermissionDenied) as caught:
        await t.set(who=member)
    assert str(caught.value) == "scheduled tasks are managed by the organization's admins"
    assert await t.stored() == [made]
    assert await t.tasks.list_tasks(member, t.agent) == [made]
    admin = Principal(org_id=ORG, method="jwt", role="admin", user_id="u2")
    assert await t.set(who=admin) == []


async def test_an_unknown_agent_has_no_tasks_to_read_or_set() -> None:
    t = await tasks()
    unknown = uuid.uuid4()
    with pytest.raises(NotFound):
        await t.tasks.list_tasks(WHO, unknown)
    with pytest.raises(NotFound):
        await t.tasks.set_tasks(WHO, unknown, [])
    with pytest.raises(NotFound):
        await t.tasks.runs(WHO, unknown, before=None, limit=10)
    elsewhere = Principal(org_id="another-org", method="api_key")
    with pytest.raises(NotFound):
        await t.tasks.list_tasks(elsewhere, t.agent)


def a_run(agent_id: UUID, at: datetime) -> RunnerRun:
    return RunnerRun(
        id=uuid.uuid4(),
        org_id=ORG,
        runner_id=None,
        agent_id=agent_id,
        trigger_id=None,
        trigger_kind="cron",
        status="succeeded",
        input={},
        pipeline=(),
        steps=(),
        created_at=at,
        updated_at=at,
    )


async def test_the_runs_of_the_agents_tasks_come_newest_first_by_pages() -> None:
    t = await tasks()
    now = t.rw.turn.clock.now()
    runs = [a_run(t.agent, now + timedelta(minutes=i)) for i in range(5)]
    for r in runs:
        await t.rw.turn.storage.runners.add_run(r)
    other = agent_in(ORG, default_model="local")
    await t.rw.turn.storage.agents.add(other)
    await t.rw.turn.storage.runners.add_run(a_run(other.id, now + timedelta(hours=1)))
    first = await t.tasks.runs(WHO, t.agent, before=None, limit=2)
    assert [r.id for r in first] == [runs[4].id, runs[3].id]
    rest = await t.tasks.runs(WHO, t.agent, before=(first[-1].created_at, first[-1].id), limit=10)
    assert [r.id for r in rest] == [runs[2].id, runs[1].id, runs[0].id]
