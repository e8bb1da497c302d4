"""Storage of runners (``Storage.runners``): runners, their triggers, runs and
suggestions, and the agents' scheduled tasks (triggers owned by an agent).

Every call is scoped by organization (another organization's id is ``NotFound``)
except the three the background work makes across organizations: ``by_token``
(the inbound webhook names no organization), ``fire_due`` and ``stale_runs``.
Runs are written by compare-and-set on ``version``: ``save_run`` stores only over
the version it read, so a cancel and the engine's checkpoint cannot overwrite each
other. Adapters raise what storage raises (``NotFound``, ``StorageError``,
``Unavailable``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import (
    NewRunEvent,
    RunEvent,
    Runner,
    RunnerRun,
    Step,
    Suggestion,
    Trigger,
)

__all__ = ["DaySums", "Firing", "ModelSums", "RunSums", "RunnerStore"]


class DaySums(msgspec.Struct, frozen=True):
    """The sums of a runner's runs created on one day (UTC): how many, by status
    (``queued`` and ``running`` are the rest), their tokens and cost, and the
    ended runs (succeeded, failed, cancelled) with an end time: how many, and the
    seconds they took in all (from their start, else their creation)."""

    day: date
    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    paused: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    timed: int = 0
    seconds: float = 0.0


class ModelSums(msgspec.Struct, frozen=True):
    """The sums of the steps (of a runner's runs) that name ``model``."""

    model: str
    steps: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class RunSums(msgspec.Struct, frozen=True, kw_only=True):
    """``RunnerStore.run_sums``: by day, oldest first (days without a run left
    out), and by model, in no order."""

    days: list[DaySums]
    models: list[ModelSums]


# What the scheduler decides for a due trigger (``fire_due``): the trigger's next
# tick (None: no more) and the run to create for this tick (None: skip it).
Firing = tuple["datetime | None", "RunnerRun | None"]


class RunnerStore(Protocol):
    # --- runners ----------------------------------------------------------------
    async def add(self, runner: Runner) -> None: ...

    async def get(self, org_id: str, runner_id: UUID) -> Runner:
        """Raises ``NotFound``."""
        ...

    async def list_all(self, org_id: str, *, project_id: UUID | None = None) -> list[Runner]:
        """Newest first; with ``project_id``, only that project's."""
        ...

    async def replace(self, runner: Runner) -> None:
        """Store every field of the runner. Raises ``NotFound``."""
        ...

    async def delete(self, org_id: str, runner_id: UUID) -> None:
        """The runner, its triggers, runs and suggestions. Raises ``NotFound``."""
        ...

    async def sealed_runners(self, org_id: str | None) -> list[Runner]:
        """Every runner with a step that has sealed headers (all organizations when
        ``org_id`` is None: the key-rotation command)."""
        ...

    async def reseal_steps(self, runner: Runner, steps: tuple[Step, ...]) -> bool:
        """Store ``steps`` (the same steps, headers sealed again) if the runner was
        not changed since ``runner`` was read (its ``updated_at``); False otherwise.
        ``updated_at`` stays."""
        ...

    # --- triggers (a runner's, or an agent's scheduled tasks) -------------------
    async def add_trigger(self, trigger: Trigger) -> None:
        """Raises ``NotFound`` when the runner or agent named is not there."""
        ...

    async def get_trigger(self, org_id: str, trigger_id: UUID) -> Trigger:
        """Raises ``NotFound``."""
        ...

    async def triggers(
        self, org_id: str, *, runner_id: UUID | None = None, agent_id: UUID | None = None
    ) -> list[Trigger]:
        """The runner's (or the agent's) triggers, oldest first."""
        ...

    async def replace_trigger(self, trigger: Trigger) -> None:
        """Raises ``NotFound``."""
        ...

    async def delete_trigger(self, org_id: str, trigger_id: UUID) -> None:
        """Raises ``NotFound``."""
        ...

    async def by_token(self, token_hash: bytes) -> Trigger | None:
        """The trigger whose token hashes to ``token_hash`` (any organization)."""
        ...

    # --- runs -------------------------------------------------------------------
    async def add_run(self, run: RunnerRun) -> tuple[RunnerRun, bool]:
        """Store a new run: ``(run, True)``. When the runner already has a run with
        the same ``idempotency_key`` (any status, kept as long as the run; for an
        agent's scheduled-task runs, the agent), or the trigger a run for the same
        ``scheduled_for`` (a cron tick), answers that run and ``False`` and stores
        nothing. Raises ``NotFound`` when the runner or agent named is not there,
        ``Conflict`` when a run with this id exists."""
        ...

    async def get_run(self, org_id: str, run_id: UUID) -> RunnerRun:
        """Raises ``NotFound``."""
        ...

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
        """Newest first (``created_at``, then id), older than ``before`` when given,
        created at or after ``since`` when given; the runner's (or the agent's
        scheduled tasks') runs."""
        ...

    async def save_run(
        self, run: RunnerRun, events: Sequence[NewRunEvent] = ()
    ) -> RunnerRun | None:
        """Store the run over the stored ``run.version`` (the one it was read at):
        the stored run, its version one more; None when another write came first
        (read it again). ``events`` are stored with it, atomically, numbered after
        the run's last (nothing is stored when the run is not). Raises ``NotFound``."""
        ...

    async def run_events(
        self, org_id: str, run_id: UUID, *, after: int, limit: int
    ) -> list[RunEvent]:
        """The run's events numbered after ``after``, oldest first (none for a run
        that is not there)."""
        ...

    async def spent_since(self, org_id: str, runner_id: UUID, since: datetime) -> tuple[int, float]:
        """Tokens and cost of the runner's runs created at or after ``since``."""
        ...

    async def run_sums(self, org_id: str, runner_id: UUID, since: datetime) -> RunSums:
        """The sums of the runner's runs created at or after ``since``, by the day
        (UTC) they were created, and of their steps by model (steps with no model
        left out): the runner's analytics, summed where the runs are kept."""
        ...

    async def stale_runs(self, before: datetime, limit: int = 100) -> list[tuple[str, UUID]]:
        """(organization, id) of queued or running runs not written since ``before``
        (any organization): the sweep queues them again."""
        ...

    async def fire_due(
        self, now: datetime, decide: Callable[[Trigger, bool], Firing], limit: int = 100
    ) -> list[RunnerRun]:
        """For each enabled cron trigger (runner or agent) whose ``next_fire_at`` is
        at or before ``now`` (at most ``limit``, any organization): ``decide(trigger,
        busy)`` (``busy``: the trigger has a queued, running or paused run) answers
        its next tick and the run to create; both are stored together, atomically
        with respect to other processes doing the same (a tick is taken once, by
        one of them). The trigger's ``last_fired_at`` becomes the tick that was
        due. A run whose tick is stored already is not stored again nor answered.
        Answers the runs created."""
        ...

    # --- suggestions ------------------------------------------------------------
    async def add_suggestions(self, suggestions: Sequence[Suggestion]) -> None:
        """All or none. Raises ``NotFound`` when a runner or agent named is not there."""
        ...

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
        """Newest first."""
        ...

    async def set_dismissed(
        self, org_id: str, suggestion_id: UUID, dismissed: bool, at: datetime
    ) -> Suggestion:
        """Raises ``NotFound``."""
        ...
