"""Usage analytics: ``GET /api/analytics`` (docs/observability.md). An admin read:
the whole organization's spending."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

import msgspec
from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from agentsvc_core.use_cases.analytics import (
    AgentTotals,
    Analytics,
    AnalyticsReport,
    ModelTotals,
    SeriesPoint,
    Totals,
)
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.traces import AgentId, Req, Since, Until, query_time
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied


class AnalyticsOut(msgspec.Struct, rename={"since": "from", "until": "to"}):
    period: str
    since: datetime
    until: datetime
    granularity: str
    agent_id: UUID | None
    prices_taken: str | None
    trace_retention_days: int
    totals: Totals
    series: list[SeriesPoint]
    by_model: list[ModelTotals]
    by_agent: list[AgentTotals]

    @classmethod
    def of(cls, r: AnalyticsReport) -> AnalyticsOut:
        return copied(cls, r)


class AnalyticsController(Controller):
    path = "/api/analytics"
    tags = ["logs and analytics"]

    @get(
        "/",
        operation_id="getAnalytics",
        opt=ADMIN,
        responses=errors(403, 422),
        summary="Usage analytics: totals, a zero-filled series, by model and by agent",
    )
    async def get_analytics(
        self,
        request: Req,
        analytics: NamedDependency[Analytics],
        period: Annotated[
            Literal["24h", "7d", "30d", "custom"], QueryParameter(name="period")
        ] = "7d",
        agent_id: AgentId = None,
        since: Since = None,
        until: Until = None,
        granularity: Annotated[
            Literal["hour", "day"] | None, QueryParameter(name="granularity")
        ] = None,
    ) -> AnalyticsOut:
        report = await analytics.report(
            principal_of(request),
            period,
            since=query_time(since, "from"),
            until=query_time(until, "to"),
            granularity=granularity,
            agent_id=agent_id,
        )
        return AnalyticsOut.of(report)
