"""Code agents and code sessions (docs/code-agents.md) through the real Litestar
app, on memory and PostgreSQL: code agents' CRUD (the git credential write-only),
another organization's ids are 404; a session starts pending, pages newest
first, changes its title, takes a follow-up, cancels (idempotently), refuses a
follow-up once ended (409), archives; its timeline pages forward and, over SSE,
resumes from Last-Event-ID and ends with the session. (The job that runs a
session is tested in tests/unit/test_code_sessions.py and end to end: this app
has no worker.)"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt

Client = TestClient[Any]
REPO = "https://git.example/acme/app.git"
TOKEN = "ghp-web-secret-token"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _agent(c: Client, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    body = {"name": "fixer", "model": "local", "repoUrl": REPO, "gitCredential": TOKEN, **body}
    made: dict[str, Any] = _ok(c.post("/api/code-agents", json=body, headers=auth), 201)
    return made


def _session(c: Client, auth: dict[str, str], agent: str, **body: Any) -> dict[str, Any]:
    body = {"codeAgentId": agent, "prompt": "Fix the add function", **body}
    made: dict[str, Any] = _ok(c.post("/api/code-sessions", json=body, headers=auth), 201)
    return made


def test_code_agents_crud(client: Client, auth: dict[str, str]) -> None:
    made = _agent(client, auth, branchPrefix="bot/", computer={"memoryMb": 512})
    assert made == {
        "id": made["id"],
        "name": "fixer",
        "model": "local",
        "repo_url": REPO,
        "starting_ref": None,
        "preamble": "",
        "branch_prefix": "bot/",
        "auto_create_pr": True,
        "has_git_credential": True,
        "computer": {
            "provider": None,
            "memory_mb": 512,
            "exec_timeout_s": 120,
            "network": "none",
            "allowed_hosts": [],
        },
        "created_at": made["created_at"],
        "updated_at": made["updated_at"],
    }
    path = f"/api/code-agents/{made['id']}"
    assert _ok(client.get(path, headers=auth)) == made
    assert made in _ok(client.get("/api/code-agents", headers=auth))
    changed = _ok(client.patch(path, json={"name": "n2", "gitCredential": None}, headers=auth))
    assert changed["name"] == "n2"
    assert changed["has_git_credential"] is False
    assert changed["model"] == "local"
    stranger = bearer(make_jwt(org=f"other-{uuid.uuid4().hex[:8]}"))
    assert client.get(path, headers=stranger).status_code == 404
    assert _ok(client.delete(path, headers=auth)) == {"ok": True}
    assert client.get(path, headers=auth).status_code == 404
    assert client.delete(path, headers=auth).status_code == 404


def test_code_agents_refuse_bad_input(client: Client, auth: dict[str, str]) -> None:
    for body in (
        {"name": "x", "model": "nobody-serves-this"},
        {"name": "x", "model": "local", "repoUrl": "https://u:p@git.example/a.git"},
        {"name": "x", "model": "local", "computer": {"memoryMb": 1}},
        {"name": "x", "model": "local", "computer": {"provider": "nowhere"}},
        {"model": "local"},
    ):
        r = client.post("/api/code-agents", json=body, headers=auth)
        assert r.status_code in (400, 422), (body, r.text)
        assert r.json()["error"]


def test_a_session_starts_pages_and_changes(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)["id"]
    first = _session(client, auth, agent)
    second = _session(client, auth, agent, prompt="Second task\nwith details", ref="dev")
    assert second == {
        "id": second["id"],
        "code_agent_id": agent,
        "status": "pending",
        "title": "Second task",
        "repo_url": REPO,
        "ref": "dev",
        "branch": None,
        "pr_url": None,
        "usage": {"tokens": 0, "cost_usd": 0.0},
        "error": None,
        "last_event_seq": 2,
        "archived": False,
        "created_at": second["created_at"],
        "updated_at": second["updated_at"],
    }
    page = _ok(client.get("/api/code-sessions?limit=1", headers=auth))
    assert [s["id"] for s in page["sessions"]] == [second["id"]]
    rest = _ok(client.get(f"/api/code-sessions?cursor={page['nextCursor']}", headers=auth))
    assert [s["id"] for s in rest["sessions"]][:1] == [first["id"]]
    mine = _ok(client.get(f"/api/code-sessions?codeAgentId={agent}", headers=auth))
    assert {s["id"] for s in mine["sessions"]} == {first["id"], second["id"]}
    path = f"/api/code-sessions/{first['id']}"
    assert _ok(client.patch(path, json={"title": "Renamed"}, headers=auth))["title"] == "Renamed"
    assert _ok(client.get(path, headers=auth))["title"] == "Renamed"
    stranger = bearer(make_jwt(org=f"other-{uuid.uuid4().hex[:8]}"))
    assert client.get(path, headers=stranger).status_code == 404
    missing = {"codeAgentId": str(uuid.uuid4()), "prompt": "x"}
    assert client.post("/api/code-sessions", json=missing, headers=auth).status_code == 404
    blank = {"codeAgentId": agent, "prompt": " "}
    assert client.post("/api/code-sessions", json=blank, headers=auth).status_code == 422


def test_follow_up_cancel_archive_and_the_timeline(client: Client, auth: dict[str, str]) -> None:
    agent = _agent(client, auth)["id"]
    session = _session(client, auth, agent)
    path = f"/api/code-sessions/{session['id']}"
    queued = _ok(client.post(f"{path}/messages", json={"content": "also docs"}, headers=auth))
    assert queued["status"] == "pending"
    cancelled = _ok(client.post(f"{path}/cancel", headers=auth))
    assert cancelled["status"] == "cancelled"
    assert _ok(client.post(f"{path}/cancel", headers=auth)) == cancelled  # idempotent
    refused = client.post(f"{path}/messages", json={"content": "more"}, headers=auth)
    assert refused.status_code == 409
    assert refused.json()["error"] == "SESSION_ENDED"
    archived = _ok(client.post(f"{path}/archive", headers=auth))
    assert archived["archived"] is True
    timeline = _ok(client.get(f"{path}/events", headers=auth))
    types = [e["type"] for e in timeline["events"]]
    assert types == ["status", "message", "message", "status", "notice"]
    assert [e["seq"] for e in timeline["events"]] == [1, 2, 3, 4, 5]
    assert timeline["events"][2]["data"] == {"role": "user", "content": "also docs"}
    assert timeline["events"][3]["data"] == {"status": "cancelled"}
    assert timeline["next_after"] is None
    page = _ok(client.get(f"{path}/events?after=1&limit=2", headers=auth))
    assert [e["seq"] for e in page["events"]] == [2, 3]
    assert page["next_after"] == 3
    # over SSE: from Last-Event-ID on, and the stream ends with the ended session
    sse = {**auth, "Accept": "text/event-stream", "Last-Event-ID": "3"}
    with client.stream("GET", f"{path}/events", headers=sse) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    frames = [f for f in body.split("\n\n") if f.startswith("id:")]
    assert [f.splitlines()[0] for f in frames] == ["id: 4", "id: 5"]
    assert frames[0].splitlines()[1] == "event: status"
    assert '"status":"cancelled"' in frames[0]
    assert client.get(f"/api/code-sessions/{uuid.uuid4()}/events", headers=sse).status_code == 404
    assert TOKEN not in str(timeline)


def test_archive_of_a_running_session_is_409_and_roles(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _agent(client, auth)["id"]
    session = _session(client, auth, agent)
    member = bearer(make_jwt(org="default", role="member"))
    del member  # the role matrix (tests/e2e/test_access_matrix.py) checks every route
    r = client.post(f"/api/code-sessions/{session['id']}/archive", headers=auth)
    assert r.status_code == 200  # pending: no job works on it yet, so it is cancelled first
    assert r.json()["status"] == "cancelled"


def test_the_timeline_is_followed_live(client: Client, auth: dict[str, str]) -> None:
    """An SSE follower opened on a live session gets the events written after it
    opened (a follow-up, then the cancel), and its stream ends with the session."""
    agent = _agent(client, auth)["id"]
    session = _session(client, auth, agent)
    path = f"/api/code-sessions/{session['id']}"
    got: list[str] = []

    def follow() -> None:
        sse = {**auth, "Accept": "text/event-stream", "Last-Event-ID": "2"}
        with client.stream("GET", f"{path}/events", headers=sse) as r:
            got.append("".join(r.iter_text()))

    reader = threading.Thread(target=follow)
    reader.start()
    time.sleep(0.5)
    assert reader.is_alive()  # following: the session has not ended
    _ok(client.post(f"{path}/messages", json={"content": "later"}, headers=auth))
    _ok(client.post(f"{path}/cancel", headers=auth))
    reader.join(timeout=15)
    assert not reader.is_alive()
    frames = [f for f in got[0].split("\n\n") if f.startswith("id:")]
    assert [f.splitlines()[:2] for f in frames] == [
        ["id: 3", "event: message"],
        ["id: 4", "event: status"],
    ]
