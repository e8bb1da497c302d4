"""Runners: headless agent pipelines, their triggers, budgets and runs (docs/runners.md).

A runner is an ordered list of steps. A run executes a snapshot of those steps
(``RunnerRun.pipeline``: editing the runner never changes a run in flight), one
step at a time, each step's state checkpointed in the run's row. An agent's
scheduled task is a trigger owned by the agent; each firing is a run of one
``agent`` step (``RunnerRun.runner_id`` is None, ``agent_id`` names the agent).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities.skill import SkillBinding

__all__ = [
    "RUN_ACTIVE",
    "RUN_ENDED",
    "Budget",
    "NewRunEvent",
    "RunEvent",
    "RunEventType",
    "RunStatus",
    "Runner",
    "RunnerRun",
    "Step",
    "StepFields",
    "StepKind",
    "StepRun",
    "StepStatus",
    "Suggestion",
    "Trigger",
    "TriggerKind",
]

StepKind = Literal["agent", "webhook", "condition", "computer"]
TriggerKind = Literal["manual", "api", "cron", "webhook", "button"]
RunStatus = Literal["queued", "running", "paused", "succeeded", "failed", "cancelled"]
StepStatus = Literal["pending", "running", "succeeded", "failed", "skipped"]
PausedReason = Literal["budget"]
Overlap = Literal["skip", "queue"]
Catchup = Literal["none", "once"]
OnExceed = Literal["pause", "fail"]
RunEventType = Literal[
    "run.started",
    "step.started",
    "step.finished",
    "step.failed",
    "step.skipped",
    "run.paused",
    "run.resumed",
    "run.cancelled",
    "run.finished",
]

RUN_ACTIVE: frozenset[str] = frozenset({"queued", "running", "paused"})
RUN_ENDED: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})

# where a condition goes: the next step, the end of the run, or a later step's id
NEXT, STOP = "next", "stop"


class StepFields(msgspec.Struct, frozen=True, kw_only=True):
    """A step's fields but its headers: written once, for the step as stored
    (``Step``), as written (``StepDraft``) and as a request body (``StepBody``).
    Which fields matter depends on ``kind``:

    - ``agent``: a turn of ``agent_id`` on the run's thread for this step; the
      message is ``prompt`` with ``{{ expression }}`` placeholders filled, followed
      by the mapped input as JSON when ``input_mapping`` is set (only the mapped
      input, or the run's input, when there is no prompt). ``model`` overrides the
      agent's default model.
    - ``webhook``: a signed call to ``url`` (``method``), its JSON body the mapped
      input (the run's input when there is no mapping), within ``timeout_ms``.
    - ``condition``: ``expression`` over the run's context; truthy goes to
      ``if_true``, else to ``if_false`` (``next``, ``stop``, or a later step's id).
    - ``computer``: ``command`` (``{{ expression }}`` placeholders filled) run on
      the computer of ``agent_id`` (its shared instance), within its time limit;
      the output is ``{exit_code, stdout, stderr, timed_out}``, failed unless it
      exits 0.

    Expressions are JMESPath over ``{"input": ..., "steps": {id: {"status",
    "output"}}}``; a leading ``$.`` (JSONPath's root) is accepted and dropped.
    """

    id: str
    kind: StepKind
    name: str = ""
    input_mapping: dict[str, str] = {}
    # agent
    agent_id: UUID | None = None
    prompt: str | None = None
    model: str | None = None
    # webhook
    url: str | None = None
    method: str = "POST"
    timeout_ms: int = 10_000
    # computer
    command: str | None = None
    # condition
    expression: str | None = None
    if_true: str = NEXT
    if_false: str = STOP


class Step(StepFields, frozen=True, kw_only=True, omit_defaults=True):
    """One step of a runner, as stored: a webhook step's own headers sealed."""

    headers: str | None = None  # sealed JSON object of the call's own headers

    @property
    def has_headers(self) -> bool:
        return self.headers is not None


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """Limits of a runner's spending; None is no limit. Checked before each step
    and each model call of a run: a limit reached (spent >= limit), the run pauses
    (``on_exceed="pause"``, resumable) or fails. ``soft_limit_pct``: at this share
    of a limit or more the run carries a warning naming the share used
    (``RunnerRun.budget_warning``) and goes on."""

    max_cost_usd_per_run: float | None = None
    max_tokens_per_run: int | None = None
    daily_cost_usd: float | None = None
    daily_tokens: int | None = None
    soft_limit_pct: int = 80
    on_exceed: OnExceed = "pause"


class Runner(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    name: str
    description: str
    input_schema: dict[str, Any]  # JSON Schema (object root) of a run's input
    steps: tuple[Step, ...]
    skills: tuple[SkillBinding, ...]  # the skills its agent steps get (entities/skill.py)
    budget: Budget
    created_at: datetime
    updated_at: datetime
    project_id: UUID | None = None  # the project it is grouped in (entities/project.py)


class Trigger(msgspec.Struct, frozen=True, kw_only=True):
    """What starts runs of a runner (``runner_id``), or an agent's scheduled task
    (``agent_id``, always ``cron``). ``token_hash``: SHA-256 of the webhook or
    button token (the token itself is shown once). Cron fields: ``cron`` in
    ``timezone`` (IANA); ``next_fire_at`` the next tick (None once past
    ``end_at`` or disabled)."""

    id: UUID
    org_id: str
    runner_id: UUID | None
    agent_id: UUID | None
    kind: TriggerKind
    name: str
    enabled: bool
    input: dict[str, Any]  # merged under a fired run's input (defaults)
    cron: str | None = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup: Catchup = "none"
    end_at: datetime | None = None
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    token_hash: bytes | None = None
    token_hint: str | None = None  # the token's last 4 characters
    # agent scheduled tasks: the prompt sent, and the thread it goes to (None: a
    # new thread per firing)
    prompt: str | None = None
    thread_id: UUID | None = None
    created_at: datetime
    updated_at: datetime


class StepRun(msgspec.Struct, frozen=True, kw_only=True):
    """A step's state in a run. ``attempt`` counts the starts (a killed process's
    step is started again, up to a bound); ``thread_id`` is an agent step's thread."""

    step_id: str
    status: StepStatus = "pending"
    attempt: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: Any = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None
    thread_id: UUID | None = None
    turn_id: UUID | None = None  # an agent step's turn (the thread's run) once sent


class RunnerRun(msgspec.Struct, frozen=True, kw_only=True):
    """One run. ``cursor`` is the index (in ``pipeline``) of the step to run next
    (``len(pipeline)``: none left). ``budget_extra_*``: what resumes added to the
    per-run limits. ``version`` grows with every write (compare-and-set)."""

    id: UUID
    org_id: str
    runner_id: UUID | None
    agent_id: UUID | None
    trigger_id: UUID | None
    trigger_kind: TriggerKind
    status: RunStatus
    paused_reason: PausedReason | None = None
    input: dict[str, Any]
    output: Any = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    pipeline: tuple[Step, ...]
    steps: tuple[StepRun, ...]
    cursor: int = 0
    thread_id: UUID | None = None  # a scheduled task's fixed thread
    budget_extra_usd: float = 0.0
    budget_extra_tokens: int = 0
    budget_warning: str | None = None
    scheduled_for: datetime | None = None  # a cron firing's tick
    idempotency_key: str | None = None
    trace_id: str | None = None
    version: int = 0
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    updated_at: datetime

    @property
    def ended(self) -> bool:
        return self.status in RUN_ENDED


class NewRunEvent(msgspec.Struct, frozen=True):
    """An event of a run as a state change makes it, before the store numbers it."""

    type: RunEventType
    data: dict[str, Any]
    at: datetime


class RunEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One event of a run, as stored with the state change it tells of; ``seq``
    counts from 1 per run."""

    run_id: UUID
    seq: int
    type: RunEventType
    data: dict[str, Any]
    created_at: datetime


class Suggestion(msgspec.Struct, frozen=True, kw_only=True):
    """An improvement suggested for a runner or an agent from its recent runs."""

    id: UUID
    org_id: str
    runner_id: UUID | None
    agent_id: UUID | None
    title: str
    detail: str
    dismissed: bool
    created_at: datetime
    updated_at: datetime
