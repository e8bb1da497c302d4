"""Projects (docs/projects.md) through the real Litestar app, on memory and
PostgreSQL: a project groups agents and runners that name it with ``projectId``;
its members are listed; deleting it detaches them and deletes nothing else."""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt

Client = TestClient[Any]


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _project(c: Client, auth: dict[str, str], name: str, **body: Any) -> dict[str, Any]:
    return _ok(c.post("/api/projects", json={"name": name, **body}, headers=auth), 201)  # type: ignore[no-any-return]


def _runner(c: Client, auth: dict[str, str], name: str, **body: Any) -> dict[str, Any]:
    return _ok(c.post("/api/runners", json={"name": name, **body}, headers=auth), 201)  # type: ignore[no-any-return]


def test_a_project_is_created_read_listed_and_changed(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    made = _project(client, auth, "Support", description="Everything that answers customers")
    assert set(made) == {"id", "org_id", "name", "description", "created_at", "updated_at"}
    assert (made["org_id"], made["name"]) == (org_id, "Support")
    assert made["description"] == "Everything that answers customers"
    assert made["created_at"] == made["updated_at"]
    second = _project(client, auth, "Research")
    assert second["description"] == ""
    assert _ok(client.get(f"/api/projects/{made['id']}", headers=auth)) == made
    listed = _ok(client.get("/api/projects", headers=auth))
    assert [p["name"] for p in listed] == ["Support", "Research"]  # oldest first
    changed = _ok(
        client.patch(f"/api/projects/{made['id']}", json={"name": "Customer care"}, headers=auth)
    )
    assert (changed["name"], changed["description"]) == ("Customer care", made["description"])
    assert changed["updated_at"] >= made["updated_at"]
    assert _ok(client.get(f"/api/projects/{made['id']}", headers=auth)) == changed
    # an empty PATCH changes nothing
    assert _ok(client.patch(f"/api/projects/{made['id']}", json={}, headers=auth)) == changed


def test_agents_and_runners_join_a_project_and_are_its_members(
    client: Client, auth: dict[str, str]
) -> None:
    project = _project(client, auth, "Sales")
    pid = project["id"]
    joined = _ok(
        client.post("/api/agents", json={"name": "Closer", "projectId": pid}, headers=auth), 201
    )
    assert joined["project_id"] == pid
    loner = _ok(client.post("/api/agents", json={"name": "Loner"}, headers=auth), 201)
    assert loner["project_id"] is None
    later = _ok(client.post("/api/agents", json={"name": "Later"}, headers=auth), 201)
    moved = _ok(client.patch(f"/api/agents/{later['id']}", json={"projectId": pid}, headers=auth))
    assert moved["project_id"] == pid
    runner = _runner(client, auth, "Nightly report", projectId=pid)
    assert runner["project_id"] == pid
    other = _runner(client, auth, "Other")
    assert other["project_id"] is None

    in_project = _ok(client.get(f"/api/agents?projectId={pid}", headers=auth))
    assert [a["name"] for a in in_project] == ["Closer", "Later"]
    everyone = _ok(client.get("/api/agents", headers=auth))
    assert {a["name"] for a in everyone} >= {"Closer", "Loner", "Later"}
    runners = _ok(client.get(f"/api/runners?projectId={pid}", headers=auth))
    assert [r["name"] for r in runners] == ["Nightly report"]

    members = _ok(client.get(f"/api/projects/{pid}/members", headers=auth))
    assert [a["id"] for a in members["agents"]] == [joined["id"], later["id"]]
    assert [r["id"] for r in members["runners"]] == [runner["id"]]
    assert members["agents"][0]["name"] == "Closer"  # the whole agent, as GET answers it

    # leaving the project: projectId null
    left = _ok(client.patch(f"/api/agents/{later['id']}", json={"projectId": None}, headers=auth))
    assert left["project_id"] is None
    unlinked = _ok(
        client.patch(f"/api/runners/{runner['id']}", json={"projectId": None}, headers=auth)
    )
    assert unlinked["project_id"] is None
    members = _ok(client.get(f"/api/projects/{pid}/members", headers=auth))
    assert ([a["id"] for a in members["agents"]], members["runners"]) == ([joined["id"]], [])
    # a PATCH that does not name the project leaves it as it is
    renamed = _ok(client.patch(f"/api/agents/{joined['id']}", json={"name": "C"}, headers=auth))
    assert renamed["project_id"] == pid


def test_deleting_a_project_detaches_its_members_and_deletes_nothing_else(
    client: Client, auth: dict[str, str]
) -> None:
    pid = _project(client, auth, "Going away")["id"]
    keep = _project(client, auth, "Staying")["id"]
    agents = [
        _ok(client.post("/api/agents", json={"name": n, "projectId": pid}, headers=auth), 201)
        for n in ("a1", "a2")
    ]
    staying = _ok(
        client.post("/api/agents", json={"name": "s", "projectId": keep}, headers=auth), 201
    )
    runner = _runner(client, auth, "r1", projectId=pid)
    gone = _ok(client.delete(f"/api/projects/{pid}", headers=auth))
    assert gone == {"ok": True, "detached": {"agents": 2, "runners": 1}}
    for a in agents:
        got = _ok(client.get(f"/api/agents/{a['id']}", headers=auth))
        assert (got["name"], got["project_id"]) == (a["name"], None)
    assert _ok(client.get(f"/api/runners/{runner['id']}", headers=auth))["project_id"] is None
    assert _ok(client.get(f"/api/agents/{staying['id']}", headers=auth))["project_id"] == keep
    assert client.get(f"/api/projects/{pid}", headers=auth).status_code == 404
    assert client.get(f"/api/projects/{pid}/members", headers=auth).status_code == 404
    assert client.delete(f"/api/projects/{pid}", headers=auth).status_code == 404
    assert [p["id"] for p in _ok(client.get("/api/projects", headers=auth))] == [keep]
    empty = _ok(client.delete(f"/api/projects/{keep}", headers=auth))
    assert empty == {"ok": True, "detached": {"agents": 1, "runners": 0}}


def test_a_project_that_is_not_the_organizations_is_not_found_anywhere(
    client: Client, auth: dict[str, str]
) -> None:
    nowhere = str(uuid.uuid4())
    for r in (
        client.post("/api/agents", json={"name": "x", "projectId": nowhere}, headers=auth),
        client.post("/api/runners", json={"name": "x", "projectId": nowhere}, headers=auth),
        client.get(f"/api/projects/{nowhere}", headers=auth),
        client.patch(f"/api/projects/{nowhere}", json={"name": "n"}, headers=auth),
        client.get(f"/api/projects/{nowhere}/members", headers=auth),
    ):
        assert r.status_code == 404, r.text
        assert r.json() == {"error": "NOT_FOUND", "detail": "project not found"}
    agent = _ok(client.post("/api/agents", json={"name": "x"}, headers=auth), 201)
    r = client.patch(f"/api/agents/{agent['id']}", json={"projectId": nowhere}, headers=auth)
    assert r.status_code == 404, r.text
    assert _ok(client.get(f"/api/agents/{agent['id']}", headers=auth))["project_id"] is None
    # nothing was made by the refused creates
    assert [a["name"] for a in _ok(client.get("/api/agents", headers=auth))] == ["x"]
    assert _ok(client.get("/api/runners", headers=auth)) == []


def test_bad_input_is_422_naming_the_field(client: Client, auth: dict[str, str]) -> None:
    for body, field in (
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "n" * 257}, "name"),
        ({"name": "ok", "description": "d" * 10_001}, "description"),
        ({"name": 7}, "name"),
    ):
        r = client.post("/api/projects", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
        assert field in r.json()["detail"], r.text
    pid = _project(client, auth, "p")["id"]
    r = client.patch(f"/api/projects/{pid}", json={"name": "  "}, headers=auth)
    assert r.status_code == 422, r.text
    assert "name" in r.json()["detail"]
    r = client.get("/api/agents?projectId=not-a-uuid", headers=auth)
    assert r.status_code in (400, 422), r.text


def test_members_read_projects_and_only_admins_change_them(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    pid = _project(client, auth, "Shared")["id"]
    member = bearer(make_jwt("mia", org=org_id))
    assert [p["id"] for p in _ok(client.get("/api/projects", headers=member))] == [pid]
    assert _ok(client.get(f"/api/projects/{pid}/members", headers=member)) == {
        "agents": [],
        "runners": [],
    }
    for r in (
        client.post("/api/projects", json={"name": "mine"}, headers=member),
        client.patch(f"/api/projects/{pid}", json={"name": "mine"}, headers=member),
        client.delete(f"/api/projects/{pid}", headers=member),
    ):
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "FORBIDDEN"
    assert _ok(client.get(f"/api/projects/{pid}", headers=auth))["name"] == "Shared"
