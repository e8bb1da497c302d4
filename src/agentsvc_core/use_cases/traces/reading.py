"""Reading the traces turns left behind (``GET /api/logs``, ``GET /api/logs/{traceId}``)
under the caller's organization, and the retention sweep that drops them."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from agentsvc_core.entities import Principal, StoredSpan, TraceEvaluation, TraceSummary
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import Clock, TraceFilter, TraceStore

__all__ = ["TracePage", "Traces", "parse_cursor"]


class TracePage(msgspec.Struct, frozen=True):
    traces: list[TraceSummary]
    next_cursor: str | None


def _cursor_of(t: TraceSummary) -> str:
    return f"{t.started_at.astimezone(UTC).isoformat().replace('+00:00', 'Z')}|{t.id}"


def parse_cursor(raw: str) -> tuple[datetime, str]:
    """A ``nextCursor``: ``<started_at>|<trace id>``."""
    at, sep, trace_id = raw.partition("|")
    try:
        if not sep or len(trace_id) != 32:
            raise ValueError
        int(trace_id, 16)
        when = msgspec.convert(at, datetime)
    except (ValueError, msgspec.ValidationError):
        raise InvalidInput("cursor", "must be a nextCursor of this list") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)), trace_id


class Traces:
    """Stored traces: listed, read, and pruned when their time is up."""

    def __init__(self, store: TraceStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def list_traces(
        self, who: Principal, where: TraceFilter, *, cursor: str | None, limit: int
    ) -> TracePage:
        if where.since and where.until and where.since >= where.until:
            raise InvalidInput("from", "must be before to")
        before = parse_cursor(cursor) if cursor else None
        found = await self._store.list_traces(who.org_id, where, before=before, limit=limit + 1)
        more = len(found) > limit
        page = found[:limit]
        return TracePage(page, _cursor_of(page[-1]) if more else None)

    async def get(
        self, who: Principal, trace_id: str
    ) -> tuple[TraceSummary, list[StoredSpan], list[TraceEvaluation]]:
        found = await self._store.get_trace(who.org_id, trace_id.lower())
        if found is None:
            raise NotFound("trace not found")
        return found

    async def prune(self) -> int:
        """Drop the traces kept long enough (the maintenance sweep)."""
        return await self._store.prune_traces(self._clock.now())
