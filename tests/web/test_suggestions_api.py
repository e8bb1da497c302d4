"""Improvement suggestions through the web app (memory and PostgreSQL): the same three
routes for a runner and for an agent (``/api/runners/{id}/suggestions``,
``/api/agents/{id}/suggestions``), statuses, access. The ``local`` model answers
with what it was sent, so a generation makes suggestions of the prompt's lines."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt

H = dict[str, str]
C = TestClient[Any]


def _agent(c: C, h: H) -> str:
    r = c.post("/api/agents", json={"name": "Helper"}, headers=h)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _runner(c: C, h: H, agent: str) -> str:
    steps = [{"id": "ask", "kind": "agent", "agentId": agent, "prompt": "hi"}]
    r = c.post("/api/runners", json={"name": "pipeline", "steps": steps}, headers=h)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _owner(c: C, h: H, kind: str) -> tuple[str, str]:
    """The suggestions path of a new runner or agent, and the owner's field."""
    agent = _agent(c, h)
    if kind == "runners":
        return f"/api/runners/{_runner(c, h, agent)}/suggestions", "runner_id"
    return f"/api/agents/{agent}/suggestions", "agent_id"


@pytest.mark.parametrize("kind", ["runners", "agents"])
def test_suggestions_are_generated_listed_dismissed_and_brought_back(
    client: C, auth: H, kind: str
) -> None:
    c, h = client, auth
    path, field = _owner(c, h, kind)
    owner = path.split("/")[3]
    made = c.post(path, headers=h)
    assert made.status_code == 201, made.text
    suggestions = made.json()
    assert suggestions, "the local model's answer has lines with a colon"
    for s in suggestions:
        assert s[field] == owner
        assert s["runner_id" if field == "agent_id" else "agent_id"] is None
        assert s["dismissed"] is False
        assert s["title"]
    listed = c.get(path, headers=h).json()
    assert {s["id"] for s in listed["suggestions"]} == {s["id"] for s in suggestions}
    assert listed["nextCursor"] is None

    first = suggestions[0]["id"]
    gone = c.put(path, json={"suggestionId": first}, headers=h)  # dismissed: true by default
    assert gone.status_code == 200, gone.text
    assert (gone.json()["id"], gone.json()["dismissed"]) == (first, True)
    kept = c.get(f"{path}?dismissed=false", headers=h).json()["suggestions"]
    assert first not in {s["id"] for s in kept}
    assert len(kept) == len(suggestions) - 1
    dismissed = c.get(f"{path}?dismissed=true", headers=h).json()["suggestions"]
    assert [s["id"] for s in dismissed] == [first]
    back = c.put(path, json={"suggestionId": first, "dismissed": False}, headers=h)
    assert back.json()["dismissed"] is False
    assert c.get(f"{path}?dismissed=true", headers=h).json()["suggestions"] == []


@pytest.mark.parametrize("kind", ["runners", "agents"])
def test_suggestions_come_by_pages(client: C, auth: H, kind: str) -> None:
    c, h = client, auth
    path, _ = _owner(c, h, kind)
    made = c.post(path, headers=h).json()
    assert len(made) >= 2
    seen: list[str] = []
    cursor = None
    while True:
        page = c.get(path, params={"limit": 1, **({"cursor": cursor} if cursor else {})}, headers=h)
        assert page.status_code == 200, page.text
        seen += [s["id"] for s in page.json()["suggestions"]]
        cursor = page.json()["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(s["id"] for s in made)
    assert c.get(path, params={"cursor": "nonsense"}, headers=h).status_code == 422
    assert c.get(path, params={"limit": 0}, headers=h).status_code == 422


def test_a_suggestion_is_dismissed_only_under_its_own_owner(client: C, auth: H) -> None:
    c, h = client, auth
    runner_path, _ = _owner(c, h, "runners")
    agent_path, _ = _owner(c, h, "agents")
    of_runner = c.post(runner_path, headers=h).json()[0]["id"]
    of_agent = c.post(agent_path, headers=h).json()[0]["id"]
    assert c.put(agent_path, json={"suggestionId": of_runner}, headers=h).status_code == 404
    assert c.put(runner_path, json={"suggestionId": of_agent}, headers=h).status_code == 404
    unknown = {"suggestionId": str(uuid.uuid4())}
    assert c.put(runner_path, json=unknown, headers=h).status_code == 404
    assert c.put(runner_path, json={"suggestion_id": of_runner}, headers=h).status_code == 422


@pytest.mark.parametrize("kind", ["runners", "agents"])
def test_members_read_admins_generate_and_dismiss(
    client: C, auth: H, org_id: str, kind: str
) -> None:
    c, h = client, auth
    path, _ = _owner(c, h, kind)
    one = c.post(path, headers=h).json()[0]["id"]
    member = bearer(make_jwt(sub="m", org=org_id))
    assert c.get(path, headers=member).status_code == 200
    assert c.post(path, headers=member).status_code == 403
    assert c.put(path, json={"suggestionId": one}, headers=member).status_code == 403
    stranger = bearer(make_jwt(sub="s", org="another-org", role="admin"))
    assert c.get(path, headers=stranger).status_code == 404
    assert c.post(path, headers=stranger).status_code == 404
    assert c.put(path, json={"suggestionId": one}, headers=stranger).status_code == 404
    missing = f"/api/{kind}/{uuid.uuid4()}/suggestions"
    assert c.get(missing, headers=h).status_code == 404
    assert c.post(missing, headers=h).status_code == 404


def test_a_runner_without_an_agent_step_has_no_model_to_ask(client: C, auth: H) -> None:
    c, h = client, auth
    steps = [{"id": "check", "kind": "condition", "expression": "true"}]
    r = c.post("/api/runners", json={"name": "no agent", "steps": steps}, headers=h)
    assert r.status_code == 201, r.text
    made = c.post(f"/api/runners/{r.json()['id']}/suggestions", headers=h)
    assert made.status_code == 422, made.text
