"""Runners' definitions (docs/runners.md): the runner, its steps (checked in
``steps.py``), budget, skills and triggers (``triggers.py``). Runs are
``runs.py``'s; their execution ``engine.py``'s.

Reads are open to the organization's members; every change is an admin's.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import Budget, OnExceed, Runner, Step, Trigger
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import AgentRepository, Clock, SecretBox
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.projects import ProjectStore
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.skills import SkillStore
from agentsvc_core.rules import MAX_DESCRIPTION, MAX_NAME, check_text
from agentsvc_core.use_cases.projects import check_project
from agentsvc_core.use_cases.runners.steps import StepChecks, StepDraft, step_headers_context
from agentsvc_core.use_cases.runners.triggers import (
    MAX_TRIGGERS,
    TriggerChanges,
    TriggerDraft,
    checked_trigger,
    new_token,
    token_hash,
)
from agentsvc_core.use_cases.skills.bindings import check_bindings
from agentsvc_core.use_cases.webhook_tools import check_parameters

__all__ = ["BudgetChanges", "RunnerChanges", "RunnerDraft", "Runners"]


class RunnerDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    steps: list[StepDraft] = []
    skills: list[SkillBinding] = []
    project_id: UUID | None = None


class RunnerChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    input_schema: dict[str, Any] | UnsetType = UNSET
    steps: list[StepDraft] | UnsetType = UNSET
    project_id: UUID | UnsetType | None = UNSET


class BudgetChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A PUT: only the fields given change; None removes a limit."""

    max_cost_usd_per_run: float | UnsetType | None = UNSET
    max_tokens_per_run: int | UnsetType | None = UNSET
    daily_cost_usd: float | UnsetType | None = UNSET
    daily_tokens: int | UnsetType | None = UNSET
    soft_limit_pct: int | UnsetType = UNSET
    on_exceed: OnExceed | UnsetType = UNSET


class Runners:
    def __init__(
        self,
        store: RunnerStore,
        agents: AgentRepository,
        box: SecretBox,
        urls: UrlPolicy,
        clock: Clock,
        *,
        cron_min_interval_s: float = 60.0,
        projects: ProjectStore | None = None,
        skills: SkillStore | None = None,
    ) -> None:
        """``projects``: where a ``project_id`` is checked (without it, no runner
        can name one); ``skills``: where skill bindings are (without it, no runner
        can bind one)."""
        self._store = store
        self._projects = projects
        self._skill_store = skills
        self._box = box
        self._clock = clock
        self._checks = StepChecks(agents, box, urls)
        self.cron_min_interval_s = cron_min_interval_s

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("runners are managed by the organization's admins")

    # --- runners ----------------------------------------------------------------

    async def create(self, who: Principal, draft: RunnerDraft) -> Runner:
        self._admin(who)
        now = self._clock.now()
        runner_id = uuid.uuid4()
        steps = await self._checks.steps(who.org_id, runner_id, draft.steps, ())
        runner = Runner(
            id=runner_id,
            org_id=who.org_id,
            name=check_text("name", draft.name, max_len=MAX_NAME, required=True),
            description=check_text("description", draft.description, max_len=MAX_DESCRIPTION),
            input_schema=check_parameters(draft.input_schema, field="input_schema"),
            steps=steps,
            skills=await self._skills(who.org_id, draft.skills),
            budget=Budget(),
            created_at=now,
            updated_at=now,
            project_id=draft.project_id,
        )
        await check_project(self._projects, who.org_id, draft.project_id)
        await self._store.add(runner)
        return runner

    async def list_all(self, who: Principal, *, project_id: UUID | None = None) -> list[Runner]:
        """Newest first; with ``project_id``, that project's runners only."""
        return await self._store.list_all(who.org_id, project_id=project_id)

    async def get(self, who: Principal, runner_id: UUID) -> Runner:
        return await self._store.get(who.org_id, runner_id)

    async def update(self, who: Principal, runner_id: UUID, changes: RunnerChanges) -> Runner:
        self._admin(who)
        runner = await self._store.get(who.org_id, runner_id)
        fields: dict[str, Any] = {}
        if not isinstance(changes.name, UnsetType):
            fields["name"] = check_text("name", changes.name, max_len=MAX_NAME, required=True)
        if not isinstance(changes.description, UnsetType):
            fields["description"] = check_text(
                "description", changes.description, max_len=MAX_DESCRIPTION
            )
        if not isinstance(changes.input_schema, UnsetType):
            fields["input_schema"] = check_parameters(changes.input_schema, field="input_schema")
        if not isinstance(changes.steps, UnsetType):
            fields["steps"] = await self._checks.steps(
                who.org_id, runner_id, changes.steps, runner.steps
            )
        if not isinstance(changes.project_id, UnsetType):
            await check_project(self._projects, who.org_id, changes.project_id)
            fields["project_id"] = changes.project_id
        return await self._save(runner, **fields)

    async def delete(self, who: Principal, runner_id: UUID) -> None:
        self._admin(who)
        await self._store.delete(who.org_id, runner_id)

    async def _save(self, runner: Runner, **fields: Any) -> Runner:
        runner = msgspec.structs.replace(runner, updated_at=self._clock.now(), **fields)
        await self._store.replace(runner)
        return runner

    # --- steps ------------------------------------------------------------------

    async def set_steps(self, who: Principal, runner_id: UUID, drafts: list[StepDraft]) -> Runner:
        """Replace the runner's ordered steps (``PUT .../steps``)."""
        return await self.update(who, runner_id, RunnerChanges(steps=drafts))

    async def add_step(self, who: Principal, runner_id: UUID, draft: StepDraft) -> Runner:
        """Append a step (``POST .../steps``)."""
        self._admin(who)
        runner = await self._store.get(who.org_id, runner_id)
        if any(s.id == draft.id for s in runner.steps):
            raise InvalidInput("id", f"the runner has a step {draft.id!r}")
        added = await self._checks.steps(
            who.org_id, runner_id, [draft], runner.steps, earlier=runner.steps
        )
        return await self._save(runner, steps=(*runner.steps, *added))

    async def rotate_secrets(self, org_id: str | None = None) -> int:
        """Re-seal with the newest key the step headers another key sealed (the
        key-rotation command); a runner changed meanwhile is read again. Runs keep
        the steps they started with: the old key opens those until they end."""
        count = 0
        for found in await self._store.sealed_runners(org_id):
            runner = found
            for _ in range(5):
                steps, moved = self._resealed(runner)
                if not moved or await self._store.reseal_steps(runner, steps):
                    count += moved
                    break
                runner = await self._store.get(runner.org_id, runner.id)
        return count

    def _resealed(self, runner: Runner) -> tuple[tuple[Step, ...], int]:
        steps, moved = [], 0
        for step in runner.steps:
            if step.headers and not self._box.is_current(step.headers):
                where = step_headers_context(runner.org_id, runner.id, step.id)
                opened = self._box.open(step.headers, where)
                steps.append(msgspec.structs.replace(step, headers=self._box.seal(opened, where)))
                moved += 1
            else:
                steps.append(step)
        return tuple(steps), moved

    # --- budget and skills --------------------------------------------------------

    async def set_budget(self, who: Principal, runner_id: UUID, changes: BudgetChanges) -> Runner:
        self._admin(who)
        runner = await self._store.get(who.org_id, runner_id)
        fields = given_fields(changes)
        budget = msgspec.structs.replace(runner.budget, **fields)
        for f in ("max_cost_usd_per_run", "daily_cost_usd"):
            value = getattr(budget, f)
            if value is not None and not 0 <= value <= 1_000_000:
                raise InvalidInput(f, "between 0 and 1000000 (USD)")
        for f in ("max_tokens_per_run", "daily_tokens"):
            value = getattr(budget, f)
            if value is not None and not 0 <= value <= 10**12:
                raise InvalidInput(f, "between 0 and 10^12")
        if not 1 <= budget.soft_limit_pct <= 100:
            raise InvalidInput("soft_limit_pct", "between 1 and 100")
        return await self._save(runner, budget=budget)

    async def _skills(
        self, org_id: str, skills: list[SkillBinding] | None
    ) -> tuple[SkillBinding, ...]:
        if self._skill_store is None:
            if skills is None or skills:
                raise InvalidInput("skills", "this service keeps no skills")
            return ()
        return await check_bindings(self._skill_store, org_id, skills)

    async def set_skills(
        self, who: Principal, runner_id: UUID, skills: list[SkillBinding] | None
    ) -> Runner:
        """Replace the runner's skill bindings (use_cases/skills/bindings.py)."""
        self._admin(who)
        runner = await self._store.get(who.org_id, runner_id)
        return await self._save(runner, skills=await self._skills(who.org_id, skills))

    # --- triggers ---------------------------------------------------------------

    async def triggers(self, who: Principal, runner_id: UUID) -> list[Trigger]:
        await self._store.get(who.org_id, runner_id)
        return await self._store.triggers(who.org_id, runner_id=runner_id)

    async def add_trigger(
        self, who: Principal, runner_id: UUID, draft: TriggerDraft
    ) -> tuple[Trigger, str | None]:
        """The trigger, and its token (shown this once) for a webhook or button."""
        self._admin(who)
        await self._store.get(who.org_id, runner_id)
        if len(await self._store.triggers(who.org_id, runner_id=runner_id)) >= MAX_TRIGGERS:
            raise InvalidInput("triggers", f"a runner has at most {MAX_TRIGGERS} triggers")
        if draft.prompt is not None or draft.thread_id is not None:
            raise InvalidInput("prompt", "only an agent's scheduled task has a prompt")
        return await self.new_trigger(who.org_id, draft, runner_id=runner_id)

    async def new_trigger(
        self,
        org: str,
        draft: TriggerDraft,
        *,
        runner_id: UUID | None = None,
        agent_id: UUID | None = None,
    ) -> tuple[Trigger, str | None]:
        now = self._clock.now()
        token = new_token() if draft.kind in ("webhook", "button") else None
        trigger = checked_trigger(
            Trigger(
                id=uuid.uuid4(),
                org_id=org,
                runner_id=runner_id,
                agent_id=agent_id,
                kind=draft.kind,
                name=draft.name,
                enabled=draft.enabled,
                input=draft.input,
                cron=draft.cron,
                timezone=draft.timezone,
                overlap=draft.overlap,
                catchup=draft.catchup,
                end_at=draft.end_at,
                token_hash=None if token is None else token_hash(token),
                token_hint=None if token is None else token[-4:],
                prompt=draft.prompt,
                thread_id=draft.thread_id,
                created_at=now,
                updated_at=now,
            ),
            now,
            self.cron_min_interval_s,
        )
        await self._store.add_trigger(trigger)
        return trigger, token

    async def update_trigger(
        self, who: Principal, runner_id: UUID | None, trigger_id: UUID, changes: TriggerChanges
    ) -> Trigger:
        self._admin(who)
        t = await self._owned(who, runner_id, trigger_id)
        return await self.change_trigger(t, changes)

    async def change_trigger(self, t: Trigger, changes: TriggerChanges) -> Trigger:
        fields = given_fields(changes)
        if t.runner_id is not None and ("prompt" in fields or "thread_id" in fields):
            raise InvalidInput("prompt", "only an agent's scheduled task has a prompt")
        now = self._clock.now()
        changed = checked_trigger(
            msgspec.structs.replace(t, updated_at=now, **fields), now, self.cron_min_interval_s
        )
        await self._store.replace_trigger(changed)
        return changed

    async def rotate_token(
        self, who: Principal, runner_id: UUID, trigger_id: UUID
    ) -> tuple[Trigger, str]:
        """A new token for a webhook or button trigger; the old one stops working."""
        self._admin(who)
        t = await self._owned(who, runner_id, trigger_id)
        if t.kind not in ("webhook", "button"):
            raise InvalidInput("kind", "only webhook and button triggers have a token")
        token = new_token()
        t = msgspec.structs.replace(
            t, token_hash=token_hash(token), token_hint=token[-4:], updated_at=self._clock.now()
        )
        await self._store.replace_trigger(t)
        return t, token

    async def delete_trigger(self, who: Principal, runner_id: UUID, trigger_id: UUID) -> None:
        self._admin(who)
        await self._owned(who, runner_id, trigger_id)
        await self._store.delete_trigger(who.org_id, trigger_id)

    async def _owned(self, who: Principal, runner_id: UUID | None, trigger_id: UUID) -> Trigger:
        t = await self._store.get_trigger(who.org_id, trigger_id)
        if runner_id is not None and t.runner_id != runner_id:
            raise NotFound("trigger not found")
        return t

    async def button(self, runner_id: UUID, token: str) -> Runner:
        """The runner a button trigger's token opens (``NotFound`` for any other
        token, or a token of another runner)."""
        t = await self.by_token(token, ("button",))
        if t.runner_id != runner_id:
            raise NotFound("no such trigger")
        return await self._store.get(t.org_id, runner_id)

    async def by_token(self, token: str, kinds: tuple[str, ...]) -> Trigger:
        """The enabled trigger of one of ``kinds`` this token opens; ``NotFound``
        for any other token (no hint of which part was wrong)."""
        if not token.startswith("rt_") or len(token) > 200:
            raise NotFound("no such trigger")
        t = await self._store.by_token(token_hash(token))
        if t is None or t.kind not in kinds or not t.enabled or t.runner_id is None:
            raise NotFound("no such trigger")
        return t
