"""``GET /api/models`` against the real process and both fake providers: every listed
model, sent a turn with its example id as ``modelOverride``, is routed, keyed and
priced as the listing says (docs/models.md#listing). Alpha runs with a key of the
deployment's own, beta with a base URL only (no key: the fake takes it for a proxy
that adds one)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.e2e.service import Service, client, new_org, running
from tests.fakes.providers import FakeProvider
from tests.sse import names, parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JWT_SECRET = "models-e2e-jwt-secret-0123456789abcdefghijklmnopq"
ALPHA_KEY = "sk-ant-models-e2e-0123456789"


@pytest.fixture(scope="module")
def served(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[str, FakeProvider]]]:
    tmp = tmp_path_factory.mktemp("models")
    fakes = {
        "alpha": FakeProvider("alpha", api_key=ALPHA_KEY),
        "beta": FakeProvider("beta", api_key=""),
    }
    alpha, beta = fakes["alpha"].start(), fakes["beta"].start()
    try:
        with running(
            {
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
                "AGENTSVC_BOOTSTRAP_ORG": f"mod-{uuid.uuid4().hex[:8]}",
                "AGENTSVC_JWT_SECRET": JWT_SECRET,
                "AGENTSVC_ALPHA_BASE_URL": alpha,
                "AGENTSVC_ALPHA_API_KEY": ALPHA_KEY,
                "AGENTSVC_BETA_BASE_URL": f"{beta}/v1",
            },
            log=tmp / "svc.log",
        ) as svc:
            yield svc, fakes
    finally:
        for fake in fakes.values():
            fake.stop()


def _usage(pg_url: str, thread: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg_url) as db:
        return db.execute(
            "SELECT provider, model, cost_usd, key_source FROM usage_records WHERE thread_id = %s",
            (thread,),
        ).fetchall()


def test_every_listed_model_takes_a_turn_as_listed(
    served: tuple[Service, dict[str, FakeProvider]], pg_url: str
) -> None:
    svc, fakes = served
    _, key = new_org(svc.url, JWT_SECRET, "mod")
    with client(svc, key, timeout=30) as c:
        r = c.get("/api/models")
        assert r.status_code == 200, r.text
        listed = r.json()
        families = {m["family"] for m in listed}
        assert families == {"local", "alpha", "beta"}
        assert {m["family"]: m["key_configured"] for m in listed} == {
            "local": None,
            "alpha": True,
            "beta": False,
        }
        assert any(m["price_per_million"] is None for m in listed)
        assert any(m["context_window"] for m in listed)
        agent = c.post("/api/agents", json={"name": "M", "defaultModel": "local"}).json()
        for m in listed:
            one = c.get(f"/api/models/{m['example']}")
            assert one.status_code == 200, one.text
            assert {k: v for k, v in one.json().items() if k != "id"} == {
                k: v for k, v in m.items() if k != "id"
            }
            for fake in fakes.values():
                fake.reset()
            thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]
            sent = c.post(
                f"/api/threads/{thread}/messages",
                json={"content": "hello", "modelOverride": m["example"]},
            )
            assert sent.status_code == 200, (m, sent.text)
            assert names(parse(sent.text))[-1] == "done", (m, sent.text)
            [(provider, model, cost, source)] = _usage(pg_url, thread)
            assert (provider, model, source) == (m["family"], m["example"], "platform")
            assert (cost is None) == (m["price_per_million"] is None), m
            if m["family"] == "local":
                assert all(not f.requests for f in fakes.values())
                continue
            [request] = fakes[m["family"]].requests
            assert request.json["model"] == m["sent_as"]
            keyed = "x-api-key" in request.headers or "authorization" in request.headers
            assert keyed == m["key_configured"], m


def test_a_model_no_route_serves_is_404(served: tuple[Service, dict[str, FakeProvider]]) -> None:
    svc, _ = served
    _, key = new_org(svc.url, JWT_SECRET, "mod")
    with client(svc, key) as c:
        r = c.get("/api/models/mistral/large@2025")
        assert r.status_code == 404
        assert r.json()["error"] == "NOT_FOUND"
        assert r.json()["detail"].startswith("no route serves 'mistral/large@2025'; tried: local")
        encoded = c.get("/api/models/mistral%2Flarge%402025")  # the Python client's form
        assert encoded.json() == r.json()
        one = c.get("/api/models/alpha%3Aclaude-opus-4-5%2Bx")
        assert (one.json()["id"], one.json()["sent_as"]) == (
            "alpha:claude-opus-4-5+x",
            "claude-opus-4-5+x",
        )
