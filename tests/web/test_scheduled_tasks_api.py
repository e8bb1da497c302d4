"""An agent's scheduled tasks through the web app (memory and PostgreSQL):
``/api/agents/{id}/scheduled-tasks``, the camelCase body it takes, statuses, access."""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt

H = dict[str, str]
C = TestClient[Any]


def _agent_and_thread(c: C, h: H) -> tuple[str, str]:
    agent = c.post("/api/agents", json={"name": "Reporter"}, headers=h)
    assert agent.status_code == 201, agent.text
    thread = c.post("/api/threads", json={"agentId": agent.json()["id"]}, headers=h)
    assert thread.status_code == 200, thread.text
    return agent.json()["id"], thread.json()["id"]


def _put(c: C, h: H, agent: str, *tasks: dict[str, Any]) -> Any:
    return c.put(f"/api/agents/{agent}/scheduled-tasks", json={"tasks": list(tasks)}, headers=h)


def test_a_task_is_written_in_camel_case_and_read_back(client: C, auth: H, org_id: str) -> None:
    c, h = client, auth
    agent, thread = _agent_and_thread(c, h)
    r = _put(
        c,
        h,
        agent,
        {
            "name": "weekly",
            "prompt": "the week's report",
            "cron": "0 9 * * 1",
            "timezone": "Europe/Paris",
            "enabled": False,
            "threadId": thread,
            "overlap": "queue",
            "endAt": "2099-01-01T00:00:00Z",
        },
    )
    assert r.status_code == 200, r.text
    put = r.json()
    assert (put["agent_id"], put["org_id"]) == (agent, org_id)
    [task] = put["tasks"]
    assert {k: task[k] for k in ("name", "prompt", "cron", "timezone", "enabled")} == {
        "name": "weekly",
        "prompt": "the week's report",
        "cron": "0 9 * * 1",
        "timezone": "Europe/Paris",
        "enabled": False,
    }
    assert (task["thread_id"], task["overlap"]) == (thread, "queue")
    assert task["end_at"].startswith("2099-01-01T00:00:00")
    assert task["last_run_at"] is None
    got = c.get(f"/api/agents/{agent}/scheduled-tasks", headers=h)
    assert got.status_code == 200, got.text
    assert got.json() == put


def test_snake_case_names_are_not_the_fields(client: C, auth: H) -> None:
    """The body is camelCase: ``thread_id`` and ``end_at`` are unknown names, left
    aside, so the task has neither."""
    c, h = client, auth
    agent, thread = _agent_and_thread(c, h)
    r = _put(
        c,
        h,
        agent,
        {"prompt": "p", "cron": "0 9 * * *", "thread_id": thread, "end_at": "2099-01-01T00:00:00Z"},
    )
    assert r.status_code == 200, r.text
    [task] = r.json()["tasks"]
    assert (task["thread_id"], task["end_at"]) == (None, None)
    assert (task["name"], task["timezone"], task["enabled"], task["overlap"]) == (
        "",
        "UTC",
        True,
        "skip",
    )


def test_the_list_replaces_the_stored_one(client: C, auth: H) -> None:
    c, h = client, auth
    agent, _ = _agent_and_thread(c, h)
    first = _put(
        c, h, agent, {"prompt": "a", "cron": "0 9 * * *"}, {"prompt": "b", "cron": "0 10 * * *"}
    )
    assert first.status_code == 200, first.text
    a, _b = first.json()["tasks"]
    # a's id changes a; a task without one is added; b, named by no task, goes
    second = _put(
        c,
        h,
        agent,
        {"id": a["id"], "prompt": "a again", "cron": "0 8 * * *"},
        {"prompt": "c", "cron": "0 7 * * *"},
    )
    assert second.status_code == 200, second.text
    tasks = {t["prompt"]: t for t in second.json()["tasks"]}
    assert set(tasks) == {"a again", "c"}
    assert (tasks["a again"]["id"], tasks["a again"]["cron"]) == (a["id"], "0 8 * * *")
    assert tasks["c"]["id"] != a["id"]
    assert _put(c, h, agent).json()["tasks"] == []


def test_a_bad_task_is_refused_and_nothing_is_written(client: C, auth: H) -> None:
    c, h = client, auth
    agent, _ = _agent_and_thread(c, h)
    _, other_thread = _agent_and_thread(c, h)  # a thread of another agent
    good = {"prompt": "kept", "cron": "0 9 * * *"}
    assert _put(c, h, agent, good).status_code == 200
    for bad in (
        {"cron": "0 9 * * *"},  # no prompt
        {"prompt": "p"},  # no cron
        {"prompt": "p", "cron": "not a cron"},
        {"prompt": "p", "cron": "0 9 * * *", "overlap": "never"},
        {"prompt": "p", "cron": "0 9 * * *", "endAt": "tomorrow"},
        {"prompt": "p", "cron": "0 9 * * *", "timezone": "Mars/Olympus"},
        {"prompt": "p", "cron": "0 9 * * *", "threadId": other_thread},
        {"prompt": "p", "cron": "0 9 * * *", "id": str(uuid.uuid4())},
    ):
        r = _put(c, h, agent, good, bad)
        assert r.status_code == 422, (bad, r.text)
    too_many = [{"prompt": f"p{i}", "cron": "0 9 * * *"} for i in range(51)]
    assert _put(c, h, agent, *too_many).status_code == 422
    [kept] = c.get(f"/api/agents/{agent}/scheduled-tasks", headers=h).json()["tasks"]
    assert kept["prompt"] == "kept"


def test_members_read_admins_write_and_another_org_sees_nothing(
    client: C, auth: H, org_id: str
) -> None:
    c, h = client, auth
    agent, _ = _agent_and_thread(c, h)
    path = f"/api/agents/{agent}/scheduled-tasks"
    assert _put(c, h, agent, {"prompt": "p", "cron": "0 9 * * *"}).status_code == 200
    member = bearer(make_jwt(sub="m", org=org_id))
    assert len(c.get(path, headers=member).json()["tasks"]) == 1
    assert c.get(f"{path}/runs", headers=member).status_code == 200
    assert _put(c, member, agent).status_code == 403
    stranger = bearer(make_jwt(sub="s", org="another-org", role="admin"))
    assert c.get(path, headers=stranger).status_code == 404
    assert c.get(f"{path}/runs", headers=stranger).status_code == 404
    assert _put(c, stranger, agent).status_code == 404
    missing = f"/api/agents/{uuid.uuid4()}/scheduled-tasks"
    assert c.get(missing, headers=h).status_code == 404


def test_runs_are_listed_by_pages(client: C, auth: H) -> None:
    c, h = client, auth
    agent, _ = _agent_and_thread(c, h)
    r = c.get(f"/api/agents/{agent}/scheduled-tasks/runs?limit=10", headers=h)
    assert r.status_code == 200, r.text
    assert r.json() == {"runs": [], "nextCursor": None}
    bad = c.get(f"/api/agents/{agent}/scheduled-tasks/runs?cursor=nonsense", headers=h)
    assert bad.status_code == 422
