"""A run's events (``GET /api/runners/{id}/runs/{runId}/events``): what each of the
run's state changes told, stored with the change, numbered from 1 per run.

``run_events`` is a pure function of the run before and after a change
(``runs.save_run`` passes both to the store, which writes the run and its events
in one statement: a change that loses its compare-and-set stores no event, so
every event is told exactly once and in the order of the changes). Nothing is
told once the run has ended: ``run.finished`` or ``run.cancelled`` is a run's
last event (a step that ends after its run was cancelled is in the run, not in
its events).

Followers in any process (``RunFeed.follow``) are ``sequenced.Followers``, as a
code session's timeline's: after a change with events ``ThreadNews`` carries the
run's id to every process (PostgreSQL's NOTIFY, or in-process); a follower wakes
on it and reads the store, and reads it every ``poll_s`` anyway."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any
from uuid import UUID

from agentsvc_core.entities.runner import NewRunEvent, RunEvent, RunnerRun, StepRun
from agentsvc_core.ports import ThreadNews
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.use_cases.sequenced import BATCH, Followers, next_after

__all__ = ["FINAL", "RunFeed", "run_events"]

FINAL = frozenset({"run.finished", "run.cancelled"})  # a run's last event


def _step_data(index: int, state: StepRun) -> dict[str, Any]:
    return {"step_id": state.step_id, "index": index, "attempt": state.attempt}


def _step_events(index: int, was: StepRun, now: StepRun, at: datetime) -> list[NewRunEvent]:
    data = _step_data(index, now)
    if now.status == "running" and now.attempt > was.attempt:
        data["thread_id"] = None if now.thread_id is None else str(now.thread_id)
        return [NewRunEvent("step.started", data, now.started_at or at)]
    if now.status == was.status:
        return []
    if now.status == "skipped":
        return [NewRunEvent("step.skipped", data, at)]
    if now.status not in ("succeeded", "failed"):
        return []
    data.update(
        thread_id=None if now.thread_id is None else str(now.thread_id),
        output=now.output,
        tokens=now.tokens,
        cost_usd=now.cost_usd,
        model=now.model,
    )
    if now.status == "failed":
        data["error"] = now.error
        return [NewRunEvent("step.failed", data, now.ended_at or at)]
    return [NewRunEvent("step.finished", data, now.ended_at or at)]


def _run_event(before: RunnerRun, after: RunnerRun) -> NewRunEvent | None:
    at = after.ended_at or after.updated_at
    spent: dict[str, Any] = {"tokens": after.tokens, "cost_usd": after.cost_usd}
    if after.status == before.status:
        return None
    if after.status == "paused":
        data = {"reason": after.paused_reason, "error": after.error, **spent}
        return NewRunEvent("run.paused", data | {"budget_warning": after.budget_warning}, at)
    if before.status == "paused" and after.status == "queued":
        extra = {"budget_extra_usd": after.budget_extra_usd}
        return NewRunEvent(
            "run.resumed", extra | {"budget_extra_tokens": after.budget_extra_tokens}, at
        )
    if after.status == "cancelled":
        return NewRunEvent("run.cancelled", {"status": "cancelled", **spent}, at)
    if after.status in ("succeeded", "failed"):
        data = {"status": after.status, "output": after.output, "error": after.error}
        return NewRunEvent("run.finished", data | spent, at)
    return None


def run_events(before: RunnerRun, after: RunnerRun) -> list[NewRunEvent]:
    """What the change from ``before`` to ``after`` tells, in order: the run's
    start, its steps' starts and ends (by index), then a pause, a resume, a cancel
    or the run's end. None once ``before`` has ended."""
    if before.ended:
        return []
    made: list[NewRunEvent] = []
    if before.started_at is None and after.started_at is not None:
        made.append(NewRunEvent("run.started", {"trace_id": after.trace_id}, after.started_at))
    at = after.updated_at
    for index, (was, now) in enumerate(zip(before.steps, after.steps, strict=False)):
        made.extend(_step_events(index, was, now, at))
    told = _run_event(before, after)
    if told is not None:
        made.append(told)
    return made


class RunFeed:
    """A run's events by pages, and followed live."""

    def __init__(
        self, store: RunnerStore, news: ThreadNews | None = None, poll_s: float = 1.0
    ) -> None:
        self._store = store
        self._followers = Followers(news, poll_s)

    async def page(
        self, org_id: str, run_id: UUID, *, after: int, limit: int
    ) -> tuple[list[RunEvent], int | None]:
        """A page of the run's events, oldest first, and the ``after`` of the next
        page (None: nothing more for now)."""
        rows = await self._store.run_events(org_id, run_id, after=after, limit=limit)
        return rows, next_after(rows, limit)

    def follow(
        self, org_id: str, run_id: UUID, after: int, keepalive_s: float
    ) -> AsyncGenerator[list[RunEvent] | None]:
        """Batches of the run's events after ``after`` as they are stored; None when
        nothing came for ``keepalive_s``; ends after the run's last event (at once
        when the run had ended and every event was given, or is gone)."""

        async def read(seen: int) -> list[RunEvent]:
            return await self._store.run_events(org_id, run_id, after=seen, limit=BATCH)

        async def ended() -> bool:
            return (await self._store.get_run(org_id, run_id)).ended

        return self._followers.follow(
            run_id, after, keepalive_s, read=read, ended=ended, last=_final
        )


def _final(event: RunEvent) -> bool:
    return event.type in FINAL
