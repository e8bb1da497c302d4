"""Runners' definitions: the runner, its steps, budget, skills and triggers
(docs/runners.md). Runs are ``runner_runs.py``'s; their execution ``runner_engine.py``'s.

Reads are open to the organization's members; every change is an admin's.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import secrets
import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from cronsim import CronSim, CronSimError
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import (
    NEXT,
    STOP,
    Budget,
    Catchup,
    OnExceed,
    Overlap,
    Runner,
    Step,
    StepKind,
    Trigger,
    TriggerKind,
)
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock, SecretBox
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.rules import (
    MAX_CONTENT,
    MAX_DESCRIPTION,
    MAX_NAME,
    check_model_id,
    check_text,
    check_url_text,
)
from agentsvc_core.use_cases.runner_expr import compile_expression, template_parts
from agentsvc_core.use_cases.webhook_tools import check_parameters, checked_headers

__all__ = [
    "MAX_STEPS",
    "BudgetChanges",
    "RunnerChanges",
    "RunnerDraft",
    "Runners",
    "StepDraft",
    "TriggerChanges",
    "TriggerDraft",
    "check_cron",
    "day_start",
    "next_tick",
    "step_headers_context",
    "token_hash",
]

MAX_STEPS = 50
MAX_TRIGGERS = 50
MAX_SKILLS = 100
MAX_INPUT_BYTES = 256 * 1024
TOKEN_BYTES = 24  # 192 bits
STEP_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_enc = msgspec.json.Encoder()
_MIN_TIMEOUT_MS, _MAX_TIMEOUT_MS = 100, 120_000


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def step_headers_context(org: str, runner_id: UUID, step_id: str) -> str:
    return f"{org}:runner_step:{runner_id}:{step_id}"


class StepDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A step as written. ``headers``: a webhook step's headers in clear, sealed
    when stored; None keeps the headers of the stored step with the same id (if
    any), ``{}`` removes them."""

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
    if_true: str = NEXT
    if_false: str = STOP


class RunnerDraft(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    steps: list[StepDraft] = []
    skills: list[UUID] = []


class RunnerChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    input_schema: dict[str, Any] | UnsetType = UNSET
    steps: list[StepDraft] | UnsetType = UNSET


class BudgetChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A PUT: only the fields given change; None removes a limit."""

    max_cost_usd_per_run: float | UnsetType | None = UNSET
    max_tokens_per_run: int | UnsetType | None = UNSET
    daily_cost_usd: float | UnsetType | None = UNSET
    daily_tokens: int | UnsetType | None = UNSET
    soft_limit_pct: int | UnsetType = UNSET
    on_exceed: OnExceed | UnsetType = UNSET


class TriggerDraft(msgspec.Struct, frozen=True, kw_only=True):
    kind: TriggerKind
    name: str = ""
    enabled: bool = True
    input: dict[str, Any] = {}
    cron: str | None = None
    timezone: str = "UTC"
    overlap: Overlap = "skip"
    catchup: Catchup = "none"
    end_at: datetime | None = None
    # an agent's scheduled task
    prompt: str | None = None
    thread_id: UUID | None = None


class TriggerChanges(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET
    input: dict[str, Any] | UnsetType = UNSET
    cron: str | UnsetType = UNSET
    timezone: str | UnsetType = UNSET
    overlap: Overlap | UnsetType = UNSET
    catchup: Catchup | UnsetType = UNSET
    end_at: datetime | UnsetType | None = UNSET
    prompt: str | UnsetType = UNSET
    thread_id: UUID | UnsetType | None = UNSET


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("timezone", f"{name!r} is not an IANA time zone") from None


def next_tick(cron: str, timezone: str, after: datetime) -> datetime:
    """The first tick of ``cron`` in ``timezone`` strictly after ``after`` (UTC)."""
    local = after.astimezone(_zone(timezone))
    return next(CronSim(cron, local)).astimezone(UTC)


def check_cron(cron: str, timezone: str, min_interval_s: float, now: datetime) -> None:
    check_text("cron", cron, max_len=200, required=True)
    zone = _zone(timezone)
    try:
        it = CronSim(cron, now.astimezone(zone))
        ticks = [next(it) for _ in range(4)]
    except (CronSimError, StopIteration) as exc:
        raise InvalidInput("cron", f"not a cron expression: {exc}") from None
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(ticks)]
    if gaps and min(gaps) < min_interval_s:
        raise InvalidInput(
            "cron",
            f"fires every {min(gaps):g} s; the least interval allowed is {min_interval_s:g} s"
            " (AGENTSVC_CRON_MIN_INTERVAL_S)",
        )


def _condition_step(field: str, d: StepDraft, later: set[str]) -> None:
    if d.expression is None:
        raise InvalidInput(f"{field}.expression", "a condition step has an expression")
    compile_expression(f"{field}.expression", d.expression)
    for branch, target in (("if_true", d.if_true), ("if_false", d.if_false)):
        if target not in (NEXT, STOP) and target not in later:
            raise InvalidInput(
                f"{field}.{branch}", f"{target!r}: 'next', 'stop' or the id of a later step"
            )


def _check_input(field: str, value: dict[str, Any]) -> None:
    if len(_enc.encode(value)) > MAX_INPUT_BYTES:
        raise InvalidInput(field, f"at most {MAX_INPUT_BYTES} bytes of JSON")


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
    ) -> None:
        self._store = store
        self._agents = agents
        self._box = box
        self._urls = urls
        self._clock = clock
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
        steps = await self._steps(who.org_id, runner_id, draft.steps, ())
        runner = Runner(
            id=runner_id,
            org_id=who.org_id,
            name=check_text("name", draft.name, max_len=MAX_NAME, required=True),
            description=check_text("description", draft.description, max_len=MAX_DESCRIPTION),
            input_schema=check_parameters(draft.input_schema, field="input_schema"),
            steps=steps,
            skills=self._skills(draft.skills),
            budget=Budget(),
            created_at=now,
            updated_at=now,
        )
        await self._store.add(runner)
        return runner

    async def list_all(self, who: Principal) -> list[Runner]:
        return await self._store.list_all(who.org_id)

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
            fields["steps"] = await self._steps(who.org_id, runner_id, changes.steps, runner.steps)
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
        added = await self._steps(
            who.org_id, runner_id, [draft], runner.steps, earlier=runner.steps
        )
        return await self._save(runner, steps=(*runner.steps, *added))

    async def _steps(
        self,
        org: str,
        runner_id: UUID,
        drafts: list[StepDraft],
        stored: tuple[Step, ...],
        earlier: tuple[Step, ...] = (),
    ) -> tuple[Step, ...]:
        if len(drafts) + len(earlier) > MAX_STEPS:
            raise InvalidInput("steps", f"at most {MAX_STEPS} steps")
        ids = [s.id for s in earlier] + [d.id for d in drafts]
        if len(set(ids)) != len(ids):
            raise InvalidInput("steps", "step ids must be unique")
        previous = {s.id: s for s in stored}
        steps: list[Step] = []
        for index, draft in enumerate(drafts):
            later = set(ids[len(earlier) + index + 1 :])
            steps.append(await self._step(org, runner_id, draft, previous.get(draft.id), later))
        return tuple(steps)

    async def _step(
        self, org: str, runner_id: UUID, d: StepDraft, stored: Step | None, later: set[str]
    ) -> Step:
        field = f"steps[{d.id}]"
        if not STEP_ID.fullmatch(d.id):
            raise InvalidInput("steps", "a step id is 1-63 lowercase letters, digits, '_' or '-'")
        if d.id in (NEXT, STOP):
            raise InvalidInput("steps", f"{d.id!r} is not a step id (kept for conditions)")
        check_text(f"{field}.name", d.name, max_len=MAX_NAME)
        if len(d.input_mapping) > 100:
            raise InvalidInput(f"{field}.input_mapping", "at most 100 fields")
        for name, expression in d.input_mapping.items():
            check_text(f"{field}.input_mapping", name, max_len=200, required=True)
            compile_expression(f"{field}.input_mapping.{name}", expression)
        headers: str | None = None
        match d.kind:
            case "agent":
                await self._agent_step(org, field, d)
            case "webhook":
                headers = self._webhook_step(org, runner_id, field, d, stored)
            case "condition":
                _condition_step(field, d, later)
        return Step(
            id=d.id,
            kind=d.kind,
            name=d.name,
            input_mapping=dict(d.input_mapping),
            agent_id=d.agent_id if d.kind == "agent" else None,
            prompt=d.prompt if d.kind == "agent" else None,
            model=d.model if d.kind == "agent" else None,
            url=d.url if d.kind == "webhook" else None,
            method=d.method if d.kind == "webhook" else "POST",
            headers=headers,
            timeout_ms=d.timeout_ms,
            expression=d.expression if d.kind == "condition" else None,
            if_true=d.if_true if d.kind == "condition" else NEXT,
            if_false=d.if_false if d.kind == "condition" else STOP,
        )

    async def _agent_step(self, org: str, field: str, d: StepDraft) -> None:
        if d.agent_id is None:
            raise InvalidInput(f"{field}.agent_id", "an agent step names its agent")
        await self._agents.get(org, d.agent_id)  # NotFound: another org's too
        if d.prompt is not None:
            check_text(f"{field}.prompt", d.prompt, max_len=MAX_CONTENT)
            for part in template_parts(d.prompt):
                compile_expression(f"{field}.prompt", part)
        if d.model is not None:
            check_model_id(f"{field}.model", d.model)

    def _webhook_step(
        self, org: str, runner_id: UUID, field: str, d: StepDraft, stored: Step | None
    ) -> str | None:
        """Checks the call; answers its sealed headers."""
        if d.url is None:
            raise InvalidInput(f"{field}.url", "a webhook step has a url")
        check_text(f"{field}.url", d.url, max_len=4096, required=True)
        check_url_text(f"{field}.url", d.url)
        refusal = self._urls.refusal(d.url)
        if refusal:
            raise InvalidInput(f"{field}.url", refusal)
        if d.method not in ("POST", "PUT", "PATCH"):
            raise InvalidInput(f"{field}.method", "one of POST, PUT, PATCH")
        if not _MIN_TIMEOUT_MS <= d.timeout_ms <= _MAX_TIMEOUT_MS:
            raise InvalidInput(
                f"{field}.timeout_ms", f"must be between {_MIN_TIMEOUT_MS} and {_MAX_TIMEOUT_MS}"
            )
        if d.headers is None:
            # kept only for the same address: secrets never follow a new url
            same = stored is not None and stored.kind == "webhook" and stored.url == d.url
            return stored.headers if same and stored is not None else None
        if not d.headers:
            return None
        checked_headers(f"{field}.headers", d.headers)
        return self._box.seal(_enc.encode(d.headers), step_headers_context(org, runner_id, d.id))

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
        fields = {
            f: getattr(changes, f)
            for f in changes.__struct_fields__
            if not isinstance(getattr(changes, f), UnsetType)
        }
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

    @staticmethod
    def _skills(skills: list[UUID]) -> tuple[UUID, ...]:
        if len(skills) > MAX_SKILLS:
            raise InvalidInput("skills", f"at most {MAX_SKILLS}")
        return tuple(dict.fromkeys(skills))

    async def set_skills(self, who: Principal, runner_id: UUID, skills: list[UUID]) -> Runner:
        """Replace the runner's skill bindings (the skills area reads them)."""
        self._admin(who)
        runner = await self._store.get(who.org_id, runner_id)
        return await self._save(runner, skills=self._skills(skills))

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
        token = (
            f"rt_{secrets.token_urlsafe(TOKEN_BYTES)}"
            if draft.kind in ("webhook", "button")
            else None
        )
        trigger = self._checked_trigger(
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
        )
        await self._store.add_trigger(trigger)
        return trigger, token

    def _checked_trigger(self, t: Trigger, now: datetime) -> Trigger:
        check_text("name", t.name, max_len=MAX_NAME)
        _check_input("input", t.input)
        if t.kind != "cron":
            if t.cron is not None:
                raise InvalidInput("cron", "only a cron trigger has a schedule")
            return t
        if t.cron is None:
            raise InvalidInput("cron", "a cron trigger has a cron expression")
        check_cron(t.cron, t.timezone, self.cron_min_interval_s, now)
        if t.end_at is not None and t.end_at.tzinfo is None:
            raise InvalidInput("end_at", "must carry a time zone (ISO 8601 with an offset or Z)")
        nxt = next_tick(t.cron, t.timezone, now) if t.enabled else None
        if nxt is not None and t.end_at is not None and nxt > t.end_at:
            nxt = None
        return msgspec.structs.replace(t, next_fire_at=nxt)

    async def update_trigger(
        self, who: Principal, runner_id: UUID | None, trigger_id: UUID, changes: TriggerChanges
    ) -> Trigger:
        self._admin(who)
        t = await self._owned(who, runner_id, trigger_id)
        return await self.change_trigger(t, changes)

    async def change_trigger(self, t: Trigger, changes: TriggerChanges) -> Trigger:
        fields = {
            f: getattr(changes, f)
            for f in changes.__struct_fields__
            if not isinstance(getattr(changes, f), UnsetType)
        }
        if t.runner_id is not None and ("prompt" in fields or "thread_id" in fields):
            raise InvalidInput("prompt", "only an agent's scheduled task has a prompt")
        now = self._clock.now()
        changed = self._checked_trigger(msgspec.structs.replace(t, updated_at=now, **fields), now)
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
        token = f"rt_{secrets.token_urlsafe(TOKEN_BYTES)}"
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


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s day: the daily budget's window starts there."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
