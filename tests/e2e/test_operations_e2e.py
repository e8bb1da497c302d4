"""The operator's view of the real process (docs/operations.md): readiness, Prometheus
metrics after a turn, request ids in JSON log lines; and a CORS preflight (docs/api.md,
"Errors")."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.service import Service, client, running
from tests.fakes.providers import FakeProvider, Reply
from tests.sse import names, parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PROVIDER_KEY = "sk-test-ops-provider-key-never-shown-0123456789"
METRICS_TOKEN = "metrics-token-for-the-e2e-scrape-0123456789"
ORIGIN = "https://app.example.com"


class Ops:
    def __init__(self, svc: Service, fake: FakeProvider, key: str) -> None:
        self.svc = svc
        self.fake = fake
        self.api = client(svc, key, timeout=30)

    def log_lines(self) -> list[str]:
        return [line for line in self.svc.log_path.read_text().splitlines() if line.strip()]

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_lines()]

    def scrape(self) -> dict[str, Any]:
        r = httpx.get(
            f"{self.svc.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
        return {f.name: f for f in text_string_to_metric_families(r.text)}


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, pg_url: str) -> Iterator[Ops]:
    tmp: Path = tmp_path_factory.mktemp("ops")
    fake = FakeProvider("beta", api_key=PROVIDER_KEY)
    base = fake.start()
    key = f"ask_e2e_{uuid.uuid4().hex}"
    try:
        with running(
            {
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": key,
                "AGENTSVC_BOOTSTRAP_ORG": f"ops-{uuid.uuid4().hex[:8]}",
                "AGENTSVC_BETA_BASE_URL": f"{base}/v1",
                "AGENTSVC_BETA_API_KEY": PROVIDER_KEY,
                "AGENTSVC_DATA_DIR": str(tmp / "data"),
                "AGENTSVC_LOG_FORMAT": "json",
                "AGENTSVC_METRICS_TOKEN": METRICS_TOKEN,
                "AGENTSVC_CORS_ORIGINS": ORIGIN,
            },
            args=("--access-log",),
            log=tmp / "service.log",
        ) as svc:
            world = Ops(svc, fake, key)
            yield world
            world.api.close()
    finally:
        fake.stop()


def thread(ops: Ops) -> str:
    agent = ops.api.post("/api/agents", json={"name": "Ops", "defaultModel": "gpt-ops-1"})
    assert agent.status_code == 201, agent.text
    t = ops.api.post("/api/threads", json={"agentId": agent.json()["id"]})
    return str(t.json()["id"])


def test_ready_on_a_migrated_database(ops: Ops) -> None:
    r = httpx.get(f"{ops.svc.url}/readyz")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert r.headers["x-request-id"]


def test_metrics_after_a_turn(ops: Ops) -> None:
    tid = thread(ops)
    ops.fake.enqueue(Reply(text="metrics are fun"))
    r = ops.api.post(f"/api/threads/{tid}/messages", json={"content": "hi"})
    assert names(parse(r.text))[-1] == "done"

    assert httpx.get(f"{ops.svc.url}/metrics").status_code == 401
    wrong = {"Authorization": "Bearer not-the-token"}
    assert httpx.get(f"{ops.svc.url}/metrics", headers=wrong).status_code == 401
    families = ops.scrape()

    sends = [
        s
        for s in families["agentsvc_http_requests"].samples
        if s.labels["route"] == "/api/threads/{thread_id}/messages"
    ]
    assert {(s.labels["method"], s.labels["status"]) for s in sends} == {("POST", "200")}
    assert sends[0].value >= 1
    duration = families["agentsvc_http_request_duration_seconds"].samples
    assert any(
        s.name.endswith("_count") and s.labels["route"] == "/api/threads/{thread_id}/messages"
        for s in duration
    )
    assert families["agentsvc_sse_streams_open"].samples[0].value == 0
    pool = {name: f.samples[0].value for name, f in families.items() if "db_pool" in name}
    assert pool["agentsvc_db_pool_max"] >= 1
    assert pool["agentsvc_db_pool_size"] >= 1
    assert pool["agentsvc_db_pool_requests"] >= 3  # the turn's statements at least
    assert "agentsvc_outbound_failures" in families
    # no ids and no secrets in any label
    text = httpx.get(
        f"{ops.svc.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    ).text
    assert tid not in text
    assert PROVIDER_KEY not in text
    assert METRICS_TOKEN not in text


def test_json_log_lines_name_their_request(ops: Ops) -> None:
    tid = thread(ops)
    ops.fake.enqueue(Reply(status=400))
    r = ops.api.post(
        f"/api/threads/{tid}/messages",
        json={"content": "this makes the provider answer 400"},
        headers={"X-Request-Id": "e2e-provider-400"},
    )
    assert r.headers["x-request-id"] == "e2e-provider-400"
    events = parse(r.text)
    assert names(events)[-1] == "error"
    assert events[-1].data["code"] == "PROVIDER_BAD_REQUEST"
    bad = ops.api.get(f"/api/threads/{tid}", headers={"X-Request-Id": "bad id with spaces"})
    assert bad.headers["x-request-id"] != "bad id with spaces"

    records = ops.records()  # every line of the process's output is one JSON object
    for record in records:
        assert {"time", "level", "logger", "message", "request_id"} <= record.keys(), record
    mine = [rec for rec in records if rec["request_id"] == "e2e-provider-400"]
    # the access log line of the send, and the provider's failure, logged once by
    # the reply task the request started
    assert any(rec["logger"] == "uvicorn.access" for rec in mine), mine
    failures = [rec for rec in mine if rec["logger"] == "agentsvc.llm"]
    assert len(failures) == 1, mine
    assert failures[0]["level"] == "WARNING"
    assert "PROVIDER_BAD_REQUEST" in failures[0]["message"]
    assert "HTTP 400" in failures[0]["message"]
    assert PROVIDER_KEY not in "\n".join(ops.log_lines())


def test_cors_preflight_and_exposed_request_id(ops: Ops) -> None:
    tid = thread(ops)
    preflight = httpx.options(
        f"{ops.svc.url}/api/threads/{tid}/messages",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = preflight.headers["access-control-allow-headers"].lower()
    for header in ("authorization", "content-type", "idempotency-key", "last-event-id"):
        assert header in allowed
    ops.fake.enqueue(Reply(text="cross-origin hello"))
    r = ops.api.post(
        f"/api/threads/{tid}/messages", json={"content": "hi"}, headers={"Origin": ORIGIN}
    )
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert r.headers["access-control-expose-headers"] == "X-Request-Id, Idempotent-Replayed"
    other = httpx.options(
        f"{ops.svc.url}/api/threads/{tid}/messages",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert not [h for h in other.headers if h.lower().startswith("access-control-")]
