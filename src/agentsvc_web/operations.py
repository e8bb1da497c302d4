"""Operators' routes: ``/readyz`` and ``/metrics`` (``/healthz`` is in ``app``).

Neither takes the API's credentials (the authentication middleware leaves them
alone) and ``/readyz`` costs no rate-limit budget (``limits.EXEMPT_PATHS``), so a
load balancer or Prometheus needs no API key.

- ``/readyz``: 200 ``{"ok": true}`` when the process should get traffic; 503 with
  the error body, code ``NOT_READY``, and why, when storage cannot serve
  (``Storage.check_ready``) or the process is shutting down (``Readiness``).
- ``/metrics``: the app's registry (``Services.metrics``) in the Prometheus text
  format. With ``AGENTSVC_METRICS_TOKEN`` set, only for ``Authorization: Bearer
  <token>`` (compared in constant time; anything else is 401); without it, open,
  as Prometheus expects: keep it off the public network. Not in the OpenAPI
  document: it is no part of the API (its format is Prometheus's, and API keys do
  not open it).
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request, Response, get
from litestar.openapi.datastructures import ResponseSpec
from prometheus_client import CollectorRegistry, generate_latest

from agentsvc_core.errors import Unauthenticated, Unavailable
from agentsvc_core.use_cases.health import Readiness
from agentsvc_web.errors import error_response
from agentsvc_web.schemas import ErrorBody, OkBody

__all__ = ["metrics", "readyz"]


@get(
    "/readyz",
    operation_id="readyz",
    summary="Readiness probe (no authentication): storage reachable and migrated, not draining",
    tags=["operations"],
    security=[],
    responses={
        503: ResponseSpec(
            data_container=ErrorBody,
            description="Not ready (NOT_READY): storage unreachable or not migrated, "
            "or the process is shutting down",
            generate_examples=False,
        )
    },
)
async def readyz(request: Request[Any, Any, Any]) -> Response[OkBody]:
    readiness: Readiness = request.app.state["readiness"]
    try:
        await readiness.check()
    except Unavailable as exc:
        return error_response(503, exc.detail, "NOT_READY")  # type: ignore[return-value]
    return Response(OkBody(ok=True))


@get("/metrics", include_in_schema=False, security=[], sync_to_thread=False)
def metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    token: str | None = request.app.state["metrics_token"]
    if token is not None:
        sent = request.headers.get("authorization", "")
        scheme, _, value = sent.partition(" ")
        expected = token.encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), expected):
            raise Unauthenticated("/metrics needs Authorization: Bearer <AGENTSVC_METRICS_TOKEN>")
    registry: CollectorRegistry = request.app.state["metrics"]
    # the classic text format (Litestar adds "; charset=utf-8"); our names are ASCII
    return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")
