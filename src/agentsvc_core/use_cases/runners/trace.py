"""A runner run's trace record (``GET /api/logs/{traceId}``): the run's own span
(kind ``chain``) and one span per step that started (``runner_step`` for agent
steps, ``webhook``, ``condition``), made from the run's row when it ends. The
agent steps' turns store their own records under the same trace id, their
``invoke_agent`` spans children of their step's span; the trace is the union.
``RunTraces`` stores the record.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from typing import Any

import msgspec

from agentsvc_core.entities import StoredSpan, TraceRecord, TraceSummary
from agentsvc_core.entities.runner import RunnerRun, StepRun
from agentsvc_core.entities.trace import SpanKindName
from agentsvc_core.errors import Conflict, DomainError, NotFound
from agentsvc_core.ports import Clock
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.ports.traces import TraceStore

__all__ = ["PAYLOAD_CAP", "RunTraces", "run_span_id", "run_trace", "step_span_id"]

log = logging.getLogger("agentsvc.runners")

PAYLOAD_CAP = 16 * 1024  # a step's output kept in its span (the run's row has it whole)
_enc = msgspec.json.Encoder()

_KINDS: dict[str, SpanKindName] = {
    "agent": "runner_step",
    "webhook": "webhook",
    "condition": "condition",
    "computer": "tool",
}


def _span_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_span_id(run: RunnerRun) -> str:
    return _span_id(f"run:{run.id}")


def step_span_id(run: RunnerRun, state: StepRun) -> str:
    """The same for every read of one attempt of a step (the turn's parent)."""
    return _span_id(f"run:{run.id}:{state.step_id}:{state.attempt}")


def _capped(value: Any) -> tuple[Any, int | None]:
    """A payload, or None past ``PAYLOAD_CAP`` bytes of JSON (then its size)."""
    size = len(_enc.encode(value))
    return (value, None) if size <= PAYLOAD_CAP else (None, size)


def _payloads(input: Any, output: Any) -> dict[str, Any]:
    given_in, size_in = _capped(input)
    given_out, size_out = _capped(output)
    if size_in is None and size_out is None:
        return {"input": given_in, "output": given_out}
    return {
        "input": given_in,
        "output": given_out,
        "truncated": True,
        "original_bytes": (size_in or 0) + (size_out or 0),
    }


def _ms(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds() * 1000)


def run_trace(run: RunnerRun, name: str, keep_until: datetime) -> TraceRecord:
    assert run.trace_id is not None
    started = run.started_at or run.created_at
    ended = run.ended_at or run.updated_at
    root = run_span_id(run)
    spans = [
        StoredSpan(
            span_id=root,
            parent_span_id=None,
            name=f"runner_run {name}",
            kind="chain",
            status="ok" if run.status == "succeeded" else "error",
            started_at=started,
            duration_ms=_ms(started, ended),
            attributes={
                "agentsvc.run.id": str(run.id),
                "agentsvc.run.status": run.status,
                "agentsvc.run.trigger": run.trigger_kind,
            },
            error=run.error if run.status != "succeeded" else None,
            **_payloads(run.input, run.output),
        )
    ]
    for step, state in zip(run.pipeline, run.steps, strict=True):
        if state.started_at is None or state.status in ("pending", "skipped"):
            continue
        attributes: dict[str, Any] = {
            "agentsvc.step.id": step.id,
            "agentsvc.step.kind": step.kind,
            "agentsvc.step.attempt": state.attempt,
        }
        if state.thread_id is not None:
            attributes["gen_ai.conversation.id"] = str(state.thread_id)
        spans.append(
            StoredSpan(
                span_id=step_span_id(run, state),
                parent_span_id=root,
                name=f"step {step.id}",
                kind=_KINDS[step.kind],
                status="ok" if state.status == "succeeded" else "error",
                started_at=state.started_at,
                duration_ms=_ms(state.started_at, state.ended_at or ended),
                attributes=attributes,
                error=state.error,
                **_payloads(None, state.output),
                model=state.model,
                cost_usd=state.cost_usd if step.kind == "agent" else None,
            )
        )
    summary = TraceSummary(
        id=run.trace_id,
        org_id=run.org_id,
        kind="runner_run",
        name=name,
        status="ok" if run.status == "succeeded" else "error",
        run_status=run.status,
        started_at=started,
        ended_at=ended,
        duration_ms=int(_ms(started, ended)),
        agent_id=run.agent_id,
        thread_id=run.thread_id,
        run_id=run.id,
        runner_id=run.runner_id,
        error=None if run.status == "succeeded" else (run.status.upper()),
    )
    return TraceRecord(
        summary=summary, root_span_id=root, spans=spans, evaluations=[], keep_until=keep_until
    )


class RunTraces:
    """Where an ended run's trace record goes (kept for ``retention``; zero or no
    store: not kept)."""

    def __init__(
        self,
        store: RunnerStore,
        traces: TraceStore | None,
        clock: Clock,
        retention: timedelta = timedelta(0),
    ) -> None:
        self._store = store
        self._traces = traces if retention > timedelta(0) else None
        self._clock = clock
        self._retention = retention

    async def record(self, run: RunnerRun) -> None:
        """Store the trace record of an ended run (its own span and one per step;
        its agent steps' turns stored theirs under the same trace id). Once: a
        second record of the run (a cancel racing the job) is dropped."""
        if self._traces is None or run.trace_id is None:
            return
        name = "scheduled task"
        if run.runner_id is not None:
            try:
                name = (await self._store.get(run.org_id, run.runner_id)).name
            except NotFound:
                return
        record = run_trace(run, name, self._clock.now() + self._retention)
        try:
            await self._traces.add_trace(record)
        except Conflict:
            pass  # recorded already
        except DomainError as exc:
            log.warning("the trace of run %s could not be stored: %s", run.id, exc.detail)
