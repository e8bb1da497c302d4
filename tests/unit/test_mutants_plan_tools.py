"""The plan tools as the model sees them (``agentsvc_core.use_cases.plan_tools``) and
the agent's plan configuration, over the memory storage and a clock the test
moves: which plan a call acts on, every argument reaching the plan, and what
``requireApproval`` refuses and allows (docs/tools.md#plans). Written to kill the
mutants `make mutation` found alive (docs/development.md)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from agentsvc_core.entities import Agent
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import ToolCallContext
from agentsvc_core.use_cases.plan_tools import PlanConfig
from agentsvc_core.use_cases.plans import PlanChanges, TodoDraft
from tests.unit.test_plans import ALICE, KEY, ORG, World, _setup
from tests.unit.turn_world import Clock

GATED = "gated"
OPEN = "open"


class Model:
    """The plan tools called as the model calls them, in one conversation."""

    def __init__(self, w: World, clock: Clock, agent: Agent, thread: uuid.UUID, **config: bool):
        self.w, self.clock, self.agent, self.thread = w, clock, agent, thread
        self.ctx = ToolCallContext(
            tool_call_id="c1", thread_id=thread, setup=_setup(w, agent, enabled=True, **config)
        )

    async def call(self, name: str, **args: Any) -> str:
        return await self.w.tools.call(KEY, self.agent, name, args, self.ctx)

    async def plan(self, name: str, **args: Any) -> dict[str, Any]:
        """The call's answer, the plan as JSON; it is the plan as stored."""
        answer = await self.call(name, **args)
        assert not answer.startswith("error:"), answer
        plan: dict[str, Any] = json.loads(answer)
        stored = await self.w.plans.get(KEY, uuid.UUID(plan["id"]))
        assert plan["updated_at"] == stored.updated_at.isoformat().replace("+00:00", "Z")
        assert [t["id"] for t in plan["todos"]] == [str(t.id) for t in stored.todos]
        return plan


async def model(**config: bool) -> Model:
    clock = Clock()
    w = World(clock)
    agent = await w.agent()
    return Model(w, clock, agent, await w.thread(), **config)


def _todos(plan: dict[str, Any], *fields: str) -> list[tuple[Any, ...]]:
    return [tuple(t[f] for f in fields) for t in plan["todos"]]


# --- the configuration --------------------------------------------------------------


async def test_the_configuration_changes_only_the_fields_given() -> None:
    w = World(Clock())
    agent = await w.agent()
    assert await w.settings.get(KEY, agent.id) == PlanConfig(agent_id=agent.id, org_id=ORG)
    on = await w.settings.update(KEY, agent.id, {"enabled": True})
    assert (on.enabled, on.require_approval) == (True, False)
    gated = await w.settings.update(KEY, agent.id, {"require_approval": True})
    assert (gated.enabled, gated.require_approval) == (True, True)
    assert await w.settings.get(KEY, agent.id) == gated
    assert [t.name for t in await w.tools.list_tools(KEY, agent, None)] == [
        "plan_create",
        "plan_update",
        "todo_add",
        "todo_update",
    ]
    with pytest.raises(NotFound):
        await w.settings.update(KEY, uuid.uuid4(), {"enabled": True})


async def test_a_tool_outside_a_conversation_says_why() -> None:
    m = await model()
    outside = ToolCallContext(tool_call_id="c2", setup=m.ctx.setup)
    answer = await m.w.tools.call(KEY, m.agent, "plan_create", {"title": "x"}, outside)
    assert answer == "error: plan tools work inside a conversation only"
    assert await m.w.plans.list_for_thread(KEY, m.thread) == []


# --- what each tool does ----------------------------------------------------------


async def test_plan_create_stores_every_field_of_its_todos() -> None:
    m = await model()
    plan = await m.plan(
        "plan_create",
        title="Move house",
        todos=[
            {"content": "Pack", "activeForm": "Packing", "status": "in_progress"},
            {"content": "Drive", "dependsOn": [0]},
        ],
    )
    assert (plan["title"], plan["status"], plan["thread_id"]) == (
        "Move house",
        "draft",
        str(m.thread),
    )
    pack, drive = plan["todos"]
    assert _todos(plan, "content", "active_form", "status", "parent_id", "position") == [
        ("Pack", "Packing", "in_progress", None, 0),
        ("Drive", None, "pending", None, 1),
    ]
    assert drive["blocked_by"] == [pack["id"]]


async def test_todo_add_stores_every_field_and_acts_on_the_latest_plan() -> None:
    m = await model()
    first = await m.plan("plan_create", title="first", todos=[{"content": "a"}])
    m.clock.advance(1)
    latest = await m.plan("plan_create", title="latest", todos=[{"content": "x"}])
    x = latest["todos"][0]["id"]
    plan = await m.plan(
        "todo_add",
        todos=[
            {"content": "y", "activeForm": "Doing y", "status": "skipped", "parentId": x},
            {"content": "z", "dependsOn": [x, 0]},
        ],
    )
    assert plan["id"] == latest["id"]
    assert _todos(plan, "content", "active_form", "status", "parent_id") == [
        ("x", None, "pending", None),
        ("y", "Doing y", "skipped", x),
        ("z", None, "pending", None),
    ]
    assert plan["todos"][2]["blocked_by"] == [x, plan["todos"][1]["id"]]
    assert len((await m.w.plans.get(KEY, uuid.UUID(first["id"]))).todos) == 1


async def test_a_named_plan_of_the_conversation_is_the_one_changed() -> None:
    m = await model()
    first = await m.plan("plan_create", title="first", todos=[{"content": "a"}])
    m.clock.advance(1)
    latest = await m.plan("plan_create", title="latest")
    a = first["todos"][0]["id"]
    plan = await m.plan("todo_add", planId=first["id"], todos=[{"content": "b"}])
    assert (plan["id"], _todos(plan, "content")) == (first["id"], [("a",), ("b",)])
    plan = await m.plan("todo_update", planId=first["id"], todoId=a, status="done")
    assert _todos(plan, "content", "status") == [("a", "done"), ("b", "pending")]
    plan = await m.plan("plan_update", planId=first["id"], title="renamed")
    assert (plan["id"], plan["title"]) == (first["id"], "renamed")
    untouched = await m.w.plans.get(KEY, uuid.UUID(latest["id"]))
    assert (untouched.title, untouched.todos) == ("latest", ())
    # the same plan named from another conversation of the agent is refused
    elsewhere = Model(m.w, m.clock, m.agent, await m.w.thread())
    for name, args in (
        ("plan_update", {"title": "x"}),
        ("todo_add", {"todos": [{"content": "x"}]}),
        ("todo_update", {"todoId": a, "status": "pending"}),
    ):
        answer = await elsewhere.call(name, planId=first["id"], **args)
        assert answer == "error: plan not found in this conversation", name
        assert (await elsewhere.call(name, **args)) == (
            "error: this conversation has no plan yet: call plan_create first"
        ), name
    assert (await m.w.plans.get(KEY, uuid.UUID(first["id"]))).title == "renamed"


async def test_plan_update_changes_title_and_status_of_the_latest_plan() -> None:
    m = await model()
    await m.plan("plan_create", title="first")
    m.clock.advance(1)
    latest = await m.plan("plan_create", title="latest")
    m.clock.advance(1)
    plan = await m.plan("plan_update", title="Renamed", status="in_progress")
    assert (plan["id"], plan["title"], plan["status"]) == (latest["id"], "Renamed", "in_progress")
    plan = await m.plan("plan_update", status="completed")
    assert (plan["title"], plan["status"]) == ("Renamed", "completed")


async def test_todo_update_passes_every_change_to_the_todo() -> None:
    m = await model()
    plan = await m.plan("plan_create", title="p", todos=[{"content": c} for c in ("a", "b", "c")])
    a, b, c = (t["id"] for t in plan["todos"])
    plan = await m.plan(
        "todo_update",
        todoId=c,
        content="c2",
        activeForm="Doing c",
        status="in_progress",
        parentId=a,
        position=0,
        addDependsOn=[a, b],
    )
    assert _todos(plan, "content", "active_form", "status", "parent_id", "position") == [
        ("c2", "Doing c", "in_progress", a, 0),
        ("a", None, "pending", None, 1),
        ("b", None, "pending", None, 2),
    ]
    assert plan["todos"][0]["blocked_by"] == [a, b]
    plan = await m.plan("todo_update", todoId=c, removeDependsOn=[a], activeForm=None)
    assert plan["todos"][0]["blocked_by"] == [b]
    assert plan["todos"][0]["active_form"] is None
    assert plan["todos"][0]["content"] == "c2"


# --- requireApproval ----------------------------------------------------------------


async def test_without_approval_the_model_moves_its_plan_freely() -> None:
    m = await model()
    plan = await m.plan("plan_create", title="p", todos=[{"content": "a", "status": "in_progress"}])
    a = plan["todos"][0]["id"]
    assert (await m.plan("todo_add", todos=[{"content": "b", "status": "done"}]))["status"] == (
        "draft"
    )
    assert _todos(await m.plan("todo_update", todoId=a, status="done"), "status") == [
        ("done",),
        ("done",),
    ]
    assert (await m.plan("plan_update", status="approved"))["status"] == "approved"


async def test_a_gated_draft_takes_pending_todos_and_may_be_cancelled() -> None:
    m = await model(require_approval=True)
    plan = await m.plan("plan_create", title="p", todos=[{"content": "a"}])
    a = plan["todos"][0]["id"]
    plan = await m.plan("todo_add", todos=[{"content": "b", "status": "pending"}])
    assert _todos(plan, "status") == [("pending",), ("pending",)]
    plan = await m.plan("todo_update", todoId=a, status="pending", content="a2")
    assert _todos(plan, "content") == [("a2",), ("b",)]
    assert (await m.plan("plan_update", status="draft"))["status"] == "draft"
    assert (await m.plan("plan_update", status="cancelled"))["status"] == "cancelled"


async def test_a_gated_draft_refuses_todos_born_started_and_leaves_the_plan() -> None:
    m = await model(require_approval=True)
    plan = await m.plan("plan_create", title="p", todos=[{"content": "a"}])
    before = await m.w.plans.get(KEY, uuid.UUID(plan["id"]))
    for status in ("in_progress", "done", "skipped"):
        answer = await m.call(
            "todo_add", todos=[{"content": "ok"}, {"content": "b", "status": status}]
        )
        assert answer == "error: the plan awaits approval: its todos cannot start yet", status
        answer = await m.call("todo_update", todoId=plan["todos"][0]["id"], status=status)
        assert answer == "error: the plan awaits approval: its todos cannot start yet", status
        answer = await m.call("plan_create", title="q", todos=[{"content": "b", "status": status}])
        assert answer == "error: the plan awaits approval: its todos cannot start yet", status
    assert await m.w.plans.get(KEY, before.id) == before
    assert len(await m.w.plans.list_for_thread(KEY, m.thread)) == 1


async def test_the_model_never_approves_a_gated_plan_nor_moves_its_draft() -> None:
    m = await model(require_approval=True)
    plan = await m.plan("plan_create", title="p")
    for status in ("approved", "in_progress", "completed"):
        answer = await m.call("plan_update", status=status)
        assert answer == "error: a person approves this plan, not the model", status
    await m.w.plans.update(KEY, uuid.UUID(plan["id"]), PlanChanges(status="in_progress"))
    # approving is a person's, even of a plan already past its draft
    assert (await m.call("plan_update", status="approved")) == (
        "error: a person approves this plan, not the model"
    )
    assert (await m.plan("plan_update", status="completed"))["status"] == "completed"


async def test_a_gated_plan_once_approved_takes_started_todos() -> None:
    m = await model(require_approval=True)
    made = await m.w.plans.create(KEY, m.thread, "p", [TodoDraft(content="a")])
    await m.w.plans.update(KEY, made.id, PlanChanges(status="approved"))
    plan = await m.plan("todo_add", todos=[{"content": "b", "status": "in_progress"}])
    assert _todos(plan, "content", "status") == [("a", "pending"), ("b", "in_progress")]
    plan = await m.plan("todo_update", todoId=str(made.todos[0].id), status="done")
    assert _todos(plan, "status") == [("done",), ("in_progress",)]
    assert (await m.plan("plan_update", status="in_progress"))["status"] == "in_progress"


async def test_a_members_plan_tool_acts_in_the_members_conversation() -> None:
    m = await model()
    thread = await m.w.thread(ALICE)
    ctx = ToolCallContext(tool_call_id="c3", thread_id=thread, setup=m.ctx.setup)
    answer = await m.w.tools.call(ALICE, m.agent, "plan_create", {"title": "hers"}, ctx)
    plan = json.loads(answer)
    assert plan["thread_id"] == str(thread)
    assert [p.title for p in await m.w.plans.list_for_thread(ALICE, thread)] == ["hers"]
