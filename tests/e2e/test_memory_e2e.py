"""Memories end to end: the real service on PostgreSQL; the built-in ``local``
model saves a fact with a key, then a changed fact of that key supersedes it, and
its search finds the new fact only; HTTP lists, recalls and deletes."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import E2E_KEY
from tests.e2e.service import Service
from tests.e2e.turns import said

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def test_the_model_remembers_a_changed_fact_and_http_recalls_and_deletes(
    service: Service,
) -> None:
    h = {"Authorization": f"Bearer {E2E_KEY}"}
    with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
        agent = c.post("/api/agents", json={"name": "Rememberer"}).json()["id"]
        r = c.put(f"/api/agents/{agent}/memory", json={"enabled": True})
        assert (r.status_code, r.json()["enabled"]) == (200, True)
        thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]

        first = said(
            c, thread, 'call memory_save {"content": "The user drinks green tea", "key": "tea"}'
        )
        assert (first["saved"], first["scope"], first["key"]) == (True, "agent", "tea")
        same = said(c, thread, 'call memory_save {"content": "the user drinks GREEN tea"}')
        assert (same["saved"], same["id"]) == (False, first["id"])
        second = said(
            c,
            thread,
            'call memory_save {"content": "The user switched to black tea", "key": "tea"}',
        )
        assert second["superseded"] == first["id"]
        found = said(c, thread, 'call memory_search {"query": "what tea"}')
        assert [(m["id"], m["content"]) for m in found["memories"]] == [
            (second["id"], "The user switched to black tea")
        ]

        listed = c.get(f"/api/agents/{agent}/memories").json()
        assert [(m["id"], m["status"]) for m in listed["memories"]] == [
            (second["id"], "active"),
            (first["id"], "superseded"),
        ]
        assert listed["memories"][1]["superseded_by"] == second["id"]

        r = c.post(f"/api/agents/{agent}/memory", json={"query": "black tea", "topK": 3})
        assert r.status_code == 200, r.text
        recalled = r.json()["memories"]
        assert [m["id"] for m in recalled] == [second["id"]]
        assert recalled[0]["score"] > 0

        r = c.delete(f"/api/agents/{agent}/memories/{second['id']}")
        assert (r.status_code, r.json()) == (200, {"ok": True})
        r = c.post(f"/api/agents/{agent}/memory", json={"query": "tea"})
        assert r.json() == {"memories": []}
        active = c.get(f"/api/agents/{agent}/memories", params={"status": "active"}).json()
        assert active == {"memories": [], "nextCursor": None}
