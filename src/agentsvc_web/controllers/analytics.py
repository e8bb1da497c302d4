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
from agentsvc_core.use_cases.publishing import ChatView, Publishing
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.traces import AgentId, Req, Since, Until, query_time
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied


class ChatTodayOut(msgspec.Struct):
    """A published chat's spending today (UTC): why its sends are refused when
    ``cap_reached`` (docs/publishing.md)."""

    agent_id: UUID
    slug: str
    is_active: bool
    daily_cost_cap_usd: float | None
    cost_today_usd: float
    cap_reached: bool

    @classmethod
    def of(cls, view: ChatView) -> ChatTodayOut:
        return copied(
            cls,
            view.chat,
            cost_today_usd=round(view.cost_today_usd, 6),
            cap_reached=view.cap_reached,
        )


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
    published_chats: list[ChatTodayOut]  # the published chats' spending today

    @classmethod
    def of(cls, r: AnalyticsReport, chats: list[ChatView]) -> AnalyticsOut:
        return copied(cls, r, published_chats=[ChatTodayOut.of(c) for c in chats])


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
        publishing: NamedDependency[Publishing],
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
        who = principal_of(request)
        report = await analytics.report(
            who,
            period,
            since=query_time(since, "from"),
            until=query_time(until, "to"),
            granularity=granularity,
            agent_id=agent_id,
        )
        return AnalyticsOut.of(report, await publishing.today(who, agent_id))
