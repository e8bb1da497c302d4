"""Plans end to end: the real service on PostgreSQL; the built-in ``local`` model
creates a plan and adds todos with the plan tools, then HTTP adds dependency
edges, ``ready`` follows them and an edge closing a cycle is a 409."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import E2E_KEY
from tests.e2e.service import Service
from tests.e2e.turns import said

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def test_the_model_plans_and_http_orders_the_work(service: Service) -> None:
    h = {"Authorization": f"Bearer {E2E_KEY}"}
    with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
        agent = c.post("/api/agents", json={"name": "Planner"}).json()
        r = c.put(f"/api/agents/{agent['id']}/plan", json={"enabled": True})
        assert (r.status_code, r.json()["enabled"]) == (200, True)
        thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]

        made = said(c, thread, 'call plan_create {"title": "Move house"}')
        assert (made["title"], made["status"], made["todos"]) == ("Move house", "draft", [])
        plan = said(
            c,
            thread,
            'call todo_add {"todos": [{"content": "Pack"}, {"content": "Rent a van"},'
            ' {"content": "Drive", "dependsOn": [0, 1]}]}',
        )
        assert plan["id"] == made["id"]
        pack, van, drive = plan["todos"]
        assert drive["blocked_by"] == [pack["id"], van["id"]]
        # the stream's result is the stored plan
        assert c.get(f"/api/plans/{plan['id']}").json() == plan
        assert [p["id"] for p in c.get("/api/plans", params={"threadId": thread}).json()] == [
            plan["id"]
        ]

        base = f"/api/plans/{plan['id']}"

        def ready() -> list[str]:
            return [t["content"] for t in c.get(f"{base}/ready").json()["ready"]]

        assert ready() == ["Pack", "Rent a van"]
        # over HTTP: renting the van waits for packing
        r = c.post(f"{base}/todos/{van['id']}/deps", json={"dependsOn": pack["id"]})
        assert (r.status_code, r.json()) == (
            201,
            {"todo_id": van["id"], "depends_on_id": pack["id"]},
        )
        assert ready() == ["Pack"]
        waiting = c.get(f"{base}/ready", params={"include": "blocked"}).json()["blocked"]
        assert waiting == [
            {"todo_id": van["id"], "waiting_on": [pack["id"]]},
            {"todo_id": drive["id"], "waiting_on": [pack["id"], van["id"]]},
        ]
        # packing after driving would close pack -> drive -> pack
        r = c.post(f"{base}/todos/{pack['id']}/deps", json={"dependsOn": drive["id"]})
        assert r.status_code == 409, r.text
        assert r.json()["error"] == "DEPENDENCY_CYCLE"
        assert pack["id"] in r.json()["detail"]
        assert drive["id"] in r.json()["detail"]
        # the model finishes packing with todo_update: the van is next
        done = said(c, thread, f'call todo_update {{"todoId": "{pack["id"]}", "status": "done"}}')
        assert done["todos"][0]["status"] == "done"
        assert ready() == ["Rent a van"]
        r = c.patch(f"{base}/todos/{van['id']}", json={"status": "skipped"})
        assert r.status_code == 200
        assert ready() == ["Drive"]
