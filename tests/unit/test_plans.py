"""The plans use case and the plan tools, on the memory adapter."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, cast

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings, target

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import Clock, SealedRecord, SecretStore, ToolCallContext, ToolSetup
from agentsvc_core.use_cases import AgentDraft, Agents, ThreadDraft, Threads
from agentsvc_core.use_cases.plan_tools import PlanConfig, PlanSettings, PlanTools
from agentsvc_core.use_cases.plans import (
    DependencyCycle,
    PlanChanges,
    Plans,
    TodoChanges,
    TodoDraft,
)
from tests.plan_walk import STEPS, walk

ORG = "org-plans"
KEY = Principal(org_id=ORG, method="api_key")
ALICE = Principal(org_id=ORG, method="jwt", user_id="alice")
BOB = Principal(org_id=ORG, method="jwt", user_id="bob")


class World:
    """The plans use case and the plan tools over the memory storage; ``clock`` is
    the system's unless a test passes one it moves itself."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.storage = MemoryStorage()
        clock = clock or SystemClock()
        self.threads = Threads(
            self.storage.threads, self.storage.agents, self.storage.conversations, clock
        )
        self.plans = Plans(self.storage.plans, self.threads, clock)
        self.box = AesGcmBox(parse_keys(new_key_spec("unit")))
        self.settings = PlanSettings(self.storage.secrets, self.storage.agents, self.box)
        self.tools = PlanTools(self.plans, self.settings)

    async def agent(self) -> Agent:
        agents = Agents(self.storage.agents, SystemClock(), "local")
        return await agents.create(KEY, AgentDraft(name="planner"))

    async def thread(self, who: Principal = KEY) -> uuid.UUID:
        agent = await self.agent()
        return (await self.threads.create(who, ThreadDraft(agent_id=agent.id))).id


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_random_walks_keep_the_graph_acyclic_and_ready_exact(steps: list[Any]) -> None:
    async def go() -> None:
        w = World()
        model = await walk(w.plans, KEY, await w.thread(), steps)
        event(f"cycles refused: {min(model.refused, 3)}+")
        target(float(model.refused), label="cycles refused")

    run(go())


def test_a_walk_refuses_and_accepts_edges() -> None:
    """The walk above can tell refusals from acceptances (a guard that it tests both)."""

    async def go() -> tuple[int, int]:
        w = World()
        steps = [("edge", 1, 0), ("edge", 2, 1), ("edge", 0, 2), ("edge", 0, 0)]
        model = await walk(w.plans, KEY, await w.thread(), steps)
        return model.accepted, model.refused

    assert run(go()) == (2, 1)


def test_a_cycle_names_its_path_and_leaves_nothing_behind() -> None:
    async def go() -> None:
        w = World()
        plan = await w.plans.create(
            KEY, await w.thread(), "p", [TodoDraft(content=c) for c in "abc"]
        )
        a, b, c = (t.id for t in plan.todos)
        await w.plans.add_dependency(KEY, plan.id, b, a)
        await w.plans.add_dependency(KEY, plan.id, c, b)
        with pytest.raises(DependencyCycle) as caught:
            await w.plans.add_dependency(KEY, plan.id, a, c)
        assert caught.value.path == [a, c, b, a]
        assert caught.value.code == "DEPENDENCY_CYCLE"
        assert f"{a} -> {c} -> {b} -> {a}" in caught.value.detail
        assert (await w.plans.get(KEY, plan.id)).todo(a).blocked_by == ()  # type: ignore[union-attr]
        # several todos at once: all or none
        before = await w.plans.get(KEY, plan.id)
        with pytest.raises(DependencyCycle):
            await w.plans.add_todos(
                KEY,
                plan.id,
                [
                    TodoDraft(content="x", depends_on=(1,)),
                    TodoDraft(content="y", depends_on=(0,)),
                ],
            )
        assert await w.plans.get(KEY, plan.id) == before
        # a new plan whose todos make a cycle is not created at all
        thread = before.thread_id
        with pytest.raises(DependencyCycle):
            await w.plans.create(
                KEY,
                thread,
                "q",
                [TodoDraft(content="x", depends_on=(1,)), TodoDraft(content="y", depends_on=(0,))],
            )
        assert [p.id for p in await w.plans.list_for_thread(KEY, thread)] == [plan.id]

    run(go())


def test_edges_refuse_self_and_other_plans_todos() -> None:
    async def go() -> None:
        w = World()
        thread = await w.thread()
        p1 = await w.plans.create(KEY, thread, "one", [TodoDraft(content="a")])
        p2 = await w.plans.create(KEY, thread, "two", [TodoDraft(content="b")])
        a, b = p1.todos[0].id, p2.todos[0].id
        with pytest.raises(InvalidInput, match="itself"):
            await w.plans.add_dependency(KEY, p1.id, a, a)
        with pytest.raises(InvalidInput, match="this plan"):
            await w.plans.add_dependency(KEY, p1.id, a, b)
        with pytest.raises(NotFound):
            await w.plans.add_dependency(KEY, p1.id, b, a)  # b is not p1's todo

    run(go())


def test_positions_parents_and_deletes() -> None:
    async def go() -> None:
        w = World()
        plan = await w.plans.create(
            KEY, await w.thread(), "p", [TodoDraft(content=c) for c in "abcd"]
        )
        a, b, c, d = (t.id for t in plan.todos)
        plan = await w.plans.update_todo(KEY, plan.id, d, TodoChanges(position=0))
        assert [t.content for t in plan.todos] == ["d", "a", "b", "c"]
        plan = await w.plans.update_todo(KEY, plan.id, d, TodoChanges(position=99))
        assert [(t.content, t.position) for t in plan.todos] == [
            ("a", 0),
            ("b", 1),
            ("c", 2),
            ("d", 3),
        ]
        await w.plans.update_todo(KEY, plan.id, b, TodoChanges(parent_id=a))
        await w.plans.update_todo(KEY, plan.id, c, TodoChanges(parent_id=b))
        with pytest.raises(InvalidInput, match="children"):
            await w.plans.update_todo(KEY, plan.id, a, TodoChanges(parent_id=c))
        await w.plans.add_dependency(KEY, plan.id, c, b)
        await w.plans.delete_todo(KEY, plan.id, b)
        plan = await w.plans.get(KEY, plan.id)
        assert [(t.content, t.position) for t in plan.todos] == [("a", 0), ("c", 1), ("d", 2)]
        assert plan.todo(c).parent_id == a  # type: ignore[union-attr]
        assert plan.todo(c).blocked_by == ()  # type: ignore[union-attr]
        # parent_id is display only: a child of an unfinished parent is ready
        assert [
            t.content for t in (await w.plans.readiness(KEY, plan.id, with_blocked=False)).ready
        ] == [
            "a",
            "c",
            "d",
        ]

    run(go())


def test_a_member_uses_plans_of_the_threads_it_may_use_only() -> None:
    async def go() -> None:
        w = World()
        thread = await w.thread(ALICE)
        plan = await w.plans.create(ALICE, thread, "mine", [TodoDraft(content="a")])
        assert (await w.plans.get(KEY, plan.id)).id == plan.id  # the org's key sees it
        for call in (
            w.plans.get(BOB, plan.id),
            w.plans.create(BOB, thread, "x"),
            w.plans.list_for_thread(BOB, thread),
            w.plans.update(BOB, plan.id, PlanChanges(title="x")),
            w.plans.add_todos(BOB, plan.id, [TodoDraft(content="x")]),
            w.plans.delete(BOB, plan.id),
            w.plans.readiness(BOB, plan.id, with_blocked=False),
        ):
            with pytest.raises(NotFound):
                await call
        other_org = Principal(org_id="another", method="api_key")
        with pytest.raises(NotFound):
            await w.plans.get(other_org, plan.id)
        assert (await w.plans.update(ALICE, plan.id, PlanChanges(status="approved"))).status == (
            "approved"
        )

    run(go())


# --- the plan tools ---------------------------------------------------------------


class Unreadable:
    """A store that must not be read: it stands in for a store port (a cast where it
    is passed) and fails on the first attribute read."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"storage was read: {name}")


def test_disabled_plan_tools_offer_nothing_and_read_nothing() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        silent = PlanTools(
            w.plans, PlanSettings(cast("SecretStore", Unreadable()), w.storage.agents, w.box)
        )
        assert silent.kinds == ("plan",)
        assert await silent.list_tools(KEY, agent, ToolSetup()) == []
        # without the turn's read, the configuration is read (and is off)
        assert await w.tools.list_tools(KEY, agent, None) == []

    run(go())


def _setup(w: World, agent: Agent, **config: bool) -> ToolSetup:
    config_ = PlanConfig(agent_id=agent.id, org_id=ORG, **config)
    sealed = w.settings._records.seal(ORG, "plan", str(agent.id), config_)
    return ToolSetup(records={"plan": SealedRecord(value=sealed)})


def test_enabled_plan_tools_answer_the_plan_as_json() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        thread = await w.thread()
        setup = _setup(w, agent, enabled=True)
        names = [t.name for t in await w.tools.list_tools(KEY, agent, setup)]
        assert names == ["plan_create", "plan_update", "todo_add", "todo_update"]
        for spec in await w.tools.list_tools(KEY, agent, setup):
            assert spec.parameters["type"] == "object"
        ctx = ToolCallContext(tool_call_id="c1", thread_id=thread, setup=setup)

        async def call(name: str, args: dict[str, Any]) -> str:
            assert w.tools.owns(name)
            assert not w.tools.is_extension(name)
            return await w.tools.call(KEY, agent, name, args, ctx)

        assert (await call("todo_add", {"todos": [{"content": "x"}]})).startswith(
            "error: this conversation has no plan"
        )
        made = json.loads(await call("plan_create", {"title": "Ship it"}))
        stored = await w.plans.get(KEY, uuid.UUID(made["id"]))
        assert made["title"] == "Ship it"
        assert made["status"] == "draft"
        assert made["thread_id"] == str(thread)
        assert made["todos"] == []
        result = await call(
            "todo_add",
            {
                "todos": [
                    {"content": "Write", "activeForm": "Writing"},
                    {"content": "Test", "dependsOn": [0]},
                ]
            },
        )
        plan = json.loads(result)
        stored = await w.plans.get(KEY, uuid.UUID(made["id"]))
        assert result == json.dumps(json.loads(msgspec.json.encode(stored)), separators=(",", ":"))
        write, test = plan["todos"]
        assert test["blocked_by"] == [write["id"]]
        assert write["active_form"] == "Writing"
        cycle = await call("todo_update", {"todoId": write["id"], "addDependsOn": [test["id"]]})
        assert cycle.startswith("error: this dependency would close a cycle")
        assert f"{write['id']} -> {test['id']} -> {write['id']}" in cycle
        done = json.loads(await call("todo_update", {"todoId": write["id"], "status": "done"}))
        assert done["todos"][0]["status"] == "done"
        assert json.loads(await call("plan_update", {"status": "in_progress"}))["status"] == (
            "in_progress"
        )
        unknown = await call("todo_update", {"todoId": str(uuid.uuid4()), "status": "done"})
        assert unknown == "error: todo not found"
        assert (await call("todo_update", {"status": "done"})).startswith(
            "error: invalid arguments"
        )
        # a plan of another conversation is not this one's to change
        other = await w.plans.create(KEY, await w.thread(), "other")
        assert (await call("plan_update", {"planId": str(other.id), "title": "x"})).startswith(
            "error: plan not found"
        )
        outside = ToolCallContext(tool_call_id="c2", setup=setup)
        assert (await w.tools.call(KEY, agent, "plan_create", {"title": "x"}, outside)).startswith(
            "error:"
        )

    run(go())


def test_disabled_or_awaiting_approval_tools_refuse() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        thread = await w.thread()
        off = ToolCallContext(tool_call_id="c", thread_id=thread, setup=_setup(w, agent))
        assert await w.tools.call(KEY, agent, "plan_create", {"title": "x"}, off) == (
            "error: plan tools are not enabled for this agent"
        )
        assert await w.plans.list_for_thread(KEY, thread) == []
        gated = ToolCallContext(
            tool_call_id="c",
            thread_id=thread,
            setup=_setup(w, agent, enabled=True, require_approval=True),
        )
        plan = json.loads(
            await w.tools.call(
                KEY, agent, "plan_create", {"title": "x", "todos": [{"content": "a"}]}, gated
            )
        )
        todo = plan["todos"][0]["id"]
        refused = await w.tools.call(
            KEY, agent, "todo_update", {"todoId": todo, "status": "in_progress"}, gated
        )
        assert refused.startswith("error: the plan awaits approval")
        assert (
            await w.tools.call(KEY, agent, "plan_update", {"status": "approved"}, gated)
        ).startswith("error: a person approves")
        # nor around the approval: a draft moved on, todos born started or done
        for status in ("in_progress", "completed"):
            moved = await w.tools.call(KEY, agent, "plan_update", {"status": status}, gated)
            assert moved.startswith("error: a person approves"), status
        born_started: list[tuple[str, dict[str, Any]]] = [
            ("todo_add", {"todos": [{"content": "b", "status": "done"}]}),
            ("plan_create", {"title": "y", "todos": [{"content": "c", "status": "in_progress"}]}),
        ]
        for tool, args in born_started:
            born = await w.tools.call(KEY, agent, tool, args, gated)
            assert born.startswith("error: the plan awaits approval"), tool
        renamed = await w.tools.call(KEY, agent, "plan_update", {"title": "x2"}, gated)
        assert json.loads(renamed)["status"] == "draft"
        await w.plans.update(KEY, uuid.UUID(plan["id"]), PlanChanges(status="approved"))
        started = await w.tools.call(
            KEY, agent, "todo_update", {"todoId": todo, "status": "in_progress"}, gated
        )
        assert json.loads(started)["todos"][0]["status"] == "in_progress"

    run(go())
