"""Plans through the web app (memory and PostgreSQL): routes, statuses, access."""

from __future__ import annotations

import json
import uuid
from typing import Any

from litestar.testing import TestClient

from tests.sse import parse
from tests.web.conftest import bearer, make_jwt
from tests.web.turns import agent_and_thread

H = dict[str, str]
C = TestClient[Any]


def _plan(c: C, h: H, thread: str, *contents: str) -> dict[str, Any]:
    r = c.post("/api/plans", json={"threadId": thread, "title": "Release"}, headers=h)
    assert r.status_code == 201, r.text
    plan: dict[str, Any] = r.json()
    if contents:
        r = c.post(
            f"/api/plans/{plan['id']}/todos",
            json={"todos": [{"content": x} for x in contents]},
            headers=h,
        )
        assert r.status_code == 201, r.text
        plan = r.json()
    return plan


def test_plan_and_todos_lifecycle(client: C, auth: H, org_id: str) -> None:
    c, h = client, auth
    _, thread = agent_and_thread(c, h, "Planner")
    plan = _plan(c, h, thread)
    assert plan["org_id"] == org_id
    assert plan["thread_id"] == thread
    assert plan["status"] == "draft"
    assert plan["todos"] == []
    r = c.post(
        f"/api/plans/{plan['id']}/todos",
        json={
            "todos": [
                {"content": "Build", "activeForm": "Building"},
                {"content": "Test", "status": "in_progress"},
                {"content": "Ship", "unknownField": 1},
            ]
        },
        headers=h,
    )
    assert r.status_code == 201, r.text
    todos = r.json()["todos"]
    assert [(t["content"], t["position"], t["status"]) for t in todos] == [
        ("Build", 0, "pending"),
        ("Test", 1, "in_progress"),
        ("Ship", 2, "pending"),
    ]
    assert todos[0]["active_form"] == "Building"
    assert set(todos[0]) == {
        "id",
        "content",
        "active_form",
        "status",
        "parent_id",
        "position",
        "blocked_by",
        "blocks",
        "created_at",
        "updated_at",
    }
    build, _, ship = (t["id"] for t in todos)
    r = c.patch(
        f"/api/plans/{plan['id']}/todos/{ship}",
        json={"position": 0, "parentId": build, "content": "Ship it"},
        headers=h,
    )
    assert r.status_code == 200, r.text
    assert [t["content"] for t in r.json()["todos"]] == ["Ship it", "Build", "Test"]
    assert r.json()["todos"][0]["parent_id"] == build
    r = c.patch(f"/api/plans/{plan['id']}", json={"status": "approved"}, headers=h)
    assert (r.status_code, r.json()["status"], r.json()["title"]) == (200, "approved", "Release")
    assert c.get(f"/api/plans/{plan['id']}", headers=h).json() == r.json()
    listed = c.get("/api/plans", params={"threadId": thread}, headers=h)
    assert [p["id"] for p in listed.json()] == [plan["id"]]
    assert c.get("/api/plans", headers=h).status_code == 422  # threadId is required
    assert (
        c.patch(f"/api/plans/{plan['id']}", json={"status": "nope"}, headers=h).status_code == 422
    )
    r = c.delete(f"/api/plans/{plan['id']}/todos/{build}", headers=h)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    left = c.get(f"/api/plans/{plan['id']}", headers=h).json()["todos"]
    assert [(t["content"], t["position"], t["parent_id"]) for t in left] == [
        ("Ship it", 0, None),
        ("Test", 1, None),
    ]
    assert c.delete(f"/api/plans/{plan['id']}/todos/{build}", headers=h).status_code == 404
    assert c.delete(f"/api/plans/{plan['id']}", headers=h).json() == {"ok": True}
    assert c.get(f"/api/plans/{plan['id']}", headers=h).status_code == 404


def test_dependencies_cycles_and_ready(client: C, auth: H) -> None:
    c, h = client, auth
    _, thread = agent_and_thread(c, h, "Planner")
    plan = _plan(c, h, thread, "a", "b", "c")
    a, b, cc = (t["id"] for t in plan["todos"])
    deps = f"/api/plans/{plan['id']}/todos"
    r = c.post(f"{deps}/{b}/deps", json={"dependsOn": a}, headers=h)
    assert (r.status_code, r.json()) == (201, {"todo_id": b, "depends_on_id": a})
    r = c.post(f"{deps}/{b}/deps", json={"dependsOn": a}, headers=h)
    assert (r.status_code, r.json()) == (200, {"todo_id": b, "depends_on_id": a})
    assert c.post(f"{deps}/{cc}/deps", json={"dependsOn": b}, headers=h).status_code == 201
    r = c.post(f"{deps}/{a}/deps", json={"dependsOn": cc}, headers=h)
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "DEPENDENCY_CYCLE"
    assert f"{a} -> {cc} -> {b} -> {a}" in r.json()["detail"]
    for bad in (a, str(uuid.uuid4())):
        r = c.post(f"{deps}/{a}/deps", json={"dependsOn": bad}, headers=h)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert r.json()["detail"].startswith("dependsOn:")
    other = _plan(c, h, thread, "elsewhere")
    r = c.post(f"{deps}/{a}/deps", json={"dependsOn": other["todos"][0]["id"]}, headers=h)
    assert r.status_code == 422
    r = c.post(f"{deps}/{uuid.uuid4()}/deps", json={"dependsOn": a}, headers=h)
    assert r.status_code == 404
    assert c.get(f"{deps}/{b}/deps", headers=h).json() == [
        {"todo_id": b, "depends_on_id": a},
        {"todo_id": cc, "depends_on_id": b},
    ]
    ready = c.get(f"/api/plans/{plan['id']}/ready", headers=h).json()
    assert [t["id"] for t in ready["ready"]] == [a]
    assert "blocked" not in ready
    both = c.get(f"/api/plans/{plan['id']}/ready", params={"include": "blocked"}, headers=h)
    assert both.json()["blocked"] == [
        {"todo_id": b, "waiting_on": [a]},
        {"todo_id": cc, "waiting_on": [b]},
    ]
    c.patch(f"{deps}/{a}", json={"status": "skipped"}, headers=h)
    assert [
        t["id"] for t in c.get(f"/api/plans/{plan['id']}/ready", headers=h).json()["ready"]
    ] == [b]
    r = c.delete(f"{deps}/{cc}/deps", params={"dependsOn": b}, headers=h)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert c.delete(f"{deps}/{cc}/deps", params={"dependsOn": b}, headers=h).status_code == 404
    assert c.delete(f"{deps}/{cc}/deps", headers=h).status_code == 422
    ready = c.get(f"/api/plans/{plan['id']}/ready", headers=h).json()["ready"]
    assert [t["id"] for t in ready] == [b, cc]


def test_other_organizations_and_other_users_get_404(client: C, auth: H, org_id: str) -> None:
    c = client
    agent, _ = agent_and_thread(c, auth, "Planner")
    alice = bearer(make_jwt(sub="alice", org=org_id))
    mine = c.post("/api/threads", json={"agentId": agent}, headers=alice).json()["id"]
    plan = _plan(c, alice, mine, "a", "b")  # a member writes plans of its own thread
    a, b = (t["id"] for t in plan["todos"])
    assert (
        c.post(
            f"/api/plans/{plan['id']}/todos/{b}/deps", json={"dependsOn": a}, headers=alice
        ).status_code
        == 201
    )
    base = f"/api/plans/{plan['id']}"
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", base, {}),
        ("PATCH", base, {"json": {"title": "x"}}),
        ("DELETE", base, {}),
        ("POST", f"{base}/todos", {"json": {"todos": [{"content": "x"}]}}),
        ("PATCH", f"{base}/todos/{a}", {"json": {"status": "done"}}),
        ("DELETE", f"{base}/todos/{a}", {}),
        ("GET", f"{base}/todos/{b}/deps", {}),
        ("POST", f"{base}/todos/{a}/deps", {"json": {"dependsOn": b}}),
        ("DELETE", f"{base}/todos/{b}/deps", {"params": {"dependsOn": a}}),
        ("GET", f"{base}/ready", {}),
        ("GET", "/api/plans", {"params": {"threadId": mine}}),
        ("POST", "/api/plans", {"json": {"threadId": mine, "title": "x"}}),
    ]
    stranger = bearer(make_jwt(sub="eve", org="another-org", role="admin"))
    bob = bearer(make_jwt(sub="bob", org=org_id))
    for who in (stranger, bob):
        for method, path, kw in calls:
            r = c.request(method, path, headers=who, **kw)
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND"), (method, path, r.text)
    # untouched, and the organization's key sees it
    assert c.get(base, headers=auth).json() == c.get(base, headers=alice).json()
    assert c.get(base, headers=auth).json()["todos"][1]["blocked_by"] == [a]


def test_agent_plan_configuration(client: C, auth: H, org_id: str) -> None:
    c = client
    agent, _ = agent_and_thread(c, auth, "Planner")
    path = f"/api/agents/{agent}/plan"
    assert c.get(path, headers=auth).json() == {
        "agent_id": agent,
        "org_id": org_id,
        "enabled": False,
        "require_approval": False,
    }
    r = c.put(path, json={"enabled": True}, headers=auth)
    assert (r.status_code, r.json()["enabled"], r.json()["require_approval"]) == (200, True, False)
    r = c.put(path, json={"requireApproval": True}, headers=auth)
    assert (r.json()["enabled"], r.json()["require_approval"]) == (True, True)
    assert c.get(path, headers=auth).json() == r.json()
    assert c.put(path, json={"enabled": "yes"}, headers=auth).status_code == 422
    member = bearer(make_jwt(sub="m", org=org_id))
    assert c.get(path, headers=member).status_code == 200
    assert c.put(path, json={"enabled": False}, headers=member).status_code == 403
    stranger = bearer(make_jwt(sub="s", org="another-org", role="admin"))
    assert c.get(path, headers=stranger).status_code == 404
    assert c.put(path, json={"enabled": False}, headers=stranger).status_code == 404
    assert c.get(f"/api/agents/{uuid.uuid4()}/plan", headers=auth).status_code == 404


def test_the_model_uses_plan_tools_and_the_tool_result_is_the_plan(client: C, auth: H) -> None:
    c, h = client, auth
    agent, thread = agent_and_thread(c, h, "Planner")

    def say(text: str) -> list[Any]:
        r = c.post(f"/api/threads/{thread}/messages", json={"content": text}, headers=h)
        assert r.status_code == 200, r.text
        return parse(r.text)

    off = say('call plan_create {"title": "Trip"}')
    assert "tool_call" not in [e.event for e in off]  # not offered while disabled
    c.put(f"/api/agents/{agent}/plan", json={"enabled": True}, headers=h)
    events = say('call plan_create {"title": "Trip", "todos": [{"content": "Book"}]}')
    result = next(e for e in events if e.event == "tool_result").data
    assert result["tool_name"] == "plan_create"
    plan = json.loads(result["result"])
    assert c.get(f"/api/plans/{plan['id']}", headers=h).json() == plan
    assert plan["thread_id"] == thread
    assert [t["content"] for t in plan["todos"]] == ["Book"]
