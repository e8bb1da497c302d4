"""The official templates (docs/templates.md) through the real Litestar app, on
memory and PostgreSQL: listed and searched; used, each becomes a working agent
with the template's preamble and configurations, the overrides applied, the
template and its version recorded; a refused configuration leaves no agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.turns import result_of, say, thread_of

Client = TestClient[Any]
SHIPPED = Path(__file__).parents[2] / "src" / "agentsvc_adapters" / "data" / "templates"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _use(c: Client, auth: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    return _ok(c.post("/api/marketplace/official/use", json=body, headers=auth), 201)  # type: ignore[no-any-return]


def test_the_list_holds_every_shipped_template_by_category(
    client: Client, auth: dict[str, str]
) -> None:
    listed = _ok(client.get("/api/marketplace/official", headers=auth))
    shipped = {p.stem: json.loads(p.read_text()) for p in SHIPPED.glob("*.json")}
    assert len(shipped) >= 8
    assert {t["id"] for t in listed} == set(shipped)
    assert [(t["category"], t["name"]) for t in listed] == sorted(
        (t["category"], t["name"]) for t in listed
    )
    planner = next(t for t in listed if t["id"] == "project-planner")
    source = shipped["project-planner"]
    assert (planner["version"], planner["name"]) == (source["version"], source["name"])
    assert planner["agent"]["stable_preamble"] == source["agent"]["stable_preamble"]
    assert planner["configs"]["plan"] == {"enabled": True}
    for t in listed:
        assert t["agent"]["stable_preamble"].strip(), t["id"]
        assert t["description"].strip(), t["id"]
        assert t["tags"], t["id"]


def test_category_and_words_narrow_the_list(client: Client, auth: dict[str, str]) -> None:
    def ids(query: str) -> list[str]:
        return [
            t["id"] for t in _ok(client.get(f"/api/marketplace/official?{query}", headers=auth))
        ]

    assert ids("category=data") == ["sql-analyst"]
    assert ids("category=DATA") == ["sql-analyst"]
    assert set(ids("category=productivity")) == {"project-planner", "meeting-notes"}
    assert ids("q=postgresql") == ["sql-analyst"]  # a tag
    assert ids("q=Meeting+transcript") == ["meeting-notes"]  # every word, any case
    assert ids("q=meeting+postgresql") == []
    assert ids("category=data&q=research") == []
    assert ids("category=nothing-here") == []


def test_a_template_becomes_an_agent_with_its_configurations(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    agent = _use(client, auth, {"templateId": "meeting-notes"})
    source = json.loads((SHIPPED / "meeting-notes.json").read_text())
    assert agent["template"] == {"id": "meeting-notes", "version": source["version"]}
    assert (agent["org_id"], agent["name"]) == (org_id, source["agent"]["name"])
    assert agent["stable_preamble"] == source["agent"]["stable_preamble"]
    assert agent["default_model"] == "local"  # the service's default
    got = _ok(client.get(f"/api/agents/{agent['id']}", headers=auth))
    assert got["template"] == agent["template"]
    memory = _ok(client.get(f"/api/agents/{agent['id']}/memory", headers=auth))
    assert (memory["enabled"], memory["auto_collect"]) == (True, True)
    assert sorted(memory["scopes"]) == ["agent", "thread"]
    assert _ok(client.get(f"/api/agents/{agent['id']}/compaction", headers=auth))["enabled"]
    assert not _ok(client.get(f"/api/agents/{agent['id']}/plan", headers=auth))["enabled"]


def test_overrides_change_the_agent_and_its_configurations(
    client: Client, auth: dict[str, str]
) -> None:
    project = _ok(client.post("/api/projects", json={"name": "ops"}, headers=auth), 201)
    agent = _use(
        client,
        auth,
        {
            "templateId": "web-researcher",
            "name": "Market scout",
            "overrides": {
                "stablePreamble": "Only read the pages I give you.",
                "defaultModel": "local",
                "projectId": project["id"],
                "web": {"maxTextChars": 5000},
                "plan": {"enabled": False},
            },
        },
    )
    assert (agent["name"], agent["stable_preamble"]) == (
        "Market scout",
        "Only read the pages I give you.",
    )
    assert agent["project_id"] == project["id"]
    source = json.loads((SHIPPED / "web-researcher.json").read_text())
    assert agent["description"] == source["agent"]["description"]  # not overridden
    web = _ok(client.get(f"/api/agents/{agent['id']}/web", headers=auth))
    assert (web["fetch_enabled"], web["max_text_chars"]) == (True, 5000)  # both kept
    assert not _ok(client.get(f"/api/agents/{agent['id']}/plan", headers=auth))["enabled"]


def test_a_planner_from_its_template_answers_with_its_tools(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _use(client, auth, {"templateId": "project-planner"})
    thread = thread_of(client, auth, agent["id"])
    events = say(
        client,
        auth,
        thread,
        'call plan_create {"title": "Launch", "todos": [{"content": "Write the page"}]}',
    )
    assert "Launch" in result_of(events)
    plans = _ok(client.get(f"/api/plans?threadId={thread}", headers=auth))
    assert [p["title"] for p in plans] == ["Launch"]


def test_a_refused_configuration_leaves_no_agent(client: Client, auth: dict[str, str]) -> None:
    before = _ok(client.get("/api/agents", headers=auth))
    # web search on a service with no search provider: 422 after the agent was made
    r = client.post(
        "/api/marketplace/official/use",
        json={"templateId": "web-researcher", "overrides": {"web": {"searchEnabled": True}}},
        headers=auth,
    )
    assert r.status_code == 422, r.text
    assert "search" in r.json()["detail"]
    assert _ok(client.get("/api/agents", headers=auth)) == before


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"templateId": "no-such-template"}, 404),
        ({}, 422),
        ({"templateId": ""}, 422),
        ({"templateId": "sql-analyst", "name": ""}, 422),
        ({"templateId": "sql-analyst", "overrides": {"memory": {"maxMemories": 0}}}, 422),
        (
            {
                "templateId": "sql-analyst",
                "overrides": {"projectId": "3b0b52b5-8f0e-4c5e-9b38-4d1c8a1f2b11"},
            },
            404,
        ),
    ],
)
def test_bad_requests_are_refused_and_make_nothing(
    client: Client, auth: dict[str, str], body: dict[str, Any], status: int
) -> None:
    r = client.post("/api/marketplace/official/use", json=body, headers=auth)
    assert r.status_code == status, r.text
    assert _ok(client.get("/api/agents", headers=auth)) == []


def test_members_browse_templates_and_only_admins_use_them(
    client: Client, auth: dict[str, str], org_id: str
) -> None:
    member = bearer(make_jwt("mia", org=org_id))
    assert _ok(client.get("/api/marketplace/official", headers=member))
    r = client.post(
        "/api/marketplace/official/use", json={"templateId": "writing-editor"}, headers=member
    )
    assert r.status_code == 403, r.text
    assert _ok(client.get("/api/agents", headers=auth)) == []


def test_a_template_with_skills_makes_an_agent_that_loads_them(
    client: Client, auth: dict[str, str]
) -> None:
    agent = _use(client, auth, {"templateId": "code-reviewer"})
    bound = _ok(client.get(f"/api/agents/{agent['id']}/skills", headers=auth))
    skills = {s["id"]: s for s in _ok(client.get("/api/skills", headers=auth))}
    assert [skills[b["skill_id"]]["name"] for b in bound] == ["code-review", "commit-messages"]
    assert {s["source"]["type"] for s in skills.values()} == {"registry"}
    thread = thread_of(client, auth, agent["id"])
    events = say(client, auth, thread, 'use load_skill {"name": "code-review"}')
    result = result_of(events)
    assert result.startswith("# Skill code-review (version 1)")
    assert "references/checklist.md" in result
    # a second agent from it shares the skills the first installed
    again = _use(client, auth, {"templateId": "code-reviewer", "name": "Second reviewer"})
    assert len(_ok(client.get("/api/skills", headers=auth))) == 2
    assert _ok(client.get(f"/api/agents/{again['id']}/skills", headers=auth)) == bound
