"""Runners (``/api/runners...``), their inbound webhook, and agents' scheduled
tasks (``/api/agents/{id}/scheduled-tasks``); docs/runners.md.

Reads are open to members; everything that changes a runner or starts, cancels
or resumes a run is an admin's (the default of access.py). The inbound webhook is
public: its token (which can start runs of one runner and nothing else) is what
authenticates it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Principal
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
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.runner_analytics import Period, RunnerAnalytics, RunnerReport
from agentsvc_core.use_cases.runner_runs import RunnerRuns
from agentsvc_core.use_cases.runners import (
    BudgetChanges,
    RunnerChanges,
    RunnerDraft,
    Runners,
    StepDraft,
    TriggerChanges,
    TriggerDraft,
)
from agentsvc_core.use_cases.schedules import ScheduledTasks, TaskDraft
from agentsvc_core.use_cases.suggestions import Suggestions
from agentsvc_web.auth import principal_of
from agentsvc_web.embed_domains import embedder_allowed
from agentsvc_web.openapi import errors
from agentsvc_web.runner_button import button_headers, button_page, embed_script
from agentsvc_web.schemas import OkBody, copied

Req = Request[Any, Any, Any]
WRITE = errors(400, 404, 413, 415, 422)


# --- bodies -----------------------------------------------------------------------


class StepBody(msgspec.Struct, rename="camel"):
    id: str
    kind: StepKind
    name: str = ""
    input_mapping: dict[str, str] = {}
    agent_id: UUID | None = None
    prompt: str | None = None
    model: str | None = None
    url: str | None = None
    method: str = "POST"
    headers: dict[str, str] | None = None
    timeout_ms: int = 10_000
    expression: str | None = None
    if_true: str = "next"
    if_false: str = "stop"

    def draft(self) -> StepDraft:
        return msgspec.convert(msgspec.structs.asdict(self), StepDraft)


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


class RunnerPatchBody(msgspec.Struct, rename="camel"):
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    input_schema: dict[str, Any] | UnsetType = UNSET
    steps: list[StepBody] | UnsetType = UNSET


class BudgetBody(msgspec.Struct, rename="camel"):
    max_cost_usd_per_run: float | UnsetType | None = UNSET
    max_tokens_per_run: int | UnsetType | None = UNSET
    daily_cost_usd: float | UnsetType | None = UNSET
    daily_tokens: int | UnsetType | None = UNSET
    soft_limit_pct: int | UnsetType = UNSET
    on_exceed: OnExceed | UnsetType = UNSET


class SkillsBody(msgspec.Struct, rename="camel"):
    skill_ids: Annotated[list[UUID], Meta(max_length=100)]


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


class TaskBody(msgspec.Struct, rename="camel", kw_only=True):
    id: UUID | None = None
    name: str = ""
    prompt: str
    cron: str
    timezone: str = "UTC"
    enabled: bool = True
    thread_id: UUID | None = None
    overlap: Overlap = "skip"
    end_at: datetime | None = None


class TasksBody(msgspec.Struct, rename="camel"):
    tasks: Annotated[list[TaskBody], Meta(max_length=50)]


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
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, r: Runner) -> RunnerOut:
        return copied(
            cls,
            r,
            steps=[StepOut.of(s) for s in r.steps],
            skills=list(r.skills),
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


class SuggestionOut(msgspec.Struct):
    id: UUID
    runner_id: UUID | None
    agent_id: UUID | None
    title: str
    detail: str
    dismissed: bool
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, s: Suggestion) -> SuggestionOut:
        return copied(cls, s)


class SuggestionListOut(msgspec.Struct, rename={"next_cursor": "nextCursor"}):
    suggestions: list[SuggestionOut]
    next_cursor: str | None


class DismissBody(msgspec.Struct, rename="camel"):
    suggestion_id: UUID
    dismissed: bool = True


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


# --- cursors ----------------------------------------------------------------------


def _cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    """A ``nextCursor``: ``<created_at>_<id>`` of the last run of a page."""
    if raw is None:
        return None
    at, _, rid = raw.rpartition("_")
    try:
        value = msgspec.convert(at, datetime)
        return (value if value.tzinfo else value.replace(tzinfo=UTC), UUID(rid))
    except (msgspec.ValidationError, ValueError):
        raise InvalidInput("cursor", "must be a nextCursor of this list") from None


def _next(items: Sequence[RunnerRun | Suggestion], limit: int) -> str | None:
    if len(items) < limit:
        return None
    last = items[-1]
    return f"{last.created_at.astimezone(UTC).isoformat().replace('+00:00', 'Z')}_{last.id}"


Dismissed = Annotated[bool | None, QueryParameter(name="dismissed")]
Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]


async def _suggestions(
    suggestions: Suggestions,
    who: Principal,
    owner: dict[str, UUID],
    dismissed: bool | None,
    cursor: str | None,
    limit: int,
) -> SuggestionListOut:
    found = await suggestions.page(
        who, dismissed=dismissed, before=_cursor(cursor), limit=limit, **owner
    )
    return SuggestionListOut(
        suggestions=[SuggestionOut.of(s) for s in found], next_cursor=_next(found, limit)
    )


class AgentSuggestionsController(Controller):
    path = "/api/agents/{agent_id:uuid}/suggestions"
    tags = ["runners"]

    @get(
        "/",
        operation_id="listAgentSuggestions",
        responses=errors(404, 422),
        summary="Improvement suggestions for the agent, newest first, by pages",
    )
    async def list_suggestions(
        self,
        request: Req,
        suggestions: NamedDependency[Suggestions],
        agent_id: FromPath[UUID],
        dismissed: Dismissed = None,
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> SuggestionListOut:
        who = principal_of(request)
        return await _suggestions(
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


def _set(body: msgspec.Struct) -> dict[str, Any]:
    return {
        f: getattr(body, f) for f in body.__struct_fields__ if getattr(body, f) is not msgspec.UNSET
    }


# --- routes -----------------------------------------------------------------------


class RunnerController(Controller):
    path = "/api/runners"
    tags = ["runners"]

    @get("/", operation_id="listRunners", responses=errors(), summary="The organization's runners")
    async def list_runners(
        self, request: Req, runners: NamedDependency[Runners]
    ) -> list[RunnerOut]:
        return [RunnerOut.of(r) for r in await runners.list_all(principal_of(request))]

    @post("/", operation_id="createRunner", responses=WRITE, summary="Create a runner")
    async def create_runner(
        self, request: Req, runners: NamedDependency[Runners], data: JSONBody[RunnerBody]
    ) -> RunnerOut:
        draft = RunnerDraft(
            name=data.name,
            description=data.description,
            input_schema=data.input_schema,
            steps=[s.draft() for s in data.steps],
            skills=data.skills,
        )
        return RunnerOut.of(await runners.create(principal_of(request), draft))

    @get("/{runner_id:uuid}", operation_id="getRunner", responses=errors(404), summary="A runner")
    async def get_runner(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> RunnerOut:
        return RunnerOut.of(await runners.get(principal_of(request), runner_id))

    @patch(
        "/{runner_id:uuid}",
        operation_id="updateRunner",
        responses=WRITE,
        summary="Change the supplied fields of a runner (steps: the whole ordered list)",
    )
    async def update_runner(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[RunnerPatchBody],
    ) -> RunnerOut:
        fields = _set(data)
        if "steps" in fields:
            fields["steps"] = [s.draft() for s in data.steps]  # type: ignore[union-attr]
        changes = RunnerChanges(**fields)
        return RunnerOut.of(await runners.update(principal_of(request), runner_id, changes))

    @delete(
        "/{runner_id:uuid}",
        operation_id="deleteRunner",
        status_code=200,
        responses=errors(404),
        summary="Delete a runner with its triggers, runs and suggestions",
    )
    async def delete_runner(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> OkBody:
        await runners.delete(principal_of(request), runner_id)
        return OkBody(ok=True)

    # --- steps ------------------------------------------------------------------

    @get(
        "/{runner_id:uuid}/steps",
        operation_id="listRunnerSteps",
        responses=errors(404),
        summary="The runner's steps, in order",
    )
    async def list_steps(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> list[StepOut]:
        runner = await runners.get(principal_of(request), runner_id)
        return [StepOut.of(s) for s in runner.steps]

    @put(
        "/{runner_id:uuid}/steps",
        operation_id="replaceRunnerSteps",
        responses=WRITE,
        summary="Replace the runner's ordered steps",
    )
    async def replace_steps(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[StepsBody],
    ) -> list[StepOut]:
        drafts = [s.draft() for s in data.steps]
        runner = await runners.set_steps(principal_of(request), runner_id, drafts)
        return [StepOut.of(s) for s in runner.steps]

    @post(
        "/{runner_id:uuid}/steps",
        operation_id="addRunnerStep",
        responses=WRITE,
        summary="Append a step to the runner",
    )
    async def add_step(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[StepBody],
    ) -> list[StepOut]:
        runner = await runners.add_step(principal_of(request), runner_id, data.draft())
        return [StepOut.of(s) for s in runner.steps]

    # --- budget and skills --------------------------------------------------------

    @get(
        "/{runner_id:uuid}/budget",
        operation_id="getRunnerBudget",
        responses=errors(404),
        summary="The runner's budget",
    )
    async def get_budget(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> BudgetOut:
        return BudgetOut.of(await runners.get(principal_of(request), runner_id))

    @put(
        "/{runner_id:uuid}/budget",
        operation_id="putRunnerBudget",
        responses=WRITE,
        summary="Change the supplied budget limits (null removes one)",
    )
    async def put_budget(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[BudgetBody],
    ) -> BudgetOut:
        changes = BudgetChanges(**_set(data))
        return BudgetOut.of(await runners.set_budget(principal_of(request), runner_id, changes))

    @get(
        "/{runner_id:uuid}/skills",
        operation_id="listRunnerSkills",
        responses=errors(404),
        summary="The runner's skill bindings",
    )
    async def get_skills(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> list[UUID]:
        return list((await runners.get(principal_of(request), runner_id)).skills)

    @post(
        "/{runner_id:uuid}/skills",
        operation_id="setRunnerSkills",
        status_code=200,
        responses=WRITE,
        summary="Replace the runner's skill bindings",
    )
    async def set_skills(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[SkillsBody],
    ) -> list[UUID]:
        runner = await runners.set_skills(principal_of(request), runner_id, data.skill_ids)
        return list(runner.skills)

    # --- triggers ---------------------------------------------------------------

    @get(
        "/{runner_id:uuid}/triggers",
        operation_id="listRunnerTriggers",
        responses=errors(404),
        summary="The runner's triggers (tokens are never shown again)",
    )
    async def list_triggers(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> list[TriggerOut]:
        return [TriggerOut.of(t) for t in await runners.triggers(principal_of(request), runner_id)]

    @post(
        "/{runner_id:uuid}/triggers",
        operation_id="createRunnerTrigger",
        responses=WRITE,
        summary="Add a trigger; a webhook or button trigger's token is in this answer only",
    )
    async def create_trigger(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        data: JSONBody[TriggerBody],
    ) -> TriggerOut:
        draft = msgspec.convert(msgspec.structs.asdict(data), TriggerDraft)
        trigger, token = await runners.add_trigger(principal_of(request), runner_id, draft)
        return TriggerOut.of(trigger, token)

    @patch(
        "/{runner_id:uuid}/triggers/{trigger_id:uuid}",
        operation_id="updateRunnerTrigger",
        responses=WRITE,
        summary="Change the supplied fields of a trigger",
    )
    async def update_trigger(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        trigger_id: FromPath[UUID],
        data: JSONBody[TriggerPatchBody],
    ) -> TriggerOut:
        changes = TriggerChanges(**_set(data))
        t = await runners.update_trigger(principal_of(request), runner_id, trigger_id, changes)
        return TriggerOut.of(t)

    @post(
        "/{runner_id:uuid}/triggers/{trigger_id:uuid}/rotate",
        operation_id="rotateRunnerTriggerToken",
        status_code=200,
        responses=errors(404, 422),
        summary="A new token for a webhook or button trigger; the old one stops working",
    )
    async def rotate(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        trigger_id: FromPath[UUID],
    ) -> TriggerOut:
        t, token = await runners.rotate_token(principal_of(request), runner_id, trigger_id)
        return TriggerOut.of(t, token)

    @delete(
        "/{runner_id:uuid}/triggers/{trigger_id:uuid}",
        operation_id="deleteRunnerTrigger",
        status_code=200,
        responses=errors(404),
        summary="Delete a trigger (its runs stay)",
    )
    async def delete_trigger(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        runner_id: FromPath[UUID],
        trigger_id: FromPath[UUID],
    ) -> OkBody:
        await runners.delete_trigger(principal_of(request), runner_id, trigger_id)
        return OkBody(ok=True)

    @get(
        "/{runner_id:uuid}/analytics",
        operation_id="getRunnerAnalytics",
        responses=errors(404, 422),
        summary="Runs, success rate, tokens and cost over a period; daily series; cost by model",
    )
    async def analytics(
        self,
        request: Req,
        runner_analytics: NamedDependency[RunnerAnalytics],
        runner_id: FromPath[UUID],
        period: Annotated[Period, QueryParameter(name="period")] = "7d",
    ) -> RunnerReport:
        return await runner_analytics.report(principal_of(request), runner_id, period)

    # --- suggestions --------------------------------------------------------------

    @get(
        "/{runner_id:uuid}/suggestions",
        operation_id="listRunnerSuggestions",
        responses=errors(404, 422),
        summary="Improvement suggestions for the runner, newest first, by pages",
    )
    async def list_suggestions(
        self,
        request: Req,
        suggestions: NamedDependency[Suggestions],
        runner_id: FromPath[UUID],
        dismissed: Dismissed = None,
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> SuggestionListOut:
        who = principal_of(request)
        return await _suggestions(
            suggestions, who, {"runner_id": runner_id}, dismissed, cursor, limit
        )

    @post(
        "/{runner_id:uuid}/suggestions",
        operation_id="generateRunnerSuggestions",
        responses=errors(404, 422, 502),
        summary="Ask the model of the runner's first agent step for suggestions from its runs",
    )
    async def generate_suggestions(
        self, request: Req, suggestions: NamedDependency[Suggestions], runner_id: FromPath[UUID]
    ) -> list[SuggestionOut]:
        made = await suggestions.generate(principal_of(request), runner_id=runner_id)
        return [SuggestionOut.of(s) for s in made]

    @put(
        "/{runner_id:uuid}/suggestions",
        operation_id="dismissRunnerSuggestion",
        responses=WRITE,
        summary="Dismiss a suggestion (dismissed: false brings it back)",
    )
    async def dismiss_suggestion(
        self,
        request: Req,
        suggestions: NamedDependency[Suggestions],
        runner_id: FromPath[UUID],
        data: JSONBody[DismissBody],
    ) -> SuggestionOut:
        s = await suggestions.set_dismissed(
            principal_of(request), data.suggestion_id, data.dismissed, runner_id=runner_id
        )
        return SuggestionOut.of(s)

    # --- runs -------------------------------------------------------------------

    @post(
        "/{runner_id:uuid}/runs",
        operation_id="startRunnerRun",
        responses=WRITE,
        summary="Start a run (queued; Idempotency-Key answers the key's earlier run)",
    )
    async def start_run(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        data: JSONBody[RunBody],
    ) -> Response[RunOut]:
        key = request.headers.get("idempotency-key")
        run, created = await runner_runs.start(principal_of(request), runner_id, data.input, key)
        return Response(RunOut.of(run), status_code=201 if created else 200)

    @get(
        "/{runner_id:uuid}/runs",
        operation_id="listRunnerRuns",
        responses=errors(404, 422),
        summary="The runner's runs, newest first, by pages",
    )
    async def list_runs(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        status: Annotated[RunStatus | None, QueryParameter(name="status")] = None,
        cursor: Annotated[str | None, QueryParameter(name="cursor", max_length=100)] = None,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 50,
    ) -> RunListOut:
        runs = await runner_runs.runs(
            principal_of(request), runner_id, status=status, before=_cursor(cursor), limit=limit
        )
        return RunListOut(runs=[RunOut.of(r) for r in runs], next_cursor=_next(runs, limit))

    @get(
        "/{runner_id:uuid}/runs/{run_id:uuid}",
        operation_id="getRunnerRun",
        responses=errors(404),
        summary="A run, with each step's status and output",
    )
    async def get_run(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> RunOut:
        return RunOut.of(await runner_runs.get(principal_of(request), runner_id, run_id))

    @post(
        "/{runner_id:uuid}/runs/{run_id:uuid}/cancel",
        operation_id="cancelRunnerRun",
        status_code=200,
        responses=errors(404, 409),
        summary="Cancel a queued, running or paused run",
    )
    async def cancel_run(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        run_id: FromPath[UUID],
    ) -> RunOut:
        return RunOut.of(await runner_runs.cancel(principal_of(request), runner_id, run_id))

    @post(
        "/{runner_id:uuid}/runs/{run_id:uuid}/resume",
        operation_id="resumeRunnerRun",
        status_code=200,
        responses=errors(400, 404, 409, 413, 415, 422),
        summary="Resume a budget-paused run from the step that paused (409 RUN_NOT_PAUSED)",
    )
    async def resume_run(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        run_id: FromPath[UUID],
        data: JSONBody[ResumeBody],
    ) -> RunOut:
        body = data
        run = await runner_runs.resume(
            principal_of(request),
            runner_id,
            run_id,
            raise_usd=body.raise_budget_usd,
            raise_tokens=body.raise_budget_tokens,
        )
        return RunOut.of(run)


class RunnerWebhookController(Controller):
    """``POST /api/runners/webhooks/{token}``: public; the token authenticates."""

    path = "/api/runners/webhooks"
    tags = ["runners"]

    @post(
        "/{token:str}",
        operation_id="runnerWebhook",
        status_code=202,
        security=[],
        responses=errors(400, 404, 413, 422, 429),
        summary="Start a run of the token's runner; the body (a JSON object) is its input",
    )
    async def inbound(
        self, request: Req, runner_runs: NamedDependency[RunnerRuns], token: FromPath[str]
    ) -> Response[RunStarted]:
        body = await request.body()
        key = request.headers.get("idempotency-key") or request.headers.get("webhook-id")
        run, created = await runner_runs.from_token(token, body, key, kinds=("webhook", "button"))
        return Response(RunStarted(run_id=run.id), status_code=202 if created else 200)


Token = Annotated[str, QueryParameter(name="token", min_length=1, max_length=200)]


class RunnerButtonController(Controller):
    """A runner's button page and ``embed.js``: public (the button trigger's token,
    which can start runs of this runner and nothing else, is the credential),
    served only to the organization's allowed embed domains (docs/runners.md)."""

    path = "/api/runners/{runner_id:uuid}"
    tags = ["runners"]

    @staticmethod
    async def _allowed(
        request: Req, runners: Runners, org_settings: OrgSettings, runner_id: UUID, token: str
    ) -> tuple[Runner, tuple[str, ...]]:
        runner = await runners.button(runner_id, token)
        domains = await org_settings.embed_domains(runner.org_id)
        if not embedder_allowed(
            origin=request.headers.get("origin"),
            referer=request.headers.get("referer"),
            domains=domains,
        ):
            raise PermissionDenied("this site may not embed the organization's buttons")
        return runner, domains

    @get(
        "/button",
        operation_id="getRunnerButton",
        security=[],
        media_type="text/html",
        responses=errors(403, 404, 422),
        summary="The runner's button: an HTML form built from its input schema",
    )
    async def button(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        org_settings: NamedDependency[OrgSettings],
        runner_id: FromPath[UUID],
        token: Token,
    ) -> Response[str]:
        runner, domains = await self._allowed(request, runners, org_settings, runner_id, token)
        nonce = secrets.token_urlsafe(16)
        page = button_page(
            name=runner.name,
            description=runner.description,
            input_schema=runner.input_schema,
            submit_url=f"/api/runners/webhooks/{token}",
            nonce=nonce,
        )
        return Response(
            page,
            media_type="text/html",
            headers=button_headers(domains=domains, nonce=nonce),
        )

    @get(
        "/embed.js",
        operation_id="getRunnerEmbedScript",
        security=[],
        media_type="text/javascript",
        responses=errors(403, 404, 422),
        summary="A script that mounts the runner's button on a page of an allowed site",
    )
    async def embed(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        org_settings: NamedDependency[OrgSettings],
        runner_id: FromPath[UUID],
        token: Token,
    ) -> Response[str]:
        runner, _ = await self._allowed(request, runners, org_settings, runner_id, token)
        script = embed_script(
            button_url=f"/api/runners/{runner_id}/button?token={quote(token, safe='')}",
            title=runner.name,
        )
        return Response(
            script,
            media_type="text/javascript",
            headers={"Cross-Origin-Resource-Policy": "cross-origin"},
        )


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
            principal_of(request), agent_id, before=_cursor(cursor), limit=limit
        )
        return RunListOut(runs=[RunOut.of(r) for r in runs], next_cursor=_next(runs, limit))

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
