"""An agent's scheduled tasks and improvement suggestions
(``/api/agents/{id}/scheduled-tasks``, ``/api/agents/{id}/suggestions``;
docs/runners.md)."""

from __future__ import annotations

from uuid import UUID

import msgspec
from litestar import Controller, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from agentsvc_core.use_cases.schedules import ScheduledTasks, TaskDraft
from agentsvc_core.use_cases.suggestions import Suggestions
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.runner_schemas import (
    WRITE,
    Cursor,
    DismissBody,
    Dismissed,
    Limit,
    Req,
    RunListOut,
    RunOut,
    SuggestionListOut,
    SuggestionOut,
    TaskOut,
    TasksBody,
    TasksOut,
    next_cursor,
    suggestion_page,
)
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import read_cursor


class AgentSuggestionsController(Controller):
    path = "/api/agents/{agent_id:uuid}/suggestions"
    tags = ["runners"]

    @get(
        "/",
        operation_id="listAgentSuggestions",
        responses=errors(404, 422),
        summary="Improvement suggestions for the agent, newest first, by pages",
    )
    async def listsuggestion_page(
        self,
        request: Req,
        suggestions: NamedDependency[Suggestions],
        agent_id: FromPath[UUID],
        dismissed: Dismissed = None,
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> SuggestionListOut:
        who = principal_of(request)
        return await suggestion_page(
            suggestions, who, {"agent_id": agent_id}, dismissed, cursor, limit
        )

    @post(
        "/",
        operation_id="generateAgentSuggestions",
        responses=errors(404, 422, 502),
        summary="Ask the agent's model for suggestions from its recent turns",
    )
    async def generate(
        self, request: Req, suggestions: NamedDependency[Suggestions], agent_id: FromPath[UUID]
    ) -> list[SuggestionOut]:
        made = await suggestions.generate(principal_of(request), agent_id=agent_id)
        return [SuggestionOut.of(s) for s in made]

    @put(
        "/",
        operation_id="dismissAgentSuggestion",
        responses=WRITE,
        summary="Dismiss a suggestion (dismissed: false brings it back)",
    )
    async def dismiss(
        self,
        request: Req,
        suggestions: NamedDependency[Suggestions],
        agent_id: FromPath[UUID],
        data: JSONBody[DismissBody],
    ) -> SuggestionOut:
        s = await suggestions.set_dismissed(
            principal_of(request), data.suggestion_id, data.dismissed, agent_id=agent_id
        )
        return SuggestionOut.of(s)


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
        drafts = [msgspec.convert(msgspec.structs.asdict(t), TaskDraft) for t in data.tasks]
        tasks = await scheduled_tasks.set_tasks(who, agent_id, drafts)
        return TasksOut(agent_id=agent_id, org_id=who.org_id, tasks=[TaskOut.of(t) for t in tasks])
