"""Stored traces and the analytics read from them (``GET /api/logs``,
``GET /api/analytics``; docs/observability.md).

A turn's trace is written with its final write (``ConversationStore.finish_turn``,
in the same statement): no extra round trip per turn. Records that no turn writes
(a runner run's) are stored with ``add_trace``. Reading is here: trace summaries by
pages, one trace with its spans and evaluations, and the grouped sums analytics is
made of (turns only). Storage groups; the use case (``use_cases/analytics.py``) adds
up, zero-fills and names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities import StoredSpan, TraceEvaluation, TraceRecord, TraceSummary

__all__ = [
    "AnalyticsGroups",
    "AnalyticsStore",
    "Bucket",
    "ThreadGroup",
    "TraceFilter",
    "TraceGroup",
    "TraceStore",
    "UsageGroup",
    "bucket_start",
]

Bucket = Literal["hour", "day"]


def bucket_start(at: datetime, bucket: Bucket) -> datetime:
    """The start of the UTC hour or day ``at`` falls in: what analytics sums by."""
    at = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return at.replace(hour=0) if bucket == "day" else at


class TraceFilter(msgspec.Struct, frozen=True, kw_only=True):
    """Which traces a list shows (all given conditions hold)."""

    agent_id: UUID | None = None
    runner_id: UUID | None = None
    thread_id: UUID | None = None
    status: str | None = None  # ok or error
    since: datetime | None = None  # started at or after
    until: datetime | None = None  # started before


class TraceStore(Protocol):
    async def list_traces(
        self,
        org_id: str,
        where: TraceFilter,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[TraceSummary]:
        """The summaries of the trace records (turns', runner runs'; a row per
        record, so a trace id stored by several shows as many), newest first
        (``started_at``, then id, both descending), those strictly before the
        ``(started_at, id)`` cursor when given; at most ``limit``."""
        ...

    async def get_trace(
        self, org_id: str, trace_id: str
    ) -> tuple[TraceSummary, list[StoredSpan], list[TraceEvaluation]] | None:
        """The trace (its records ``merged`` in the order they started; on a tie,
        records that are not turns first, then by root span id), its spans (in the
        order they started) and evaluations (in the order they were stored); None
        when the organization has no such trace."""
        ...

    async def add_trace(self, record: TraceRecord) -> None:
        """Store a record that no turn writes (a runner run's, a step's): the same as
        the trace part of ``ConversationStore.finish_turn``. A trace id stored
        already gets this record's spans and totals added (``merged`` when read);
        the agent steps' turns store their own records under the same trace id with
        ``finish_turn``. Raises ``Conflict`` when the trace already has a record
        with this ``root_span_id``."""
        ...

    async def prune_traces(self, before: datetime) -> int:
        """Remove the trace records (all organizations) kept until before
        ``before``, with their spans and evaluations; how many went."""
        ...


class UsageGroup(msgspec.Struct, frozen=True, kw_only=True):
    """Usage records summed by the keys that are not None. Storage answers three
    views, each a partition of the records: by ``bucket`` (with ``purpose`` and
    ``key_source``), by ``model``, and by ``agent_id`` (with ``purpose`` and
    ``key_source``). A row may serve several views at once (all keys set)."""

    bucket: datetime | None = None
    agent_id: UUID | None = None
    model: str | None = None
    purpose: str | None = None
    key_source: str | None = None
    calls: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost_usd: float  # the sum of the known costs
    unpriced: int  # calls whose model has no price (their cost is unknown)


class TraceGroup(msgspec.Struct, frozen=True, kw_only=True):
    """Turns (their trace records, kind ``agent_turn``: a runner run is no reply)
    summed by ``bucket`` and by ``agent_id`` (two views, as ``UsageGroup``'s)."""

    bucket: datetime | None = None
    agent_id: UUID | None = None
    replies: int
    messages: int  # the user messages they answered
    tool_calls: int
    tool_errors: int
    errors: int  # turns that failed or were interrupted


class ThreadGroup(msgspec.Struct, frozen=True, kw_only=True):
    """Threads opened, by ``bucket`` and by ``agent_id`` (two views)."""

    bucket: datetime | None = None
    agent_id: UUID | None = None
    threads: int


class AnalyticsGroups(msgspec.Struct, frozen=True, kw_only=True):
    usage: list[UsageGroup]
    traces: list[TraceGroup]
    threads: list[ThreadGroup]


class AnalyticsStore(Protocol):
    async def analytics(
        self,
        org_id: str,
        since: datetime,
        until: datetime,
        bucket: Bucket,
        agent_id: UUID | None = None,
    ) -> AnalyticsGroups:
        """The organization's usage records, turns (trace records of kind
        ``agent_turn``) and new threads with a time in [since, until) (``since`` a
        whole UTC hour), summed by ``bucket`` (the UTC hour or day the time falls
        in), by agent and, for usage, by model; only the agent's when ``agent_id``
        is given."""
        ...

    async def roll_up(self) -> int:
        """Fold what was stored since the last call into the hourly sums analytics
        reads (storage that keeps none does nothing); how many rows it folded."""
        ...
