"""Request bodies and answers of the runner routes (controllers/runners/routes.py,
runner_public.py, scheduled_tasks.py, suggestions.py), and their cursors."""

from __future__ import annotations

__all__ = [
    "WRITE",
    "BudgetBody",
    "BudgetOut",
    "Cursor",
    "Limit",
    "Req",
    "ResumeBody",
    "RunBody",
    "RunEventOut",
    "RunEventsOut",
    "RunListOut",
    "RunOut",
    "RunStarted",
    "RunnerBody",
    "RunnerOut",
    "RunnerPatchBody",
    "StepBody",
    "StepOut",
    "StepRunOut",
    "StepsBody",
    "TriggerBody",
    "TriggerOut",
    "TriggerPatchBody",
    "next_cursor",
    "step_draft",
]


from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast
from uuid import UUID

import msgspec
from litestar import Request
from litestar.params import QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.runner import (
    Catchup,
    OnExceed,
    Overlap,
    Runner,
    RunnerRun,
    RunStatus,
    Step,
    StepKind,
    StepRun,
    Suggestion,
    Trigger,
    TriggerKind,
)
from agentsvc_core.use_cases.runners.steps import StepDraft
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied, cursor_text
from agentsvc_web.sequenced import SequencedEventOut

Req = Request[Any, Any, Any]
WRITE = errors(400, 404, 413, 415, 422)


# --- bodies -----------------------------------------------------------------------

_Draft = TypeVar("_Draft", bound=msgspec.Struct)


def _camel_body(draft: type[_Draft], name: str) -> type[_Draft]:
    """The request body ``name`` of a core draft's fields, in camelCase: a subclass
    of the draft, so the fields are written once, in the core. msgspec renames
    only the fields a class declares itself, so each field is declared again
    here, with its type and default as the draft has them."""
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(draft):
        if f.default_factory is not msgspec.NODEFAULT:
            default = msgspec.field(default_factory=f.default_factory)
        elif f.default is not msgspec.NODEFAULT:
            default = f.default
        else:
            default = msgspec.field()
        fields.append((f.name, f.type, default))
    made = msgspec.defstruct(
        name,
        fields,
        bases=(draft,),
        module=__name__,
        rename="camel",
        frozen=draft.__struct_config__.frozen,
        kw_only=True,
    )
    return cast("type[_Draft]", made)


if TYPE_CHECKING:
    StepBody = StepDraft
else:
    # a step as a request body: the core's StepDraft in camelCase
    StepBody = _camel_body(StepDraft, "StepBody")


def step_draft(body: StepBody) -> StepDraft:
    return msgspec.convert(body, StepDraft, from_attributes=True)


class StepsBody(msgspec.Struct, rename="camel"):
    steps: list[StepBody]


class RunnerBody(msgspec.Struct, rename="camel"):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    steps: list[StepBody] = []
    skills: list[UUID] = []
    project_id: UUID | None = None


class RunnerPatchBody(msgspec.Struct, rename="camel"):
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    input_schema: dict[str, Any] | UnsetType = UNSET
    steps: list[StepBody] | UnsetType = UNSET
    project_id: UUID | UnsetType | None = UNSET


class BudgetBody(msgspec.Struct, rename="camel"):
    max_cost_usd_per_run: float | UnsetType | None = UNSET
    max_tokens_per_run: int | UnsetType | None = UNSET
    daily_cost_usd: float | UnsetType | None = UNSET
    daily_tokens: int | UnsetType | None = UNSET
    soft_limit_pct: int | UnsetType = UNSET
    on_exceed: OnExceed | UnsetType = UNSET


class TriggerBody(msgspec.Struct, rename="camel"):
    kind: TriggerKind
    name: str = ""
    enabled: bool = True
    input: dict[str, Any] = {}
    cron: str | None = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup: Catchup = "none"
    end_at: datetime | None = None


class TriggerPatchBody(msgspec.Struct, rename="camel"):
    name: str | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    input: dict[str, Any] | UnsetType = UNSET
    cron: str | UnsetType = UNSET
    timezone: str | UnsetType = UNSET
    overlap: Overlap | UnsetType = UNSET
    catchup: Catchup | UnsetType = UNSET
    end_at: datetime | UnsetType | None = UNSET


class RunBody(msgspec.Struct, rename="camel"):
    input: dict[str, Any] = {}


class ResumeBody(msgspec.Struct, rename="camel"):
    raise_budget_usd: Annotated[float, Meta(ge=0, le=1_000_000)] = 0.0
    raise_budget_tokens: Annotated[int, Meta(ge=0, le=10**12)] = 0


# --- answers ----------------------------------------------------------------------


class StepOut(msgspec.Struct):
    id: str
    kind: StepKind
    name: str
    input_mapping: dict[str, str]
    agent_id: UUID | None
    prompt: str | None
    model: str | None
    url: str | None
    method: str | None
    has_headers: bool
    timeout_ms: int | None
    command: str | None
    expression: str | None
    if_true: str | None
    if_false: str | None

    @classmethod
    def of(cls, s: Step) -> StepOut:
        webhook, condition = s.kind == "webhook", s.kind == "condition"
        return copied(
            cls,
            s,
            method=s.method if webhook else None,
            timeout_ms=s.timeout_ms if webhook else None,
            if_true=s.if_true if condition else None,
            if_false=s.if_false if condition else None,
        )


class BudgetOut(msgspec.Struct):
    runner_id: UUID
    max_cost_usd_per_run: float | None
    max_tokens_per_run: int | None
    daily_cost_usd: float | None
    daily_tokens: int | None
    soft_limit_pct: int
    on_exceed: OnExceed

    @classmethod
    def of(cls, r: Runner) -> BudgetOut:
        return copied(cls, r.budget, runner_id=r.id)


class RunnerOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    description: str
    input_schema: dict[str, Any]
    steps: list[StepOut]
    skills: list[UUID]
    budget: BudgetOut
    project_id: UUID | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, r: Runner) -> RunnerOut:
        return copied(
            cls,
            r,
            steps=[StepOut.of(s) for s in r.steps],
            skills=[b.skill_id for b in r.skills],
            budget=BudgetOut.of(r),
        )


class TriggerOut(msgspec.Struct, omit_defaults=True):
    id: UUID
    runner_id: UUID | None
    kind: TriggerKind
    name: str
    enabled: bool
    input: dict[str, Any]
    cron: str | None
    timezone: str
    overlap: Overlap
    catchup: Catchup
    end_at: datetime | None
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    has_token: bool
    token_hint: str | None
    created_at: datetime
    updated_at: datetime
    # shown once: when the trigger is created or its token rotated
    token: str | None = None
    webhook_url: str | None = None

    @classmethod
    def of(cls, t: Trigger, token: str | None = None) -> TriggerOut:
        return copied(
            cls,
            t,
            has_token=t.token_hash is not None,
            token=token,
            webhook_url=None if token is None else f"/api/runners/webhooks/{token}",
        )


class StepRunOut(msgspec.Struct):
    step_id: str
    kind: StepKind
    status: str
    attempt: int
    started_at: datetime | None
    ended_at: datetime | None
    output: Any
    error: str | None
    tokens: int
    cost_usd: float
    model: str | None
    thread_id: UUID | None

    @classmethod
    def of(cls, s: StepRun, step: Step) -> StepRunOut:
        return copied(cls, s, kind=step.kind)


class RunOut(msgspec.Struct):
    id: UUID
    org_id: str
    runner_id: UUID | None
    agent_id: UUID | None
    trigger: dict[str, Any]
    status: RunStatus
    paused_reason: str | None
    input: dict[str, Any]
    output: Any
    error: str | None
    tokens: int
    cost_usd: float
    steps: list[StepRunOut]
    next_step: str | None
    budget_warning: str | None
    scheduled_for: datetime | None
    trace_id: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    updated_at: datetime

    @classmethod
    def of(cls, r: RunnerRun) -> RunOut:
        return copied(
            cls,
            r,
            trigger={
                "kind": r.trigger_kind,
                "id": None if r.trigger_id is None else str(r.trigger_id),
            },
            steps=[StepRunOut.of(s, p) for s, p in zip(r.steps, r.pipeline, strict=True)],
            next_step=r.pipeline[r.cursor].id
            if r.cursor < len(r.pipeline) and not r.ended
            else None,
        )


class RunListOut(msgspec.Struct, rename={"next_cursor": "nextCursor"}):
    runs: list[RunOut]
    next_cursor: str | None


class RunStarted(msgspec.Struct, rename="camel"):
    run_id: UUID


class RunEventOut(SequencedEventOut):
    """One event of a run: ``type`` is run.started, step.started, step.finished,
    step.failed, step.skipped, run.paused, run.resumed, run.cancelled or
    run.finished (the last two end the run's events)."""


class RunEventsOut(msgspec.Struct):
    events: list[RunEventOut]
    next_after: int | None


# --- cursors ----------------------------------------------------------------------


def next_cursor(items: Sequence[RunnerRun | Suggestion], limit: int) -> str | None:
    """The page's ``nextCursor``: None when it is not full."""
    return None if len(items) < limit else cursor_text(items[-1].created_at, items[-1].id)


Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]
