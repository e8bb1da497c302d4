"""Stored traces: what a turn did, kept to be read back (``GET /api/logs``).

A trace is named by its W3C trace id (the ``meta`` event's ``traceId``). It rolls
up its spans on write (duration, tokens, cost, tool calls, status) so that lists
and analytics read one narrow row per trace. Its spans are kept beside it as one
batch per turn, flat, each naming its parent. Evaluations are checks recorded on
spans: heuristic ones when a turn ends; the ``source`` leaves room for model-judged
and human ones.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID

import msgspec

__all__ = [
    "EvaluationSource",
    "SpanKindName",
    "StoredSpan",
    "TraceEvaluation",
    "TraceKind",
    "TraceRecord",
    "TraceStatus",
    "TraceSummary",
    "merged",
]

TraceKind = Literal["agent_turn", "runner_run", "tool_test", "code_session"]
TraceStatus = Literal["ok", "error"]
# Span kinds: a turn records agent, llm, tool, mcp and webhook; a runner run chain,
# runner_step, webhook and condition; embedding and guardrail are reserved, named now
# so that a client written against this list does not meet an unknown kind later
SpanKindName = Literal[
    "agent",
    "runner_step",
    "llm",
    "tool",
    "mcp",
    "webhook",
    "condition",
    "embedding",
    "guardrail",
    "chain",
]
EvaluationSource = Literal["heuristic", "llm_judge", "human"]


class TraceSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One trace's rolled-up totals (a row of ``GET /api/logs``)."""

    id: str  # the W3C trace id: 32 lowercase hex characters
    org_id: str
    kind: TraceKind
    name: str  # what ran: the agent's name
    status: TraceStatus  # error: the turn failed or was interrupted
    run_status: str | None  # the reply's status (completed, stopped, failed, ...)
    started_at: datetime
    ended_at: datetime
    duration_ms: int
    agent_id: UUID | None = None
    thread_id: UUID | None = None
    run_id: UUID | None = None
    runner_id: UUID | None = None
    message_id: UUID | None = None  # the reply's last assistant message
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float | None = None  # None: a model call's model has no price
    model_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    input_messages: int = 0  # the user's messages the turn answered
    key_source: str | None = None  # platform, byok, or mixed (None: no model call)
    error: str | None = None  # the error code when status is error
    first_token_ms: int | None = None  # the first model call's time to first chunk

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class StoredSpan(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One span of a stored trace. ``attributes`` are the span's OpenTelemetry
    attributes (``gen_ai.*``, ``agentsvc.*``); ``input``/``output`` its payloads
    (tool arguments and result, a model call's text), redacted, and cut past the
    configured cap (``truncated``, ``original_bytes``: the payloads' size before)."""

    span_id: str
    parent_span_id: str | None
    name: str
    kind: SpanKindName
    status: Literal["ok", "error"]
    started_at: datetime
    duration_ms: float
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)
    error: str | None = None
    input: Any = None
    output: Any = None
    truncated: bool = False
    original_bytes: int | None = None
    # model calls (kind llm)
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    cost_usd: float | None = None


class TraceEvaluation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A check recorded on a span: ``score`` (0..1) or ``label``, or both."""

    span_id: str | None
    name: str
    source: EvaluationSource
    score: float | None = None
    label: str | None = None
    detail: str | None = None


class TraceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What a turn writes (``ConversationStore.finish_turn``), or a runner run
    (``TraceStore.add_trace``): its summary, its spans, its evaluations. A trace id
    sent with several turns, or a runner run's with its agent steps' turns, has a
    record for each (``root_span_id`` tells them apart); the trace is their union
    (``merged``)."""

    summary: TraceSummary
    root_span_id: str  # the record's own span (the turn's, the run's)
    spans: list[StoredSpan]
    evaluations: list[TraceEvaluation]
    keep_until: datetime  # pruned after


def merged(old: TraceSummary, new: TraceSummary) -> TraceSummary:
    """Two records of one trace id (a client that sends one ``traceparent`` with
    several turns; a runner run and its agent steps' turns) as one trace: totals
    added, the span of time widened, an error kept, and what ran (kind, name, the
    ids, model, run status) ``old``'s: the earlier record's, as the stores fold
    them in the order they started (a runner run's record names the trace of its
    steps' turns). A record without model calls adds no cost, whatever its
    ``cost_usd`` (None there cannot mean an unpriced call)."""
    old_cost, new_cost = _cost(old), _cost(new)
    cost = None if old_cost is None or new_cost is None else old_cost + new_cost
    started, ended = min(old.started_at, new.started_at), max(old.ended_at, new.ended_at)
    source = old.key_source if new.key_source in (None, old.key_source) else new.key_source
    if old.key_source is not None and source != old.key_source:
        source = "mixed"
    return msgspec.structs.replace(
        old,
        status="error" if "error" in (old.status, new.status) else "ok",
        error=old.error or new.error,
        started_at=started,
        ended_at=ended,
        # half a millisecond up (whole microseconds), the same on both adapters
        duration_ms=((ended - started) // timedelta(microseconds=1) + 500) // 1000,
        input_tokens=old.input_tokens + new.input_tokens,
        output_tokens=old.output_tokens + new.output_tokens,
        cached_input_tokens=old.cached_input_tokens + new.cached_input_tokens,
        cost_usd=None if cost is None else round(cost, 10),
        model_calls=old.model_calls + new.model_calls,
        tool_calls=old.tool_calls + new.tool_calls,
        tool_errors=old.tool_errors + new.tool_errors,
        input_messages=old.input_messages + new.input_messages,
        key_source=source,
    )


def _cost(t: TraceSummary) -> float | None:
    return 0.0 if t.cost_usd is None and not t.model_calls else t.cost_usd
