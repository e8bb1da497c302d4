"""A turn's stored trace: its spans as the tracer ended them, made into what
``GET /api/logs/{traceId}`` shows (kinds, costs, redacted and capped payloads),
rolled up into the trace's totals, with the heuristic evaluations of the turn.

The reply (use_cases/turn/reply.py) collects its spans (``COLLECTED``), ends its own
``invoke_agent`` span, and hands them here just before its final write, which
stores the result in the same statement as the run and its messages. The spans are
the same objects the OpenTelemetry export receives: one model of a span, two
outputs. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from agentsvc_core.entities import (
    Run,
    StoredSpan,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
    Usage,
)
from agentsvc_core.entities.trace import SpanKindName
from agentsvc_core.ports.telemetry import FinishedSpan
from agentsvc_core.pricing import PriceTable
from agentsvc_core.redact import redact
from agentsvc_core.use_cases.org_settings import RESOLVER_SPAN
from agentsvc_core.use_cases.turn.spans import COMPACTION_SPAN

__all__ = ["TraceConfig", "TurnFacts", "build_trace"]

_encode = msgspec.json.encode


class TraceConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How traces are kept: for how long, payloads up to how many bytes, and the
    bounds of the heuristic evaluations."""

    prices: PriceTable
    retention: timedelta = timedelta(days=30)
    payload_bytes: int = 64 * 1024  # per span, input and output together
    slow_first_token_s: float = 10.0


class TurnFacts(msgspec.Struct, kw_only=True):
    """What the reply knows that its spans do not say."""

    org_id: str
    agent_id: Any  # UUID
    agent_name: str
    model: str
    run: Run  # the run as stored (final status)
    message_id: Any  # UUID | None: the reply's last assistant message
    input_messages: int
    step_limit: bool  # the reply stopped at the model-call bound
    empty: bool  # a completed reply with no text and no tool call for the client
    error: str | None  # the run's error code
    known_secrets: tuple[str, ...] = ()  # values to redact wherever they appear
    stored_parent: str | None = None  # a parent span stored in another record (a runner step's)


def _kind(span: FinishedSpan) -> SpanKindName:
    a = span.attributes
    op = a.get("gen_ai.operation.name")
    if op == "invoke_agent":
        return "agent"
    if op == "chat" or span.name == COMPACTION_SPAN:
        return "llm"
    if op == "execute_tool":
        return "mcp" if a.get("gen_ai.tool.type") == "extension" else "tool"
    if span.name == RESOLVER_SPAN:
        return "webhook"
    return "chain"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _iso(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


class _Payloads:
    """Encodes, redacts and caps span payloads (as ``msgspec.Raw`` JSON)."""

    __slots__ = ("_cap", "_known")

    def __init__(self, cap: int, known: Sequence[str]) -> None:
        self._cap = cap
        self._known = known

    def encode(self, value: object) -> bytes | None:
        if value is None:
            return None
        text = _encode(value).decode()
        return redact(text, self._known).encode()

    def fit(self, span: FinishedSpan) -> dict[str, Any]:
        raw_in, raw_out = self.encode(span.input), self.encode(span.output)
        size = len(raw_in or b"") + len(raw_out or b"")
        if size <= self._cap:
            return {
                "input": None if raw_in is None else msgspec.Raw(raw_in),
                "output": None if raw_out is None else msgspec.Raw(raw_out),
            }
        # past the cap: each payload keeps its share of it, as the start of its text
        fields: dict[str, Any] = {"truncated": True, "original_bytes": size}
        half = self._cap // 2
        for name, raw in (("input", raw_in), ("output", raw_out)):
            if raw is not None:
                cut = raw[:half].decode(errors="ignore") if len(raw) > half else raw.decode()
                fields[name] = msgspec.Raw(_encode(cut))
        return fields


def _stored(
    span: FinishedSpan, payloads: _Payloads, prices: PriceTable, ids: set[str]
) -> StoredSpan:
    a = span.attributes
    kind = _kind(span)
    extra: dict[str, Any] = {}
    if kind == "llm":
        model = a.get("gen_ai.request.model")
        usage = Usage(
            input_tokens=_int(a.get("gen_ai.usage.input_tokens")),
            output_tokens=_int(a.get("gen_ai.usage.output_tokens")),
            cached_input_tokens=_int(a.get("gen_ai.usage.cache_read.input_tokens")),
        )
        extra = {
            "model": model if isinstance(model, str) else None,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cached_input_tokens": usage.cached_input_tokens,
            "cost_usd": prices.cost(model, usage) if isinstance(model, str) else None,
        }
    if span.input is not None or span.output is not None:
        extra.update(payloads.fit(span))
    parent = span.parent_span_id
    return StoredSpan(
        span_id=span.span_id,
        parent_span_id=parent if parent in ids else None,
        name=span.name,
        kind=kind,
        status="error" if span.status == "error" else "ok",
        started_at=_iso(span.start_ns),
        duration_ms=round((span.end_ns - span.start_ns) / 1e6, 3),
        attributes=dict(a),
        error=span.error_type,
        **extra,
    )


def _evaluations(
    spans: Iterable[tuple[FinishedSpan, StoredSpan]],
    root: str | None,
    facts: TurnFacts,
    config: TraceConfig,
) -> list[TraceEvaluation]:
    found: list[TraceEvaluation] = []

    def add(span_id: str | None, name: str, label: str, detail: str | None = None) -> None:
        found.append(
            TraceEvaluation(
                span_id=span_id, name=name, source="heuristic", label=label, detail=detail
            )
        )

    for span, stored in spans:
        a = span.attributes
        if stored.kind in ("tool", "mcp") and stored.status == "error":
            outcome = str(a.get("agentsvc.tool.outcome", "error"))
            add(stored.span_id, "tool_error", outcome, stored.error)
        elif stored.kind == "llm":
            if stored.status == "error":
                add(stored.span_id, "provider_error", "error", stored.error)
            retries = _int(a.get("agentsvc.provider.retries"))
            if retries:
                add(stored.span_id, "provider_retry", "retried", f"{retries} retries")
            first = a.get("gen_ai.response.time_to_first_chunk")
            if isinstance(first, float) and first > config.slow_first_token_s:
                add(
                    stored.span_id,
                    "slow_first_token",
                    "slow",
                    f"first token after {first:.1f} s (bound {config.slow_first_token_s:g} s)",
                )
        elif stored.kind == "webhook" and stored.status == "error":
            outcome = str(a.get("agentsvc.resolver.outcome", "error"))
            add(stored.span_id, "resolver_fallback", outcome, "the platform key was used")
    if facts.step_limit:
        add(root, "step_limit", "cut", "the reply reached the bound of model calls")
    if facts.empty:
        add(root, "empty_reply", "empty", "the reply has no text")
    return found


def build_trace(
    config: TraceConfig, facts: TurnFacts, collected: Sequence[FinishedSpan], now: datetime
) -> TraceRecord:
    """The turn's trace from its collected spans (at least its ``invoke_agent``
    span), rolled up."""
    payloads = _Payloads(config.payload_bytes, facts.known_secrets)
    ids = {s.span_id for s in collected}
    if facts.stored_parent is not None:
        ids.add(facts.stored_parent)
    ordered = sorted(collected, key=lambda s: s.start_ns)
    pairs = [(s, _stored(s, payloads, config.prices, ids)) for s in ordered]
    root = next((st for s, st in pairs if st.kind == "agent"), None)
    tokens_in = tokens_out = cached = calls = tools = tool_errors = 0
    cost: float | None = 0.0
    sources: set[str] = set()
    first_ms: int | None = None
    for span, stored in pairs:
        if stored.kind == "llm":
            calls += 1
            tokens_in += stored.input_tokens or 0
            tokens_out += stored.output_tokens or 0
            cached += stored.cached_input_tokens or 0
            cost = None if cost is None or stored.cost_usd is None else cost + stored.cost_usd
            source = span.attributes.get("agentsvc.key_source")
            if isinstance(source, str):
                sources.add(source)
            first = span.attributes.get("gen_ai.response.time_to_first_chunk")
            if first_ms is None and isinstance(first, float):
                first_ms = round(first * 1000)
        elif stored.kind in ("tool", "mcp"):
            tools += 1
            tool_errors += stored.status == "error"
    start = ordered[0].start_ns
    end = max(s.end_ns for s in ordered)
    run = facts.run
    failed = run.status in ("failed", "interrupted")
    key_source: str | None = None
    if sources:
        key_source = sources.pop() if len(sources) == 1 else "mixed"
    summary = TraceSummary(
        id=ordered[0].trace_id,
        org_id=facts.org_id,
        kind="agent_turn",
        name=facts.agent_name,
        status="error" if failed else "ok",
        run_status=run.status,
        started_at=_iso(start),
        ended_at=_iso(end),
        duration_ms=round((end - start) / 1e6),
        agent_id=facts.agent_id,
        thread_id=run.thread_id,
        run_id=run.id,
        message_id=facts.message_id,
        model=facts.model,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cached_input_tokens=cached,
        cost_usd=None if cost is None else round(cost, 10),
        model_calls=calls,
        tool_calls=tools,
        tool_errors=tool_errors,
        input_messages=facts.input_messages,
        key_source=key_source,
        error=facts.error if failed else None,
        first_token_ms=first_ms,
    )
    return TraceRecord(
        summary=summary,
        root_span_id=(root or pairs[0][1]).span_id,
        spans=[st for _, st in pairs],
        evaluations=_evaluations(pairs, root.span_id if root else None, facts, config),
        keep_until=now + config.retention,
    )
