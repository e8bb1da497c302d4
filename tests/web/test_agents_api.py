"""The agents endpoints (docs/api.md, "Agents" and "Errors"), through the real Litestar app."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt, memory_only

Client = TestClient[Any]

SPEC_FIELDS = {
    "id",
    "org_id",
    "name",
    "description",
    "default_model",
    "created_at",
    "published_chats",
}


def create(client: Client, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    r = client.post("/api/agents", json={"name": "Helper", **body}, headers=auth)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def assert_error(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code
    assert set(body) <= {"error", "detail"}
    return body  # type: ignore[no-any-return]


def test_create_returns_201_with_snake_case_agent(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    a = create(
        client,
        auth,
        description="Answers questions",
        stablePreamble="You are terse.",
        defaultModel="claude-sonnet-4-5",
    )
    assert set(a) >= SPEC_FIELDS
    assert a["org_id"] == org_id
    assert a["name"] == "Helper"
    assert a["description"] == "Answers questions"
    assert a["default_model"] == "claude-sonnet-4-5"
    assert a["stable_preamble"] == "You are terse."
    assert a["published_chats"] == []
    assert a["created_at"].endswith("Z")


def test_default_model_applies_when_omitted(client: Client, auth: dict[str, str]) -> None:
    assert create(client, auth)["default_model"] == "local"


def test_list_get_and_delete(client: Client, auth: dict[str, str]) -> None:
    first = create(client, auth, name="one")
    second = create(client, auth, name="two")
    listed = client.get("/api/agents", headers=auth).json()
    assert [a["id"] for a in listed] == [first["id"], second["id"]]
    assert client.get(f"/api/agents/{first['id']}", headers=auth).json() == first

    r = client.delete(f"/api/agents/{first['id']}", headers=auth)
    assert r.status_code == 200
    assert r.json() == {"ok": True}
    assert_error(client.get(f"/api/agents/{first['id']}", headers=auth), 404, "NOT_FOUND")
    assert_error(client.delete(f"/api/agents/{first['id']}", headers=auth), 404, "NOT_FOUND")
    assert [a["id"] for a in client.get("/api/agents", headers=auth).json()] == [second["id"]]


def test_patch_changes_only_supplied_fields(client: Client, auth: dict[str, str]) -> None:
    a = create(client, auth, description="d", stablePreamble="p", defaultModel="gpt-4o")
    r = client.patch(f"/api/agents/{a['id']}", json={"description": "new"}, headers=auth)
    assert r.status_code == 200
    b = r.json()
    assert b["description"] == "new"
    for field in ("name", "stable_preamble", "default_model", "created_at", "org_id"):
        assert b[field] == a[field]
    assert b["updated_at"] >= a["updated_at"]


def test_patch_tool_profiles_default_profile_and_runtime(
    client: Client, auth: dict[str, str]
) -> None:
    a = create(client, auth)
    profiles = {
        "support": {"tools": ["kb__search", "lookup_order"], "description": "Customer support"},
        "admin": {"tools": []},
    }
    r = client.patch(
        f"/api/agents/{a['id']}",
        json={"toolProfiles": profiles, "defaultProfile": "support", "runtimeProvider": "native"},
        headers=auth,
    )
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["tool_profiles"] == {
        "support": {"tools": ["kb__search", "lookup_order"], "description": "Customer support"},
        "admin": {"tools": [], "description": ""},
    }
    assert b["default_profile"] == "support"
    assert b["runtime_provider"] == "native"

    # null clears; clearing the profiles while a default names one of them is refused
    r = client.patch(f"/api/agents/{a['id']}", json={"toolProfiles": None}, headers=auth)
    assert_error(r, 422, "VALIDATION_ERROR")
    r = client.patch(
        f"/api/agents/{a['id']}",
        json={"toolProfiles": None, "defaultProfile": None, "runtimeProvider": None},
        headers=auth,
    )
    assert r.status_code == 200
    c = r.json()
    assert (c["tool_profiles"], c["default_profile"], c["runtime_provider"]) == (None, None, None)


def test_empty_patch_is_a_no_op(client: Client, auth: dict[str, str]) -> None:
    a = create(client, auth)
    r = client.patch(f"/api/agents/{a['id']}", json={}, headers=auth)
    assert r.status_code == 200
    assert r.json() == a


def test_unknown_fields_are_ignored(client: Client, auth: dict[str, str]) -> None:
    a = create(client, auth, colour="blue")
    assert "colour" not in a


def test_unicode_and_long_text_round_trip(client: Client, auth: dict[str, str]) -> None:
    name = "Ag\u00e9nt \U0001f916 \u4f60\u597d \u202e"
    description = "\u00df\u00e7" * 4000 + "\n\t\r"
    a = create(client, auth, name=name, description=description)
    got = client.get(f"/api/agents/{a['id']}", headers=auth).json()
    assert (got["name"], got["description"]) == (name, description)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": 5}, "name"),
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "a\u0000b"}, "name"),
        ({"name": "x" * 257}, "name"),
        ({"name": "n", "description": ["x"]}, "description"),
        ({"name": "n", "stablePreamble": 1.5}, "stablePreamble"),
        ({"name": "n", "defaultModel": "no spaces allowed"}, "defaultModel"),
        ({"name": "n", "defaultModel": 3}, "defaultModel"),
        ({"name": "n", "runtimeProvider": "something-else"}, "runtimeProvider"),
        ({"name": "n", "toolProfiles": {"p": {"tools": "notalist"}}}, "toolProfiles"),
        ({"name": "n", "defaultProfile": "missing"}, "defaultProfile"),
    ],
)
def test_invalid_fields_are_422_naming_the_field(
    client: Client, auth: dict[str, str], body: dict[str, Any], field: str
) -> None:
    err = assert_error(client.post("/api/agents", json=body, headers=auth), 422, "VALIDATION_ERROR")
    assert field in err["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": None}, "name"),
        ({"description": 3}, "description"),
        ({"defaultModel": None}, "defaultModel"),
    ],
)
def test_invalid_patch_is_422_and_changes_nothing(
    client: Client, auth: dict[str, str], body: dict[str, Any], field: str
) -> None:
    a = create(client, auth)
    err = assert_error(
        client.patch(f"/api/agents/{a['id']}", json=body, headers=auth), 422, "VALIDATION_ERROR"
    )
    assert field in err["detail"]
    assert client.get(f"/api/agents/{a['id']}", headers=auth).json() == a


@memory_only
@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2]", b'"text"', b"42", b"null"])
def test_body_that_is_not_a_json_object_is_400(
    client: Client, auth: dict[str, str], raw: bytes
) -> None:
    r = client.post(
        "/api/agents", content=raw, headers={**auth, "Content-Type": "application/json"}
    )
    assert_error(r, 400, "BAD_REQUEST")


@memory_only
def test_body_over_the_limit_is_413(client: Client, auth: dict[str, str]) -> None:
    r = client.post("/api/agents", json={"name": "n", "description": "x" * 70_000}, headers=auth)
    assert_error(r, 413, "PAYLOAD_TOO_LARGE")


@memory_only
def test_unknown_route_is_404_and_wrong_method_405(client: Client, auth: dict[str, str]) -> None:
    assert_error(client.get("/api/nothing-here", headers=auth), 404, "NOT_FOUND")
    assert_error(client.put("/api/agents", json={}, headers=auth), 405, "METHOD_NOT_ALLOWED")
    assert_error(client.get("/api/agents/not-a-uuid", headers=auth), 404, "NOT_FOUND")


def test_another_orgs_agent_is_404(client: Client, auth: dict[str, str]) -> None:
    mine = create(client, auth)
    same_org_key = client.post("/api/keys", json={"name": "x"}, headers=auth).json()["key"]
    other_org = f"other-{uuid.uuid4().hex[:8]}"
    foreign = bearer(make_jwt(org=other_org, role="admin"))
    for method in ("get", "delete"):
        r = getattr(client, method)(f"/api/agents/{mine['id']}", headers=foreign)
        assert_error(r, 404, "NOT_FOUND")
    r = client.patch(f"/api/agents/{mine['id']}", json={"name": "x"}, headers=foreign)
    assert_error(r, 404, "NOT_FOUND")
    assert client.get("/api/agents", headers=foreign).json() == []
    # another organization's member is refused the change before any lookup: the
    # same 403 for this agent as for an id that exists nowhere, so nothing is disclosed
    member = bearer(make_jwt(org=other_org))
    for agent_id in (mine["id"], str(uuid.uuid4())):
        r = client.patch(f"/api/agents/{agent_id}", json={"name": "x"}, headers=member)
        assert_error(r, 403, "FORBIDDEN")
    assert_error(client.get(f"/api/agents/{mine['id']}", headers=member), 404, "NOT_FOUND")
    assert client.get("/api/agents", headers=bearer(same_org_key)).json() == [mine]


def test_delete_agent_answers_ok_body(client: Client, auth: dict[str, str]) -> None:
    a = create(client, auth)
    r = client.delete(f"/api/agents/{a['id']}", headers=auth)
    assert (r.status_code, r.json()) == (200, {"ok": True})


@memory_only
def test_deeply_nested_body_is_400_not_500(client: Client, auth: dict[str, str]) -> None:
    body = b'{"name": "n", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    r = client.post(
        "/api/agents", content=body, headers={**auth, "Content-Type": "application/json"}
    )
    assert_error(r, 400, "BAD_REQUEST")


def test_the_approval_timeout_defaults_to_an_hour_and_is_bounded(
    client: Client, auth: dict[str, str]
) -> None:
    """docs/tools.md, "Approval before a call": ``approvalTimeoutMinutes`` in, snake_case out."""
    a = create(client, auth)
    assert a["approval_timeout_minutes"] == 60
    path = f"/api/agents/{a['id']}"
    r = client.patch(path, json={"approvalTimeoutMinutes": 10_080}, headers=auth)
    assert (r.status_code, r.json()["approval_timeout_minutes"]) == (200, 10_080)
    r = client.patch(path, json={"approvalTimeoutMinutes": 1}, headers=auth)
    assert r.json()["approval_timeout_minutes"] == 1
    for bad in (0, 10_081, "60"):
        r = client.patch(path, json={"approvalTimeoutMinutes": bad}, headers=auth)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert "approvalTimeoutMinutes" in r.json()["detail"]
    assert client.get(path, headers=auth).json()["approval_timeout_minutes"] == 1
    made = create(client, auth, approvalTimeoutMinutes=5)
    assert made["approval_timeout_minutes"] == 5
