"""Runners (``/api/runners...``): the runner, its steps, budget, skills, triggers,
analytics and runs; docs/runners.md. The public routes (inbound
webhook, button, ``embed.js``) are ``runner_public.py``'s; bodies and answers
``runner_schemas.py``'s.

Reads are open to members; everything that changes a runner or starts, cancels
or resumes a run is an admin's (the default of access.py).
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

import msgspec
from litestar import Controller, Response, delete, get, patch, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter

from agentsvc_core.entities.runner import (
    RunStatus,
)
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.runners.analytics import Period, RunnerAnalytics, RunnerReport
from agentsvc_core.use_cases.runners.definitions import (
    BudgetChanges,
    RunnerChanges,
    RunnerDraft,
    Runners,
)
from agentsvc_core.use_cases.runners.runs import RunnerRuns
from agentsvc_core.use_cases.runners.triggers import TriggerChanges, TriggerDraft
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.runners.schemas import (
    WRITE,
    BudgetBody,
    BudgetOut,
    Req,
    ResumeBody,
    RunBody,
    RunEventOut,
    RunEventsOut,
    RunListOut,
    RunnerBody,
    RunnerOut,
    RunnerPatchBody,
    RunOut,
    StepBody,
    StepOut,
    StepsBody,
    TriggerBody,
    TriggerOut,
    TriggerPatchBody,
    next_cursor,
    step_draft,
)
from agentsvc_web.controllers.skills import BindingOut, BindingsBody
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, read_cursor
from agentsvc_web.sequenced import After, EventLimit, followed, wants_live
from agentsvc_web.sse import LastEventId, resume_from

# --- routes -----------------------------------------------------------------------


class RunnerController(Controller):
    path = "/api/runners"
    tags = ["runners"]

    @get(
        "/",
        operation_id="listRunners",
        responses=errors(422),
        summary="The organization's runners (?projectId=: one project's)",
    )
    async def list_runners(
        self,
        request: Req,
        runners: NamedDependency[Runners],
        project_id: Annotated[UUID | None, QueryParameter(name="projectId")] = None,
    ) -> list[RunnerOut]:
        listed = await runners.list_all(principal_of(request), project_id=project_id)
        return [RunnerOut.of(r) for r in listed]

    @post("/", operation_id="createRunner", responses=WRITE, summary="Create a runner")
    async def create_runner(
        self, request: Req, runners: NamedDependency[Runners], data: JSONBody[RunnerBody]
    ) -> RunnerOut:
        draft = RunnerDraft(
            name=data.name,
            description=data.description,
            input_schema=data.input_schema,
            steps=[step_draft(s) for s in data.steps],
            skills=[SkillBinding(skill_id=i) for i in dict.fromkeys(data.skills)],
            project_id=data.project_id,
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
        fields = given_fields(data)
        if "steps" in fields:
            fields["steps"] = [step_draft(s) for s in data.steps]  # type: ignore[union-attr]
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
        drafts = [step_draft(s) for s in data.steps]
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
        runner = await runners.add_step(principal_of(request), runner_id, step_draft(data))
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
        changes = BudgetChanges(**given_fields(data))
        return BudgetOut.of(await runners.set_budget(principal_of(request), runner_id, changes))

    @get(
        "/{runner_id:uuid}/skills",
        operation_id="listRunnerSkills",
        responses=errors(404),
        summary="The runner's skill bindings",
    )
    async def get_skills(
        self, request: Req, runners: NamedDependency[Runners], runner_id: FromPath[UUID]
    ) -> list[BindingOut]:
        return BindingOut.all((await runners.get(principal_of(request), runner_id)).skills)

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
        data: JSONBody[BindingsBody],
    ) -> list[BindingOut]:
        runner = await runners.set_skills(principal_of(request), runner_id, data.bindings())
        return BindingOut.all(runner.skills)

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
        changes = TriggerChanges(**given_fields(data))
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
            principal_of(request), runner_id, status=status, before=read_cursor(cursor), limit=limit
        )
        return RunListOut(runs=[RunOut.of(r) for r in runs], next_cursor=next_cursor(runs, limit))

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

    @get(
        "/{runner_id:uuid}/runs/{run_id:uuid}/events",
        operation_id="listRunnerRunEvents",
        responses=errors(404, 422),
        response_description="The run's events after ``after``, oldest first; with"
        " Accept: text/event-stream, the same followed live as Server-Sent Events (id: seq)",
        summary="The run's events, oldest first; or followed live over SSE to the run's end",
    )
    async def run_events(
        self,
        request: Req,
        runner_runs: NamedDependency[RunnerRuns],
        runner_id: FromPath[UUID],
        run_id: FromPath[UUID],
        after: After = 0,
        limit: EventLimit = 100,
        last_event_id: LastEventId = "",
    ) -> Response[RunEventsOut]:
        who = principal_of(request)
        if wants_live(request):
            start = resume_from(last_event_id, after)
            keepalive = request.app.state.sse_keepalive_s
            feed = await runner_runs.follow(who, runner_id, run_id, start, keepalive)
            return followed(feed, RunEventOut)  # type: ignore[no-any-return]
        rows, next_after = await runner_runs.events(
            who, runner_id, run_id, after=after, limit=limit
        )
        return Response(RunEventsOut([RunEventOut.of(e) for e in rows], next_after))

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
