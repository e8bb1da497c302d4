"""An agent's scheduled tasks (``/api/agents/{id}/scheduled-tasks``; docs/runners.md):
prompts it runs on a cron into a thread. Their runs are runner runs
(``runner_schemas.RunOut``)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

import msgspec
from litestar import Controller, get, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from msgspec import Meta

from agentsvc_core.entities.runner import Overlap, Trigger
from agentsvc_core.use_cases.scheduled_tasks import MAX_TASKS, ScheduledTasks, TaskDraft
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.runners.schemas import (
    WRITE,
    Cursor,
    Limit,
    Req,
    RunListOut,
    RunOut,
    next_cursor,
)
from agentsvc_web.drafts import camel_body, draft_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied, read_cursor

__all__ = ["ScheduledTasksController", "TaskBody", "TaskOut", "TasksBody", "TasksOut"]

# a task as the API takes it: TaskDraft's fields, in camelCase
if TYPE_CHECKING:
    TaskBody = TaskDraft
else:
    TaskBody = camel_body(TaskDraft, "TaskBody", __name__)


class TasksBody(msgspec.Struct, rename="camel"):
    tasks: Annotated[list[TaskBody], Meta(max_length=MAX_TASKS)]


class TaskOut(msgspec.Struct):
    id: UUID
    name: str
    prompt: str
    cron: str
    timezone: str
    enabled: bool
    thread_id: UUID | None
    overlap: Overlap
    end_at: datetime | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, t: Trigger) -> TaskOut:
        return copied(
            cls,
            t,
            prompt=t.prompt or "",
            cron=t.cron or "",
            next_run_at=t.next_fire_at,
            last_run_at=t.last_fired_at,
        )


class TasksOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    tasks: list[TaskOut]


class ScheduledTasksController(Controller):
    path = "/api/agents/{agent_id:uuid}/scheduled-tasks"
    tags = ["runners"]

    @get(
        "/",
        operation_id="getScheduledTasks",
        responses=errors(404),
        summary="The agent's scheduled tasks (prompts it runs on a cron into a thread)",
    )
    async def get_tasks(
        self,
        request: Req,
        scheduled_tasks: NamedDependency[ScheduledTasks],
        agent_id: FromPath[UUID],
    ) -> TasksOut:
        who = principal_of(request)
        tasks = await scheduled_tasks.list_tasks(who, agent_id)
        return TasksOut(agent_id=agent_id, org_id=who.org_id, tasks=[TaskOut.of(t) for t in tasks])

    @get(
        "/runs",
        operation_id="listScheduledTaskRuns",
        responses=errors(404, 422),
        summary="The runs of the agent's scheduled tasks, newest first, by pages",
    )
    async def list_runs(
        self,
        request: Req,
        scheduled_tasks: NamedDependency[ScheduledTasks],
        agent_id: FromPath[UUID],
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> RunListOut:
        runs = await scheduled_tasks.runs(
            principal_of(request), agent_id, before=read_cursor(cursor), limit=limit
        )
        return RunListOut(runs=[RunOut.of(r) for r in runs], next_cursor=next_cursor(runs, limit))

    @put(
        "/",
        operation_id="putScheduledTasks",
        responses=WRITE,
        summary="Set the agent's scheduled tasks (the list replaces the stored one)",
    )
    async def put_tasks(
        self,
        request: Req,
        scheduled_tasks: NamedDependency[ScheduledTasks],
        agent_id: FromPath[UUID],
        data: JSONBody[TasksBody],
    ) -> TasksOut:
        who = principal_of(request)
        drafts = [draft_of(t, TaskDraft) for t in data.tasks]
        tasks = await scheduled_tasks.set_tasks(who, agent_id, drafts)
        return TasksOut(agent_id=agent_id, org_id=who.org_id, tasks=[TaskOut.of(t) for t in tasks])
