"""What docs/api.md states about a parameter error's 422 detail and about
``/healthz``, checked against the app.

docs/api.md: 422 ``VALIDATION_ERROR`` when "a field or query parameter is missing, of
the wrong type or out of bounds; ``detail`` names it as the client sent it";
``GET /healthz`` is "a liveness probe answering ``{"ok": true}``" that needs no
credentials, which the API document says (``security: []``), and it carries no
``Cache-Control``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings

KEY = f"ask_web_{uuid.uuid4().hex}"
AUTH = {"Authorization": f"Bearer {KEY}"}
ZERO = "00000000-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def c() -> Iterator[TestClient[Any]]:
    settings = Settings(storage="memory", migrate_on_start=False, bootstrap_api_key=KEY)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/api/threads", "agentId: missing required query parameter"),
        ("/api/threads?limit=5", "agentId: missing required query parameter"),
        ("/api/threads?agentId=not-a-uuid", "agentId: "),
        (f"/api/threads?agentId={ZERO}&orgId={'o' * 129}", "orgId: "),
        (f"/api/threads?agentId={ZERO}&limit=0", "limit: "),
        (f"/api/threads/{ZERO}/messages?offset=-1", "offset: "),
        (f"/api/mcps/{ZERO}/oauth/callback?state={'s' * 513}", "state: "),
        (f"/api/threads/{ZERO}/stream?runId=not-a-uuid", "runId: "),
        ("/api/logs?agentId=not-a-uuid", "agentId: "),
        ("/api/logs?threadId=not-a-uuid", "threadId: "),
        ("/api/logs?limit=101", "limit: "),
        ("/api/logs?status=failed", "status: "),
        ("/api/logs?cursor=abc", "cursor: "),
        ("/api/logs?from=yesterday", "from: "),
        ("/api/analytics?period=1y", "period: "),
        ("/api/analytics?period=custom", "from: "),
        ("/api/analytics?granularity=minute", "granularity: "),
    ],
)
def test_a_query_parameter_error_names_the_parameter_as_sent(
    c: TestClient[Any], path: str, named: str
) -> None:
    r = c.get(path, headers=AUTH)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "VALIDATION_ERROR"
    assert body["detail"].startswith(named), body


def test_a_header_error_names_the_header_as_sent(c: TestClient[Any]) -> None:
    r = c.get(f"/api/threads/{ZERO}/stream", headers={**AUTH, "Last-Event-ID": "9" * 40})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("Last-Event-ID: "), r.json()


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer ask_unknown_0123456789abcdef"}, AUTH]
)
def test_healthz_is_a_public_liveness_probe(c: TestClient[Any], headers: dict[str, str]) -> None:
    r = c.get("/healthz", headers=headers)
    assert r.status_code == 200
    assert r.json() == {"ok": True}
    assert "cache-control" not in r.headers
    doc = c.get("/schema/openapi.json").json()
    assert doc["paths"]["/healthz"]["get"]["security"] == []
