"""A runner's steps as written (``StepDraft``) and the checks that make them
``Step``s: ids, expressions, an agent step's agent and model, a webhook step's
address, method, time limit and sealed headers, a condition's branches, a
computer step's agent and command."""

from __future__ import annotations

import re
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import NEXT, STOP, Step, StepFields
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import AgentRepository, SecretBox
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.rules import MAX_CONTENT, MAX_NAME, check_model_id, check_text, check_url_text
from agentsvc_core.use_cases.runners.expressions import compile_expression, template_parts
from agentsvc_core.use_cases.webhook_signing import checked_headers

__all__ = ["MAX_STEPS", "StepChecks", "StepDraft", "step_headers_context"]

MAX_STEPS = 50
STEP_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_MIN_TIMEOUT_MS, _MAX_TIMEOUT_MS = 100, 120_000
MAX_COMMAND = 100_000
_enc = msgspec.json.Encoder()


def step_headers_context(org: str, runner_id: UUID, step_id: str) -> str:
    return f"{org}:runner_step:{runner_id}:{step_id}"


class StepDraft(StepFields, frozen=True, kw_only=True):
    """A step as written: ``Step``'s fields, a webhook step's headers in clear
    (sealed when stored). ``headers``: None keeps the headers of the stored step
    with the same id (if any), ``{}`` removes them."""

    headers: dict[str, str] | None = None


def _condition_step(field: str, d: StepDraft, later: set[str]) -> None:
    if d.expression is None:
        raise InvalidInput(f"{field}.expression", "a condition step has an expression")
    compile_expression(f"{field}.expression", d.expression)
    for branch, target in (("if_true", d.if_true), ("if_false", d.if_false)):
        if target not in (NEXT, STOP) and target not in later:
            raise InvalidInput(
                f"{field}.{branch}", f"{target!r}: 'next', 'stop' or the id of a later step"
            )


class StepChecks:
    """Drafts to steps: every check a step's kind calls for."""

    def __init__(self, agents: AgentRepository, box: SecretBox, urls: UrlPolicy) -> None:
        self._agents = agents
        self._box = box
        self._urls = urls

    async def steps(
        self,
        org: str,
        runner_id: UUID,
        drafts: list[StepDraft],
        stored: tuple[Step, ...],
        earlier: tuple[Step, ...] = (),
    ) -> tuple[Step, ...]:
        """``drafts`` checked, to follow ``earlier`` (steps kept as they are);
        ``stored``: the runner's steps before the change (their sealed headers)."""
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
            case "computer":
                await self._computer_step(org, field, d)
        return Step(
            id=d.id,
            kind=d.kind,
            name=d.name,
            input_mapping=dict(d.input_mapping),
            agent_id=d.agent_id if d.kind in ("agent", "computer") else None,
            prompt=d.prompt if d.kind == "agent" else None,
            model=d.model if d.kind == "agent" else None,
            url=d.url if d.kind == "webhook" else None,
            method=d.method if d.kind == "webhook" else "POST",
            headers=headers,
            timeout_ms=d.timeout_ms,
            command=d.command if d.kind == "computer" else None,
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

    async def _computer_step(self, org: str, field: str, d: StepDraft) -> None:
        if d.agent_id is None:
            raise InvalidInput(f"{field}.agent_id", "a computer step names the agent")
        await self._agents.get(org, d.agent_id)  # NotFound: another org's too
        if d.command is None or not d.command.strip():
            raise InvalidInput(f"{field}.command", "a computer step has a command")
        check_text(f"{field}.command", d.command, max_len=MAX_COMMAND)
        for part in template_parts(d.command):
            compile_expression(f"{field}.command", part)

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
