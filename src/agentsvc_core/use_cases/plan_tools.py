"""An agent's plan configuration (``GET/PUT /api/agents/{id}/plan``) and the plan
tools it gives the model: ``plan_create``, ``plan_update``, ``todo_add``,
``todo_update`` (docs/tools.md#plans).

The configuration is a sealed record of kind ``plan`` (like compaction's), read
with the turn (``PlanTools.kinds``): a turn of an agent without plans enabled
costs nothing more. A tool acts on the plans of the turn's thread and answers the
plan as it stands after the change, as compact JSON (the ``tool_result`` carries
it); a refusal is an ``error: ...`` result.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.plan import PLAN_STATUSES, TODO_STATUSES, Plan, PlanStatus, TodoStatus
from agentsvc_core.ports import (
    AgentRepository,
    SecretBox,
    SecretStore,
    ToolCallContext,
    ToolSpec,
)
from agentsvc_core.use_cases.agent_settings import (
    AgentSettings,
    GatedTools,
    Switched,
    ToolRefused,
)
from agentsvc_core.use_cases.plans import (
    MAX_ADD,
    MAX_TODO_TEXT,
    PlanChanges,
    Plans,
    TodoChanges,
    TodoDraft,
)

__all__ = ["KIND", "TOOL_NAMES", "PlanConfig", "PlanSettings", "PlanTools"]

KIND = "plan"


class PlanConfig(Switched, frozen=True, kw_only=True):
    """``enabled``: the model gets the plan tools."""

    # the model may not approve its own plan, nor start or finish todos of a draft:
    # a person approves it (PATCH /api/plans/{id} {"status": "approved"})
    require_approval: bool = False


class PlanSettings(AgentSettings[PlanConfig]):
    def __init__(self, store: SecretStore, agents: AgentRepository, box: SecretBox) -> None:
        super().__init__(store, agents, box, KIND, PlanConfig)

    async def update(self, who: Principal, agent_id: UUID, changes: dict[str, bool]) -> PlanConfig:
        """Only the supplied fields change (a concurrent PUT of others is not lost)."""
        return await self._change(
            who, agent_id, lambda current: msgspec.structs.replace(current, **changes)
        )


# --- the tools' arguments (camelCase, as request bodies) -------------------------


class _NewTodo(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    content: str
    active_form: str | None = None
    status: TodoStatus = "pending"
    parent_id: UUID | None = None
    depends_on: tuple[UUID | int, ...] = ()

    def draft(self) -> TodoDraft:
        return TodoDraft(
            content=self.content,
            active_form=self.active_form,
            status=self.status,
            parent_id=self.parent_id,
            depends_on=self.depends_on,
        )


class _Create(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    title: str
    todos: tuple[_NewTodo, ...] = ()


class _Update(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    plan_id: UUID | None = None
    title: str | UnsetType = UNSET
    status: PlanStatus | UnsetType = UNSET


class _Add(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    plan_id: UUID | None = None
    todos: tuple[_NewTodo, ...]


def _only_pending(todos: tuple[_NewTodo, ...]) -> None:
    """A plan awaiting approval: its new todos cannot be started or finished."""
    if any(t.status != "pending" for t in todos):
        raise ToolRefused("the plan awaits approval: its todos cannot start yet")


class _TodoUpdate(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    plan_id: UUID | None = None
    todo_id: UUID
    content: str | UnsetType = UNSET
    active_form: str | UnsetType | None = UNSET
    status: TodoStatus | UnsetType = UNSET
    parent_id: UUID | UnsetType | None = UNSET
    position: int | UnsetType = UNSET
    add_depends_on: tuple[UUID, ...] = ()
    remove_depends_on: tuple[UUID, ...] = ()


_ID = {"type": "string", "format": "uuid"}
_PLAN_ID = {**_ID, "description": "The plan to change; default: the conversation's latest plan"}
_NEW_TODO = {
    "type": "object",
    "properties": {
        "content": {"type": "string", "maxLength": MAX_TODO_TEXT, "description": "What to do"},
        "activeForm": {
            "type": "string",
            "maxLength": MAX_TODO_TEXT,
            "description": "The same, as shown while in progress ('Writing the tests')",
        },
        "status": {"type": "string", "enum": list(TODO_STATUSES)},
        "parentId": {**_ID, "description": "A todo this one is part of (display only)"},
        "dependsOn": {
            "type": "array",
            "description": "Todos that must be done (or skipped) first: ids of the plan's "
            "todos, or the 0-based index of a todo in this same list",
            "items": {"anyOf": [_ID, {"type": "integer", "minimum": 0}]},
        },
    },
    "required": ["content"],
}
_SPECS = {
    "plan_create": ToolSpec(
        name="plan_create",
        description="Create a plan for this conversation (a draft), optionally with its "
        "todos. Answers the plan as JSON, with the todos' ids.",
        parameters={
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "What the plan is for"},
                "todos": {"type": "array", "maxItems": MAX_ADD, "items": _NEW_TODO},
            },
            "required": ["title"],
        },
    ),
    "plan_update": ToolSpec(
        name="plan_update",
        description="Change the plan's title or status. Answers the plan as JSON.",
        parameters={
            "type": "object",
            "properties": {
                "planId": _PLAN_ID,
                "title": {"type": "string"},
                "status": {"type": "string", "enum": list(PLAN_STATUSES)},
            },
        },
    ),
    "todo_add": ToolSpec(
        name="todo_add",
        description="Add todos at the end of the plan, with what each depends on. "
        "Answers the plan as JSON.",
        parameters={
            "type": "object",
            "properties": {
                "planId": _PLAN_ID,
                "todos": {"type": "array", "minItems": 1, "maxItems": MAX_ADD, "items": _NEW_TODO},
            },
            "required": ["todos"],
        },
    ),
    "todo_update": ToolSpec(
        name="todo_update",
        description="Change a todo: its status (pending, in_progress, done, skipped), text, "
        "position or dependencies. Answers the plan as JSON.",
        parameters={
            "type": "object",
            "properties": {
                "planId": _PLAN_ID,
                "todoId": _ID,
                "content": {"type": "string", "maxLength": MAX_TODO_TEXT},
                "activeForm": {"type": "string", "maxLength": MAX_TODO_TEXT},
                "status": {"type": "string", "enum": list(TODO_STATUSES)},
                "parentId": _ID,
                "position": {"type": "integer", "minimum": 0},
                "addDependsOn": {"type": "array", "items": _ID},
                "removeDependsOn": {"type": "array", "items": _ID},
            },
            "required": ["todoId"],
        },
    ),
}
TOOL_NAMES = tuple(_SPECS)
_ARGS: dict[str, type[msgspec.Struct]] = {
    "plan_create": _Create,
    "plan_update": _Update,
    "todo_add": _Add,
    "todo_update": _TodoUpdate,
}
_enc = msgspec.json.Encoder()


class PlanTools(GatedTools[PlanConfig]):
    """The plan tools of an agent whose plan configuration is enabled."""

    names = TOOL_NAMES
    noun = "plan"
    disabled = "plan tools are not enabled for this agent"

    def __init__(self, plans: Plans, settings: PlanSettings) -> None:
        super().__init__(settings)
        self._plans = plans

    def specs(self, config: PlanConfig) -> list[ToolSpec]:
        return list(_SPECS.values())

    def refusal(self, ctx: ToolCallContext) -> str | None:
        return "plan tools work inside a conversation only" if ctx.thread_id is None else None

    async def run(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
        config: PlanConfig,
    ) -> str:
        assert ctx.thread_id is not None  # refused without one
        args = msgspec.convert(arguments, _ARGS[name])
        plan = await self._run(who.org_id, ctx.thread_id, args, config)
        return _enc.encode(plan).decode()

    async def _plan(self, org: str, thread_id: UUID, plan_id: UUID | None) -> Plan:
        """The named plan, which must be this conversation's, or its latest."""
        if plan_id is None:
            plan = await self._plans.latest_in(org, thread_id)
            if plan is None:
                raise ToolRefused("this conversation has no plan yet: call plan_create first")
            return plan
        plan = await self._plans.get_in(org, plan_id)
        if plan.thread_id != thread_id:
            raise ToolRefused("plan not found in this conversation")
        return plan

    async def _run(
        self, org: str, thread_id: UUID, args: msgspec.Struct, config: PlanConfig
    ) -> Plan:
        p = self._plans
        match args:
            case _Create():
                if config.require_approval:  # a new plan is a draft
                    _only_pending(args.todos)
                return await p.create_in(
                    org, thread_id, args.title, [t.draft() for t in args.todos]
                )
            case _Update():
                plan = await self._plan(org, thread_id, args.plan_id)
                if config.require_approval and (
                    args.status == "approved"
                    or (plan.status == "draft" and args.status not in (UNSET, "draft", "cancelled"))
                ):
                    raise ToolRefused("a person approves this plan, not the model")
                return await p.update_in(
                    org, plan.id, PlanChanges(title=args.title, status=args.status)
                )
            case _Add():
                plan = await self._plan(org, thread_id, args.plan_id)
                if config.require_approval and plan.status == "draft":
                    _only_pending(args.todos)
                return await p.add_todos_in(org, plan.id, [t.draft() for t in args.todos])
            case _TodoUpdate():
                plan = await self._plan(org, thread_id, args.plan_id)
                if (
                    config.require_approval
                    and plan.status == "draft"
                    and args.status not in (UNSET, "pending")
                ):
                    raise ToolRefused("the plan awaits approval: its todos cannot start yet")
                changes = TodoChanges(
                    content=args.content,
                    active_form=args.active_form,
                    status=args.status,
                    parent_id=args.parent_id,
                    position=args.position,
                    add_depends_on=args.add_depends_on,
                    remove_depends_on=args.remove_depends_on,
                )
                return await p.update_todo_in(org, plan.id, args.todo_id, changes)
        raise ToolRefused("unknown tool")  # pragma: no cover (every name has its arguments)
