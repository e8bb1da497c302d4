"""Stored traces: ``GET /api/logs`` and ``GET /api/logs/{traceId}``
(docs/observability.md). Admin reads: a trace holds the tool arguments and results
of every user's threads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import Parameter, QueryParameter

from agentsvc_core.entities import StoredSpan, TraceEvaluation, TraceSummary
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import TraceFilter
from agentsvc_core.use_cases.traces.reading import Traces
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied

Req = Request[Any, Any, Any]

TRACE_ID = r"^[0-9a-fA-F]{32}$"


class TraceOut(msgspec.Struct):
    id: str
    kind: str
    name: str
    status: str
    run_status: str | None
    started_at: datetime
    ended_at: datetime
    duration_ms: int
    agent_id: UUID | None
    thread_id: UUID | None
    run_id: UUID | None
    runner_id: UUID | None
    message_id: UUID | None
    model: str | None
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    total_tokens: int
    cost_usd: float | None
    model_calls: int
    tool_calls: int
    tool_errors: int
    input_messages: int
    key_source: str | None
    error: str | None
    first_token_ms: int | None

    @classmethod
    def of(cls, t: TraceSummary) -> TraceOut:
        return copied(cls, t)


class SpanOut(msgspec.Struct):
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    status: str
    started_at: datetime
    duration_ms: float
    attributes: dict[str, Any]
    error: str | None
    input: Any
    output: Any
    truncated: bool
    original_bytes: int | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    cost_usd: float | None

    @classmethod
    def of(cls, s: StoredSpan) -> SpanOut:
        return copied(cls, s)


class EvaluationOut(msgspec.Struct):
    span_id: str | None
    name: str
    source: str
    score: float | None
    label: str | None
    detail: str | None

    @classmethod
    def of(cls, e: TraceEvaluation) -> EvaluationOut:
        return copied(cls, e)


class TraceListOut(msgspec.Struct, rename={"next_cursor": "nextCursor"}):
    traces: list[TraceOut]
    next_cursor: str | None


class TraceDetailOut(msgspec.Struct):
    trace: TraceOut
    spans: list[SpanOut]
    evaluations: list[EvaluationOut]


def query_time(raw: str | None, name: str) -> datetime | None:
    if raw is None:
        return None
    try:
        value = msgspec.convert(raw, datetime)
        value = (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    except (msgspec.ValidationError, OverflowError):
        raise InvalidInput(name, "must be an RFC 3339 timestamp") from None
    if not 1970 <= value.year <= 9998:
        raise InvalidInput(name, "must be a time between the years 1970 and 9998")
    return value


# ``from`` and ``to``: RFC 3339 times (checked by ``query_time``)
Since = Annotated[
    str | None, QueryParameter(name="from", max_length=64, schema_extra={"format": "date-time"})
]
Until = Annotated[
    str | None, QueryParameter(name="to", max_length=64, schema_extra={"format": "date-time"})
]
AgentId = Annotated[UUID | None, QueryParameter(name="agentId")]


class TracesController(Controller):
    path = "/api/logs"
    tags = ["logs and analytics"]

    @get(
        "/",
        operation_id="listTraces",
        opt=ADMIN,
        responses=errors(403, 422),
        summary="Traces of turns, newest first, by pages",
    )
    async def list_traces(
        self,
        request: Req,
        traces: NamedDependency[Traces],
        agent_id: AgentId = None,
        runner_id: Annotated[UUID | None, QueryParameter(name="runnerId")] = None,
        thread_id: Annotated[UUID | None, QueryParameter(name="threadId")] = None,
        status: Annotated[Literal["ok", "error"] | None, QueryParameter(name="status")] = None,
        since: Since = None,
        until: Until = None,
        cursor: Annotated[str | None, QueryParameter(name="cursor", max_length=128)] = None,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=100)] = 50,
    ) -> TraceListOut:
        where = TraceFilter(
            agent_id=agent_id,
            runner_id=runner_id,
            thread_id=thread_id,
            status=status,
            since=query_time(since, "from"),
            until=query_time(until, "to"),
        )
        page = await traces.list_traces(principal_of(request), where, cursor=cursor, limit=limit)
        return TraceListOut(
            traces=[TraceOut.of(t) for t in page.traces], next_cursor=page.next_cursor
        )

    @get(
        "/{trace_id:str}",
        operation_id="getTrace",
        opt=ADMIN,
        responses=errors(403, 404, 422),
        summary="A trace: its totals, its spans (flat, each naming its parent), its evaluations",
    )
    async def get_trace(
        self,
        request: Req,
        traces: NamedDependency[Traces],
        trace_id: Annotated[str, Parameter(pattern=TRACE_ID, max_length=32)],
    ) -> TraceDetailOut:
        summary, spans, evaluations = await traces.get(principal_of(request), trace_id)
        return TraceDetailOut(
            trace=TraceOut.of(summary),
            spans=[SpanOut.of(s) for s in spans],
            evaluations=[EvaluationOut.of(e) for e in evaluations],
        )
