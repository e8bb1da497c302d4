"""Plans of a thread (``/api/plans...``) and an agent's plan configuration
(``/api/agents/{id}/plan``); docs/api.md#plans.

Plan routes are ``MEMBER`` routes: whoever may use a thread (its opener, a
participant of a multiplayer thread, an API key) may read and change its plans,
as with its messages; the use case answers 404 for a plan of a thread the caller
may not use. The agent's configuration is written by admins (the default).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.plan import Blocked, Edge, Plan, PlanStatus, Todo, TodoStatus
from agentsvc_core.partial import given_fields
from agentsvc_core.rules import MAX_TITLE
from agentsvc_core.use_cases.plan_tools import PlanConfig, PlanSettings
from agentsvc_core.use_cases.plans import (
    MAX_ADD,
    MAX_TODO_TEXT,
    PlanChanges,
    Plans,
    TodoChanges,
    TodoDraft,
)
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied

Req = Request[Any, Any, Any]
Title = Annotated[str, Meta(min_length=1, max_length=MAX_TITLE)]
Text = Annotated[str, Meta(min_length=1, max_length=MAX_TODO_TEXT)]
Form = Annotated[str, Meta(max_length=MAX_TODO_TEXT)]
WRITE = errors(400, 404, 413, 415, 422)


# --- bodies -----------------------------------------------------------------------


class PlanCreateBody(msgspec.Struct, rename="camel"):
    thread_id: UUID
    title: Title


class PlanPatchBody(msgspec.Struct, rename="camel"):
    title: Title | UnsetType = UNSET
    status: PlanStatus | UnsetType = UNSET


class TodoBody(msgspec.Struct, rename="camel"):
    content: Text
    active_form: Form | None = None
    status: TodoStatus = "pending"
    parent_id: UUID | None = None


class TodosBody(msgspec.Struct, rename="camel"):
    todos: Annotated[list[TodoBody], Meta(min_length=1, max_length=MAX_ADD)]


class TodoPatchBody(msgspec.Struct, rename="camel"):
    content: Text | UnsetType = UNSET
    active_form: Form | UnsetType | None = UNSET
    status: TodoStatus | UnsetType = UNSET
    parent_id: UUID | UnsetType | None = UNSET
    position: Annotated[int, Meta(ge=0, le=2**31 - 1)] | UnsetType = UNSET


class DependencyBody(msgspec.Struct, rename="camel"):
    depends_on: UUID


class PlanConfigBody(msgspec.Struct, rename="camel"):
    enabled: bool | UnsetType = UNSET
    require_approval: bool | UnsetType = UNSET


# --- answers ----------------------------------------------------------------------


class TodoOut(msgspec.Struct):
    id: UUID
    content: str
    active_form: str | None
    status: TodoStatus
    parent_id: UUID | None
    position: int
    blocked_by: list[UUID]
    blocks: list[UUID]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, t: Todo) -> TodoOut:
        return copied(cls, t, blocked_by=list(t.blocked_by), blocks=list(t.blocks))


class PlanOut(msgspec.Struct):
    id: UUID
    org_id: str
    thread_id: UUID
    title: str
    status: PlanStatus
    todos: list[TodoOut]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, p: Plan) -> PlanOut:
        return copied(cls, p, todos=[TodoOut.of(t) for t in p.todos])


class EdgeOut(msgspec.Struct):
    todo_id: UUID
    depends_on_id: UUID

    @classmethod
    def of(cls, e: Edge) -> EdgeOut:
        return copied(cls, e)


class BlockedOut(msgspec.Struct):
    todo_id: UUID
    waiting_on: list[UUID]

    @classmethod
    def of(cls, b: Blocked) -> BlockedOut:
        return copied(cls, b, waiting_on=list(b.waiting_on))


class ReadyOut(msgspec.Struct, omit_defaults=True):
    ready: list[TodoOut]
    # only with ?include=blocked
    blocked: list[BlockedOut] | None = None


class PlanConfigOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    require_approval: bool

    @classmethod
    def of(cls, c: PlanConfig) -> PlanConfigOut:
        return copied(cls, c)


class PlanController(Controller):
    path = "/api/plans"
    tags = ["plans"]

    @get(
        "/",
        operation_id="listPlans",
        responses=errors(404, 422),
        summary="The plans of a thread, oldest first",
    )
    async def list_plans(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        thread_id: Annotated[UUID, QueryParameter(name="threadId")],
    ) -> list[PlanOut]:
        return [
            PlanOut.of(p) for p in await plans.list_for_thread(principal_of(request), thread_id)
        ]

    @post(
        "/",
        operation_id="createPlan",
        opt=MEMBER,
        status_code=201,
        responses=WRITE,
        summary="Create a plan (a draft) for a thread",
    )
    async def create_plan(
        self, request: Req, plans: NamedDependency[Plans], data: JSONBody[PlanCreateBody]
    ) -> PlanOut:
        return PlanOut.of(await plans.create(principal_of(request), data.thread_id, data.title))

    @get("/{plan_id:uuid}", operation_id="getPlan", responses=errors(404), summary="A plan")
    async def get_plan(
        self, request: Req, plans: NamedDependency[Plans], plan_id: FromPath[UUID]
    ) -> PlanOut:
        return PlanOut.of(await plans.get(principal_of(request), plan_id))

    @patch(
        "/{plan_id:uuid}",
        operation_id="updatePlan",
        opt=MEMBER,
        responses=WRITE,
        summary="Change a plan's title or status",
    )
    async def update_plan(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        data: JSONBody[PlanPatchBody],
    ) -> PlanOut:
        changes = PlanChanges(title=data.title, status=data.status)
        return PlanOut.of(await plans.update(principal_of(request), plan_id, changes))

    @delete(
        "/{plan_id:uuid}",
        operation_id="deletePlan",
        opt=MEMBER,
        status_code=200,
        responses=errors(404),
        summary="Delete a plan with its todos",
    )
    async def delete_plan(
        self, request: Req, plans: NamedDependency[Plans], plan_id: FromPath[UUID]
    ) -> OkBody:
        await plans.delete(principal_of(request), plan_id)
        return OkBody(ok=True)

    @post(
        "/{plan_id:uuid}/todos",
        operation_id="addTodos",
        opt=MEMBER,
        status_code=201,
        responses=WRITE,
        summary="Add todos at the end of the plan; answers the plan",
    )
    async def add_todos(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        data: JSONBody[TodosBody],
    ) -> PlanOut:
        drafts = [
            TodoDraft(
                content=t.content, active_form=t.active_form, status=t.status, parent_id=t.parent_id
            )
            for t in data.todos
        ]
        return PlanOut.of(await plans.add_todos(principal_of(request), plan_id, drafts))

    @patch(
        "/{plan_id:uuid}/todos/{todo_id:uuid}",
        operation_id="updateTodo",
        opt=MEMBER,
        responses=WRITE,
        summary="Change a todo (status, text, parent, position); answers the plan",
    )
    async def update_todo(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        todo_id: FromPath[UUID],
        data: JSONBody[TodoPatchBody],
    ) -> PlanOut:
        changes = TodoChanges(**given_fields(data))
        return PlanOut.of(await plans.update_todo(principal_of(request), plan_id, todo_id, changes))

    @delete(
        "/{plan_id:uuid}/todos/{todo_id:uuid}",
        operation_id="deleteTodo",
        opt=MEMBER,
        status_code=200,
        responses=errors(404),
        summary="Delete a todo and its dependency edges",
    )
    async def delete_todo(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        todo_id: FromPath[UUID],
    ) -> OkBody:
        await plans.delete_todo(principal_of(request), plan_id, todo_id)
        return OkBody(ok=True)

    @get(
        "/{plan_id:uuid}/todos/{todo_id:uuid}/deps",
        operation_id="listTodoDependencies",
        responses=errors(404),
        summary="The todo's edges: what it depends on, then what depends on it",
    )
    async def list_deps(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        todo_id: FromPath[UUID],
    ) -> list[EdgeOut]:
        edges = await plans.dependencies(principal_of(request), plan_id, todo_id)
        return [EdgeOut.of(e) for e in edges]

    @post(
        "/{plan_id:uuid}/todos/{todo_id:uuid}/deps",
        operation_id="addTodoDependency",
        opt=MEMBER,
        status_code=201,
        responses={
            200: ResponseSpec(
                data_container=EdgeOut,
                description="The edge was there already",
                generate_examples=False,
            ),
            **errors(400, 404, 409, 413, 415, 422),
        },
        summary="Make the todo depend on another of the plan (409 DEPENDENCY_CYCLE)",
    )
    async def add_dep(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        todo_id: FromPath[UUID],
        data: JSONBody[DependencyBody],
    ) -> Response[EdgeOut]:
        edge, created = await plans.add_dependency(
            principal_of(request), plan_id, todo_id, data.depends_on
        )
        return Response(EdgeOut.of(edge), status_code=201 if created else 200)

    @delete(
        "/{plan_id:uuid}/todos/{todo_id:uuid}/deps",
        operation_id="removeTodoDependency",
        opt=MEMBER,
        status_code=200,
        responses=errors(404, 422),
        summary="Remove one edge: ?dependsOn=<todo id>",
    )
    async def remove_dep(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        todo_id: FromPath[UUID],
        depends_on: Annotated[UUID, QueryParameter(name="dependsOn")],
    ) -> OkBody:
        await plans.remove_dependency(principal_of(request), plan_id, todo_id, depends_on)
        return OkBody(ok=True)

    @get(
        "/{plan_id:uuid}/ready",
        operation_id="getReadyTodos",
        responses=errors(404, 422),
        summary="The pending todos whose blockers are all done or skipped",
    )
    async def get_ready(
        self,
        request: Req,
        plans: NamedDependency[Plans],
        plan_id: FromPath[UUID],
        include: Annotated[
            Literal["blocked"] | None,
            QueryParameter(name="include", description="blocked: also the todos that wait"),
        ] = None,
    ) -> ReadyOut:
        found = await plans.readiness(
            principal_of(request), plan_id, with_blocked=include == "blocked"
        )
        return ReadyOut(
            ready=[TodoOut.of(t) for t in found.ready],
            blocked=None if found.blocked is None else [BlockedOut.of(b) for b in found.blocked],
        )


class AgentPlanController(Controller):
    path = "/api/agents/{agent_id:uuid}/plan"
    tags = ["plans"]

    @get(
        "/",
        operation_id="getAgentPlan",
        responses=errors(404),
        summary="The agent's plan configuration (whether the model gets the plan tools)",
    )
    async def get_config(
        self,
        request: Req,
        plan_settings: NamedDependency[PlanSettings],
        agent_id: FromPath[UUID],
    ) -> PlanConfigOut:
        return PlanConfigOut.of(await plan_settings.get(principal_of(request), agent_id))

    @put(
        "/",
        operation_id="putAgentPlan",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied plan settings",
    )
    async def put_config(
        self,
        request: Req,
        plan_settings: NamedDependency[PlanSettings],
        agent_id: FromPath[UUID],
        data: JSONBody[PlanConfigBody],
    ) -> PlanConfigOut:
        config = await plan_settings.update(principal_of(request), agent_id, given_fields(data))
        return PlanConfigOut.of(config)
