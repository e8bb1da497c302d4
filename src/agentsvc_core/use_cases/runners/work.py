"""What a step does, by its kind: an agent step's turn (``agent_steps.py``), a
webhook step's signed call, a condition's choice, a computer step's command. Each
answers what its attempt came to (``transitions.StepEnd``), or ``Busy`` when an
agent step's thread is busy with a turn that is not the step's (no attempt was
made)."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import Runner, RunnerRun, Step, StepRun
from agentsvc_core.ports import SecretBox
from agentsvc_core.ports.webhooks import WebhookCaller
from agentsvc_core.use_cases.runners.agent_steps import AgentSteps
from agentsvc_core.use_cases.runners.budgets import BudgetCheck
from agentsvc_core.use_cases.runners.expressions import context_of, evaluate, json_or_none, truthy
from agentsvc_core.use_cases.runners.steps import step_headers_context
from agentsvc_core.use_cases.runners.transitions import (
    MAX_OUTPUT_CHARS,
    Busy,
    Done,
    Failed,
    StepEnd,
)
from agentsvc_core.use_cases.webhook_signing import (
    SigningSecrets,
    idempotency_key,
    opened_headers,
    signed_call,
)

__all__ = ["WEBHOOK_MAX_BYTES", "StepWork", "WebhookSteps", "condition"]

WEBHOOK_MAX_BYTES = 1_000_000
_enc = msgspec.json.Encoder()


def condition(step: Step, context: dict[str, Any]) -> StepEnd:
    """A condition step: its expression's value, and where the run goes."""
    assert step.expression is not None
    try:
        value = evaluate(step.expression, context)
    except ValueError as exc:
        return Failed(error=f"the condition cannot be evaluated: {exc}")
    chosen = step.if_true if truthy(value) else step.if_false
    return Done(output={"value": value, "next": chosen}, next=chosen)


class WebhookSteps:
    """A webhook step: one signed call, its body the mapped input (the run's
    input without a mapping), the same ``Idempotency-Key`` on every attempt."""

    def __init__(self, caller: WebhookCaller, signing: SigningSecrets, box: SecretBox) -> None:
        self._caller = caller
        self._signing = signing
        self._box = box

    async def run(self, run: RunnerRun, step: Step, context: dict[str, Any]) -> StepEnd:
        assert step.url is not None
        try:
            mapped = {k: evaluate(v, context) for k, v in step.input_mapping.items()}
        except ValueError as exc:
            return Failed(error=f"the step's input cannot be built: {exc}")
        body = _enc.encode(
            {
                "runnerId": None if run.runner_id is None else str(run.runner_id),
                "runId": str(run.id),
                "stepId": step.id,
                "orgId": run.org_id,
                "input": mapped if step.input_mapping else run.input,
            }
        )
        where = step_headers_context(run.org_id, run.runner_id or run.id, step.id)
        answer = await signed_call(
            self._caller,
            self._signing,
            org=run.org_id,
            url=step.url,
            method=step.method,
            headers=opened_headers(self._box, step.headers, where),
            body=body,
            timeout_ms=step.timeout_ms,
            max_bytes=WEBHOOK_MAX_BYTES,
            # the same on every attempt: a receiver can drop a repeated call
            key=idempotency_key(run.org_id, run.id, step.id),
        )
        output = {
            "status_code": answer.status_code,
            "body": answer.body[:MAX_OUTPUT_CHARS],
            "json": json_or_none(answer.body),
        }
        if answer.outcome == "ok":
            return Done(output=output)
        if answer.outcome == "status":
            return Failed(output=output, error=f"the webhook answered {answer.status_code}")
        return Failed(error=f"the webhook call failed: {answer.reason}")


class ComputerStep(Protocol):
    """A ``computer`` step (``use_cases/computer/steps.py``)."""

    async def run(self, run: RunnerRun, step: Step, context: dict[str, Any]) -> StepEnd: ...


class StepWork:
    """A step's work, by its kind (``computer``: None, the service has no computers)."""

    def __init__(
        self, agent: AgentSteps, webhook: WebhookSteps, computer: ComputerStep | None = None
    ) -> None:
        self._agent = agent
        self._webhook = webhook
        self._computer = computer

    async def thread(self, run: RunnerRun, step: Step) -> UUID:
        """An agent step's thread, made before the step's start is stored (a
        retried attempt finds it there)."""
        return await self._agent.thread(run, step)

    async def do(
        self,
        run: RunnerRun,
        runner: Runner | None,
        step: Step,
        state: StepRun,
        budget: BudgetCheck | None,
        retry: bool,
    ) -> StepEnd | Busy:
        """``retry``: an earlier attempt of the step was interrupted (an agent step
        first looks for that attempt's turn)."""
        context = context_of(run)
        match step.kind:
            case "agent":
                return await self._agent.run(run, runner, step, state, context, budget, retry)
            case "webhook":
                return await self._webhook.run(run, step, context)
            case "condition":
                return condition(step, context)
            case "computer" if self._computer is not None:
                return await self._computer.run(run, step, context)
        return Failed(error=f"unknown step kind {step.kind!r}")
