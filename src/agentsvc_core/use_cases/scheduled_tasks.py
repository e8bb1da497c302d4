"""Agents' scheduled tasks (``/api/agents/{id}/scheduled-tasks``): prompts an agent
runs on a cron into a thread (docs/runners.md#scheduled-tasks).

A task is a cron trigger owned by the agent, fired by the same scheduler as
runners' cron triggers (``RunnerRuns.fire_due``); each firing is a run of one
``agent`` step sent to the task's thread (or to a new thread per firing), with its
status, output, tokens and cost kept like any run's.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import Overlap, RunnerRun, Trigger
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock, ThreadRepository
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.rules import MAX_CONTENT, MAX_NAME, check_text
from agentsvc_core.use_cases.runners.definitions import Runners
from agentsvc_core.use_cases.runners.triggers import TriggerChanges, TriggerDraft, check_cron

__all__ = ["MAX_TASKS", "ScheduledTasks", "TaskDraft"]

MAX_TASKS = 50


class TaskDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A task as written; ``id`` names a stored task to change (None: a new one).
    The request body is these fields in camelCase (controllers/scheduled_tasks.py)."""

    id: UUID | None = None
    name: str = ""
    prompt: str
    cron: str
    timezone: str = "UTC"
    enabled: bool = True
    thread_id: UUID | None = None
    overlap: Overlap = "skip"
    end_at: datetime | None = None


class ScheduledTasks:
    def __init__(
        self,
        store: RunnerStore,
        runners: Runners,
        agents: AgentRepository,
        threads: ThreadRepository,
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._store = store
        self._runners = runners
        self._agents = agents
        self._threads = threads

    async def list_tasks(self, who: Principal, agent_id: UUID) -> list[Trigger]:
        await self._agents.get(who.org_id, agent_id)
        return await self._store.triggers(who.org_id, agent_id=agent_id)

    async def runs(
        self,
        who: Principal,
        agent_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> list[RunnerRun]:
        """The runs of the agent's scheduled tasks, newest first (each a run of one
        agent step: its status, output, tokens and cost)."""
        await self._agents.get(who.org_id, agent_id)
        return await self._store.runs(who.org_id, agent_id=agent_id, before=before, limit=limit)

    async def set_tasks(
        self, who: Principal, agent_id: UUID, drafts: list[TaskDraft]
    ) -> list[Trigger]:
        """Make the agent's tasks these: a draft with a stored task's id changes it,
        one without adds a task, and a stored task no draft names goes."""
        if not who.is_admin:
            raise PermissionDenied("scheduled tasks are managed by the organization's admins")
        await self._agents.get(who.org_id, agent_id)
        if len(drafts) > MAX_TASKS:
            raise InvalidInput("tasks", f"at most {MAX_TASKS}")
        stored = {t.id: t for t in await self._store.triggers(who.org_id, agent_id=agent_id)}
        now = self._clock.now()
        for d in drafts:  # every task checked before anything is written
            check_text("prompt", d.prompt, max_len=MAX_CONTENT, required=True)
            check_text("name", d.name, max_len=MAX_NAME)
            check_cron(d.cron, d.timezone, self._runners.cron_min_interval_s, now)
            if d.id is not None and d.id not in stored:
                raise InvalidInput("id", f"the agent has no task {d.id}")
            if d.thread_id is not None:
                try:
                    thread = await self._threads.get(who.org_id, d.thread_id)
                except NotFound:
                    raise InvalidInput("thread_id", "no such thread") from None
                if thread.agent_id != agent_id:
                    raise InvalidInput("thread_id", "a thread of another agent")
        kept = {d.id for d in drafts if d.id is not None}
        for task_id in set(stored) - kept:
            await self._store.delete_trigger(who.org_id, task_id)
        for d in drafts:
            fields = msgspec.structs.asdict(d)
            task_id = fields.pop("id")
            if task_id is None:
                draft = TriggerDraft(kind="cron", **fields)
                await self._runners.new_trigger(who.org_id, draft, agent_id=agent_id)
            else:
                await self._runners.change_trigger(stored[task_id], TriggerChanges(**fields))
        return await self._store.triggers(who.org_id, agent_id=agent_id)
