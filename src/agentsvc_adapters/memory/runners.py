"""Runners, triggers, runs and suggestions in memory (ports/runners.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_adapters.memory.projects import detach_members, naming_a_project
from agentsvc_core.entities.erasure import run_event_without_text, run_without_text, touches
from agentsvc_core.entities.runner import (
    RUN_ACTIVE,
    NewRunEvent,
    RunEvent,
    Runner,
    RunnerRun,
    Step,
    Suggestion,
    Trigger,
)
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports.runners import DaySums, Firing, ModelSums, RunnerStore, RunSums

__all__ = ["MemoryRunners"]


def _newest(items: list[RunnerRun], before: tuple[datetime, UUID] | None) -> list[RunnerRun]:
    items.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    if before is not None:
        items = [r for r in items if (r.created_at, r.id) < before]
    return items


def _day_sums() -> dict[str, Any]:
    return dict.fromkeys(
        ("runs", "succeeded", "failed", "cancelled", "paused", "tokens", "timed"), 0
    ) | {"cost_usd": 0.0, "seconds": 0.0}


def _collides(stored: RunnerRun, run: RunnerRun) -> bool:
    """PostgreSQL's unique indexes: one run per idempotency key of its runner (of
    its agent, for a scheduled task's runs), one run per tick of a trigger."""
    if stored.org_id != run.org_id:
        return False
    same_key = (
        run.idempotency_key is not None
        and stored.idempotency_key == run.idempotency_key
        and (stored.runner_id or stored.agent_id) == (run.runner_id or run.agent_id)
    )
    same_tick = (
        run.trigger_id is not None
        and run.scheduled_for is not None
        and stored.trigger_id == run.trigger_id
        and stored.scheduled_for == run.scheduled_for
    )
    return same_key or same_tick


class MemoryRunners(RunnerStore):
    def __init__(
        self,
        agent_exists: Callable[[str, UUID], bool],
        project_exists: Callable[[str, UUID], bool],
    ) -> None:
        self._agent_exists = agent_exists  # PostgreSQL's foreign keys, with _owned
        self._project_exists = project_exists  # and a runner's project
        self._runners: dict[tuple[str, UUID], Runner] = {}
        self._triggers: dict[UUID, Trigger] = {}
        self._runs: dict[UUID, RunnerRun] = {}
        self._suggestions: dict[UUID, Suggestion] = {}
        self._events: dict[tuple[str, UUID], list[RunEvent]] = {}  # a run's

    # --- runners ----------------------------------------------------------------
    async def add(self, runner: Runner) -> None:
        self._runners[(runner.org_id, runner.id)] = naming_a_project(self._project_exists, runner)

    async def get(self, org_id: str, runner_id: UUID) -> Runner:
        try:
            return self._runners[(org_id, runner_id)]
        except KeyError:
            raise NotFound("runner not found") from None

    async def list_all(self, org_id: str, *, project_id: UUID | None = None) -> list[Runner]:
        mine = [
            r
            for (o, _), r in self._runners.items()
            if o == org_id and (project_id is None or r.project_id == project_id)
        ]
        return sorted(mine, key=lambda r: (r.created_at, r.id), reverse=True)

    def detach(self, org_id: str, project_id: UUID) -> int:
        """The runners of the project let go of it (``MemoryProjects.delete``)."""
        return detach_members(self._runners, org_id, project_id)

    async def replace(self, runner: Runner) -> None:
        await self.get(runner.org_id, runner.id)
        self._runners[(runner.org_id, runner.id)] = naming_a_project(self._project_exists, runner)

    async def delete(self, org_id: str, runner_id: UUID) -> None:
        await self.get(org_id, runner_id)
        del self._runners[(org_id, runner_id)]
        self._drop(lambda x: x.org_id == org_id and x.runner_id == runner_id)

    async def sealed_runners(self, org_id: str | None) -> list[Runner]:
        return [
            r
            for (o, _), r in self._runners.items()
            if (org_id is None or o == org_id) and any(st.headers for st in r.steps)
        ]

    async def reseal_steps(self, runner: Runner, steps: tuple[Step, ...]) -> bool:
        stored = self._runners.get((runner.org_id, runner.id))
        if stored is None or stored.updated_at != runner.updated_at:
            return False
        self._runners[(runner.org_id, runner.id)] = msgspec.structs.replace(stored, steps=steps)
        return True

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        """An agent's scheduled tasks and their runs go with the agent."""
        self._drop(lambda x: x.org_id == org_id and x.agent_id == agent_id)

    def scrub_thread(self, org_id: str, thread_id: UUID) -> set[str]:
        """The runs that talked in the thread keep no text of it; their traces' ids."""
        traces: set[str] = set()
        for run_id, run in list(self._runs.items()):
            if run.org_id == org_id and touches(run, thread_id):
                self._runs[run_id] = run_without_text(run, thread_id)
                told = self._events.get((org_id, run_id), [])
                told[:] = [run_event_without_text(e, run, thread_id) for e in told]
                if run.trace_id is not None:
                    traces.add(run.trace_id)
        return traces

    def _owned(self, x: Trigger | RunnerRun | Suggestion) -> None:
        """Raises ``NotFound`` when ``x`` names a runner or an agent that is not there."""
        if x.runner_id is not None and (x.org_id, x.runner_id) not in self._runners:
            raise NotFound("runner not found")
        if x.agent_id is not None and not self._agent_exists(x.org_id, x.agent_id):
            raise NotFound("agent not found")

    def _drop(self, owned: Callable[[Trigger | RunnerRun | Suggestion], bool]) -> None:
        for store in (self._triggers, self._runs, self._suggestions):
            for key in [k for k, v in store.items() if owned(v)]:
                self._events.pop((store[key].org_id, key), None)  # a run's events go with it
                del store[key]

    # --- triggers ---------------------------------------------------------------
    async def add_trigger(self, trigger: Trigger) -> None:
        self._owned(trigger)
        self._triggers[trigger.id] = trigger

    async def get_trigger(self, org_id: str, trigger_id: UUID) -> Trigger:
        t = self._triggers.get(trigger_id)
        if t is None or t.org_id != org_id:
            raise NotFound("trigger not found")
        return t

    async def triggers(
        self, org_id: str, *, runner_id: UUID | None = None, agent_id: UUID | None = None
    ) -> list[Trigger]:
        found = [
            t
            for t in self._triggers.values()
            if t.org_id == org_id
            and (runner_id is None or t.runner_id == runner_id)
            and (agent_id is None or t.agent_id == agent_id)
        ]
        return sorted(found, key=lambda t: (t.created_at, t.id))

    async def replace_trigger(self, trigger: Trigger) -> None:
        await self.get_trigger(trigger.org_id, trigger.id)
        self._owned(trigger)
        self._triggers[trigger.id] = trigger

    async def delete_trigger(self, org_id: str, trigger_id: UUID) -> None:
        await self.get_trigger(org_id, trigger_id)
        del self._triggers[trigger_id]

    async def by_token(self, token_hash: bytes) -> Trigger | None:
        return next((t for t in self._triggers.values() if t.token_hash == token_hash), None)

    # --- runs -------------------------------------------------------------------
    async def add_run(self, run: RunnerRun) -> tuple[RunnerRun, bool]:
        taken = self._taken(run)
        if taken is not None:
            return taken, False
        if run.id in self._runs:
            raise Conflict("the run exists")
        self._owned(run)
        self._runs[run.id] = run
        return run, True

    def _taken(self, run: RunnerRun) -> RunnerRun | None:
        """The stored run that ``run`` collides with (its key first)."""
        found = [r for r in self._runs.values() if _collides(r, run)]
        found.sort(key=lambda r: r.idempotency_key != run.idempotency_key)
        return found[0] if found else None

    async def get_run(self, org_id: str, run_id: UUID) -> RunnerRun:
        r = self._runs.get(run_id)
        if r is None or r.org_id != org_id:
            raise NotFound("run not found")
        return r

    async def runs(
        self,
        org_id: str,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
        status: str | None = None,
        since: datetime | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[RunnerRun]:
        found = [
            r
            for r in self._runs.values()
            if r.org_id == org_id
            and (runner_id is None or r.runner_id == runner_id)
            and (agent_id is None or (r.agent_id == agent_id and r.runner_id is None))
            and (status is None or r.status == status)
            and (since is None or r.created_at >= since)
        ]
        return _newest(found, before)[:limit]

    async def save_run(
        self, run: RunnerRun, events: Sequence[NewRunEvent] = ()
    ) -> RunnerRun | None:
        stored = await self.get_run(run.org_id, run.id)
        if stored.version != run.version:
            return None
        saved = msgspec.structs.replace(run, version=run.version + 1)
        self._runs[run.id] = saved
        told = self._events.setdefault((run.org_id, run.id), [])
        for e in events:
            told.append(
                RunEvent(
                    run_id=run.id, seq=len(told) + 1, type=e.type, data=e.data, created_at=e.at
                )
            )
        return saved

    async def run_events(
        self, org_id: str, run_id: UUID, *, after: int, limit: int
    ) -> list[RunEvent]:
        return [e for e in self._events.get((org_id, run_id), []) if e.seq > after][:limit]

    async def spent_since(self, org_id: str, runner_id: UUID, since: datetime) -> tuple[int, float]:
        mine = [
            r
            for r in self._runs.values()
            if r.org_id == org_id and r.runner_id == runner_id and r.created_at >= since
        ]
        return sum(r.tokens for r in mine), sum(r.cost_usd for r in mine)

    async def run_sums(self, org_id: str, runner_id: UUID, since: datetime) -> RunSums:
        mine = _newest(
            [
                r
                for r in self._runs.values()
                if r.org_id == org_id and r.runner_id == runner_id and r.created_at >= since
            ],
            None,
        )
        days: dict[date, dict[str, Any]] = {}
        models: dict[str, dict[str, Any]] = {}
        for r in mine:
            day = days.setdefault(r.created_at.astimezone(UTC).date(), _day_sums())
            day["runs"] += 1
            if r.status in ("succeeded", "failed", "cancelled", "paused"):
                day[r.status] += 1
            day["tokens"] += r.tokens
            day["cost_usd"] += r.cost_usd
            if r.ended and r.ended_at is not None:
                day["timed"] += 1
                day["seconds"] += (r.ended_at - (r.started_at or r.created_at)).total_seconds()
            for st in r.steps:
                if st.model is not None:
                    m = models.setdefault(st.model, {"steps": 0, "tokens": 0, "cost_usd": 0.0})
                    m["steps"] += 1
                    m["tokens"] += st.tokens
                    m["cost_usd"] += st.cost_usd
        return RunSums(
            days=[DaySums(day=d, **days[d]) for d in sorted(days)],
            models=[ModelSums(model=name, **m) for name, m in models.items()],
        )

    async def stale_runs(self, before: datetime, limit: int = 100) -> list[tuple[str, UUID]]:
        stale = [
            r
            for r in self._runs.values()
            if r.status in ("queued", "running") and r.updated_at < before
        ]
        stale.sort(key=lambda r: (r.updated_at, r.id))
        return [(r.org_id, r.id) for r in stale[:limit]]

    async def fire_due(
        self, now: datetime, decide: Callable[[Trigger, bool], Firing], limit: int = 100
    ) -> list[RunnerRun]:
        due = [
            t
            for t in self._triggers.values()
            if t.kind == "cron"
            and t.enabled
            and t.next_fire_at is not None
            and t.next_fire_at <= now
        ]
        due.sort(key=lambda t: (t.next_fire_at or now, t.id))
        created: list[RunnerRun] = []
        for t in due[:limit]:
            busy = any(r.trigger_id == t.id and r.status in RUN_ACTIVE for r in self._runs.values())
            next_at, run = decide(t, busy)
            self._triggers[t.id] = msgspec.structs.replace(
                t, next_fire_at=next_at, last_fired_at=t.next_fire_at
            )
            # a tick stored already is not stored again
            if run is not None and self._taken(run) is None and run.id not in self._runs:
                self._runs[run.id] = run
                created.append(run)
        return created

    # --- suggestions ------------------------------------------------------------
    async def add_suggestions(self, suggestions: Sequence[Suggestion]) -> None:
        for s in suggestions:
            self._owned(s)
        for s in suggestions:
            self._suggestions[s.id] = s

    async def suggestions(
        self,
        org_id: str,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
        dismissed: bool | None = None,
        before: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[Suggestion]:
        found = [
            s
            for s in self._suggestions.values()
            if s.org_id == org_id
            and s.runner_id == runner_id
            and s.agent_id == agent_id
            and (dismissed is None or s.dismissed == dismissed)
        ]
        found.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        if before is not None:
            found = [s for s in found if (s.created_at, s.id) < before]
        return found[:limit]

    async def set_dismissed(
        self, org_id: str, suggestion_id: UUID, dismissed: bool, at: datetime
    ) -> Suggestion:
        s = self._suggestions.get(suggestion_id)
        if s is None or s.org_id != org_id:
            raise NotFound("suggestion not found")
        s = msgspec.structs.replace(s, dismissed=dismissed, updated_at=at)
        self._suggestions[suggestion_id] = s
        return s
