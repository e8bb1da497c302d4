"""``/api/models`` through the web app: the harness routes ``local`` (a recording
model), ``beta:NAME`` and ids starting ``fail`` (a failing beta model); no alpha."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness

C = TestClient[Any]


def test_a_member_lists_the_models_the_deployment_routes(
    harness: SharedHarness, org_id: str
) -> None:
    member = bearer(make_jwt(sub="u", org=org_id))
    with harness.client() as c:
        r = c.get("/api/models", headers=member)
    assert r.status_code == 200, r.text
    listed = {m["id"]: m for m in r.json()}
    assert list(listed) == ["local", "beta:*", "fail*"]  # alpha is not configured
    assert listed["local"] == {
        "id": "local",
        "example": "local",
        "family": "local",
        "sent_as": "local",
        "route": "local",
        "key_configured": None,
        "context_window": None,
        "price_per_million": {"input": 0.0, "output": 0.0, "cached_input": 0.0},
        "price_pattern": "local",
        "supports": {
            "tools": True,
            "native_compaction": False,
            "summary_compaction": False,
            "structured_output": False,
            "max_temperature": 2.0,
            "temperature_with_top_p": True,
            "blank_stop": True,
        },
    }
    beta = listed["beta:*"]
    assert (beta["example"], beta["sent_as"], beta["key_configured"]) == (
        "beta:custom",
        "custom",
        False,
    )
    assert beta["supports"]["summary_compaction"] is True
    assert beta["supports"]["structured_output"] is True


def test_one_model_takes_the_rest_of_the_path(harness: SharedHarness, auth: dict[str, str]) -> None:
    with harness.client() as c:
        r = c.get("/api/models/beta:org/gpt-4o@v1+x", headers=auth)
    assert r.status_code == 200, r.text
    m = r.json()
    assert (m["id"], m["family"], m["sent_as"], m["route"]) == (
        "beta:org/gpt-4o@v1+x",
        "beta",
        "org/gpt-4o@v1+x",
        "beta:*",
    )
    assert m["price_per_million"] is None  # no price entry matches org/gpt-4o@v1+x
    with harness.client() as c:  # as the Python client sends it: one encoded segment
        encoded = c.get("/api/models/beta%3Aorg%2Fgpt-4o%40v1%2Bx", headers=auth)
    assert encoded.json() == m


def test_a_model_nobody_routes_is_404_naming_the_routes_tried(
    harness: SharedHarness, auth: dict[str, str]
) -> None:
    with harness.client() as c:
        r = c.get("/api/models/claude-opus-4-5", headers=auth)
    assert r.status_code == 404
    assert r.json() == {
        "error": "NOT_FOUND",
        "detail": "no route serves 'claude-opus-4-5'; tried: local (local),"
        " alpha:* (alpha, not configured), beta:* (beta), fail* (beta)",
    }


def test_models_need_a_signed_in_caller(client: C) -> None:
    assert client.get("/api/models").status_code == 401
    assert client.get("/api/models/local").status_code == 401
