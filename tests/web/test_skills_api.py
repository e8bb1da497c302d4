"""Skills (docs/skills.md) through the real Litestar app, on memory and PostgreSQL:
created inline and from the shipped registry, read, renamed, disabled, edited and
deleted; the registry browsed; bound to agents and runners in both of the
bindings' forms; and in a turn, the local model loads a skill with load_skill and
says what it read."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from tests.web.conftest import bearer, make_jwt
from tests.web.turns import result_of, say, thread_of

Client = TestClient[Any]
H = dict[str, str]
SHIPPED = Path(__file__).parents[2] / "src" / "agentsvc_adapters" / "data" / "skills"
TEA = "---\nname: tea\ndescription: Brew tea. Use for any hot drink.\n---\n# Tea\nSteep 3 min."


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _skill(c: Client, h: H, **body: Any) -> dict[str, Any]:
    return _ok(c.post("/api/skills", json=body, headers=h), 201)  # type: ignore[no-any-return]


def _agent(c: Client, h: H, name: str = "Brewer") -> str:
    return str(_ok(c.post("/api/agents", json={"name": name}, headers=h), 201)["id"])


def test_an_inline_skill_is_created_read_changed_and_deleted(client: Client, auth: H) -> None:
    made = _skill(client, auth, content=TEA, files={"ref/temps.md": "green: 80C"})
    assert {k: made[k] for k in ("name", "description", "body", "version", "status")} == {
        "name": "tea",
        "description": "Brew tea. Use for any hot drink.",
        "body": "# Tea\nSteep 3 min.",
        "version": 1,
        "status": "active",
    }
    assert made["files"] == [{"path": "ref/temps.md", "size": 10}]
    assert made["source"] == {
        "type": "inline",
        "url": None,
        "path": None,
        "ref": None,
        "resolved_ref": None,
    }
    assert len(made["content_hash"]) == 64
    assert (made["sync_error"], made["last_synced_at"]) == (None, None)
    sid = made["id"]
    assert _ok(client.get(f"/api/skills/{sid}", headers=auth)) == made
    assert _ok(client.get("/api/skills", headers=auth)) == [made]

    renamed = _ok(client.patch(f"/api/skills/{sid}", json={"name": "house-tea"}, headers=auth))
    assert (renamed["name"], renamed["version"]) == ("house-tea", 1)
    off = _ok(client.patch(f"/api/skills/{sid}", json={"enabled": False}, headers=auth))
    assert off["status"] == "disabled"
    edited = _ok(
        client.patch(
            f"/api/skills/{sid}",
            json={"content": TEA.replace("3 min", "4 min"), "enabled": True},
            headers=auth,
        )
    )
    assert (edited["version"], edited["body"], edited["status"]) == (
        2,
        "# Tea\nSteep 4 min.",
        "active",
    )
    assert edited["name"] == "house-tea"  # a renamed skill keeps its name
    assert edited["files"] == []  # the content came without files
    assert _ok(client.delete(f"/api/skills/{sid}", headers=auth)) == {"ok": True}
    assert client.get(f"/api/skills/{sid}", headers=auth).status_code == 404
    assert _ok(client.get("/api/skills", headers=auth)) == []


def test_bad_skills_are_clear_4xx(client: Client, auth: H) -> None:
    _skill(client, auth, content=TEA)
    for body, status, said in (
        ({}, 422, "content: give exactly one of content, source and registryId"),
        ({"content": "no front matter"}, 422, "SKILL.md: it must begin with front matter"),
        ({"content": TEA.replace("tea\n", "Tea Time\n", 1)}, 422, "name: 1 to 64"),
        ({"content": TEA, "files": {"../x": "y"}}, 422, "files: '../x' is not a relative path"),
        ({"content": TEA}, 409, "a skill named 'tea' exists already"),
        ({"registryId": "no-such-skill"}, 404, "no skill 'no-such-skill' in the registry"),
        ({"source": {"type": "svn", "url": "https://h/r"}}, 422, "source.type"),
        ({"source": {"type": "url", "url": "https://h/s.md", "ref": "v1"}}, 422, "source: a url"),
        # the outbound guard: loopback is refused before anything is fetched
        ({"source": {"type": "url", "url": "http://127.0.0.1:9/s.md"}}, 422, "source: refused"),
    ):
        r = client.post("/api/skills", json=body, headers=auth)
        assert r.status_code == status, (body, r.text)
        assert r.json()["detail"].startswith(said), (body, r.json())
    conflict = client.post("/api/skills", json={"content": TEA}, headers=auth)
    assert conflict.json()["error"] == "SKILL_NAME_TAKEN"
    assert [s["name"] for s in _ok(client.get("/api/skills", headers=auth))] == ["tea"]
    nowhere = str(uuid.uuid4())
    for r in (
        client.get(f"/api/skills/{nowhere}", headers=auth),
        client.patch(f"/api/skills/{nowhere}", json={"enabled": False}, headers=auth),
        client.delete(f"/api/skills/{nowhere}", headers=auth),
        client.post(f"/api/skills/{nowhere}/sync", headers=auth),
    ):
        assert r.status_code == 404, r.text
        assert r.json() == {"error": "NOT_FOUND", "detail": "skill not found"}


def test_the_registry_is_browsed_and_installed_from(client: Client, auth: H) -> None:
    listed = _ok(client.get("/api/skills/browse", headers=auth))
    index = json.loads((SHIPPED / "index.json").read_text())
    assert len(index) >= 10
    assert {s["id"] for s in listed} == {i["id"] for i in index}
    assert [(s["category"], s["id"]) for s in listed] == sorted(
        (s["category"], s["id"]) for s in listed
    )
    for s in listed:
        assert s["description"].strip(), s["id"]
        assert len(s["body"].splitlines()) > 20, s["id"]
    review = next(s for s in listed if s["id"] == "code-review")
    assert review["files"] == [
        {"path": "references/checklist.md", "size": review["files"][0]["size"]}
    ]
    found = _ok(client.get("/api/skills/browse?q=SQL%20query", headers=auth))
    assert [s["id"] for s in found] == ["sql-review"]
    by_category = _ok(client.get("/api/skills/browse?category=writing", headers=auth))
    assert {s["id"] for s in by_category} == {"release-notes", "brand-voice"}
    assert _ok(client.get("/api/skills/browse?q=zzzz-nothing", headers=auth)) == []

    installed = _skill(client, auth, registryId="code-review")
    assert installed["source"]["type"] == "registry"
    assert (installed["source"]["path"], installed["source"]["resolved_ref"]) == (
        "code-review",
        "1.0.0",
    )
    assert installed["body"] == review["body"]
    synced = _ok(client.post(f"/api/skills/{installed['id']}/sync", headers=auth))
    assert (synced["changed"], synced["from_version"], synced["to_version"]) == (False, 1, 1)
    assert synced["skill"]["last_synced_at"] is not None
    inline = _skill(client, auth, content=TEA)
    r = client.post(f"/api/skills/{inline['id']}/sync", headers=auth)
    assert r.status_code == 422
    assert r.json()["detail"].startswith("source: an inline skill has no source to sync")


def test_an_agents_and_a_runners_skills_in_both_forms(client: Client, auth: H) -> None:
    tea = _skill(client, auth, content=TEA)["id"]
    mint = _skill(client, auth, content=TEA.replace("name: tea", "name: mint"))["id"]
    agent = _agent(client, auth)
    assert _ok(client.get(f"/api/agents/{agent}/skills", headers=auth)) == []
    by_ids = _ok(
        client.post(f"/api/agents/{agent}/skills", json={"skillIds": [tea, mint]}, headers=auth)
    )
    assert by_ids == [
        {"skill_id": tea, "pinned_version": None, "enabled": True},
        {"skill_id": mint, "pinned_version": None, "enabled": True},
    ]
    full = _ok(
        client.post(
            f"/api/agents/{agent}/skills",
            json={"skills": [{"skillId": mint, "pinnedVersion": 1, "enabled": False}]},
            headers=auth,
        )
    )
    assert full == [{"skill_id": mint, "pinned_version": 1, "enabled": False}]
    assert _ok(client.get(f"/api/agents/{agent}/skills", headers=auth)) == full

    runner = _ok(
        client.post("/api/runners", json={"name": "r", "skills": [tea]}, headers=auth), 201
    )
    assert runner["skills"] == [tea]
    rid = runner["id"]
    assert _ok(client.get(f"/api/runners/{rid}/skills", headers=auth)) == [
        {"skill_id": tea, "pinned_version": None, "enabled": True}
    ]
    both = {"skills": [{"skillId": mint}, {"skillId": tea, "enabled": False}]}
    set_runner = _ok(client.post(f"/api/runners/{rid}/skills", json=both, headers=auth))
    assert [b["skill_id"] for b in set_runner] == [mint, tea]
    assert _ok(client.get(f"/api/runners/{rid}", headers=auth))["skills"] == [mint, tea]
    # skillIds, today's form, names each skill once: a repeat is dropped, as it always was
    once = {"skillIds": [tea, mint, tea]}
    assert [
        b["skill_id"]
        for b in _ok(client.post(f"/api/runners/{rid}/skills", json=once, headers=auth))
    ] == [tea, mint]
    twice = _ok(
        client.post("/api/runners", json={"name": "r2", "skills": [mint, mint]}, headers=auth), 201
    )
    assert twice["skills"] == [mint]
    assert _ok(client.post(f"/api/runners/{rid}/skills", json={"skillIds": []}, headers=auth)) == []

    nowhere = str(uuid.uuid4())
    for path in (f"/api/agents/{agent}/skills", f"/api/runners/{rid}/skills"):
        for body, status, said in (
            ({}, 422, "skills: give either skills or skillIds"),
            ({"skills": [], "skillIds": []}, 422, "skills: give either skills or skillIds"),
            ({"skillIds": [nowhere]}, 404, "skill not found"),
            (
                {"skills": [{"skillId": tea}, {"skillId": tea}]},
                422,
                f"skills: skill {tea} is given twice",
            ),
            (
                {"skills": [{"skillId": tea, "pinnedVersion": 5}]},
                422,
                "pinnedVersion: skill tea has no version 5",
            ),
            ({"skills": [{"skillId": tea, "pinnedVersion": 0}]}, 422, "skills[0].pinnedVersion"),
        ):
            r = client.post(path, json=body, headers=auth)
            assert r.status_code == status, (path, body, r.text)
            assert r.json()["detail"].startswith(said), (path, body, r.json())
    assert _ok(client.get(f"/api/agents/{agent}/skills", headers=auth)) == full  # unchanged
    # a marketplace listing names the skills the agent uses (mint is switched off)
    detect = f"/api/agents/{agent}/marketplace/detect-capabilities"
    assert _ok(client.post(detect, headers=auth))["capabilities"] == []
    _ok(client.post(f"/api/agents/{agent}/skills", json={"skillIds": [mint, tea]}, headers=auth))
    assert _ok(client.post(detect, headers=auth))["capabilities"] == [
        "Has the mint skill",
        "Has the tea skill",
    ]
    for path in (f"/api/agents/{nowhere}/skills", f"/api/runners/{nowhere}/skills"):
        assert client.get(path, headers=auth).status_code == 404
        assert client.post(path, json={"skillIds": []}, headers=auth).status_code == 404


def test_members_read_skills_and_only_admins_change_them(
    client: Client, auth: H, org_id: str
) -> None:
    sid = _skill(client, auth, content=TEA)["id"]
    agent = _agent(client, auth)
    member = bearer(make_jwt("u-member", org_id))
    assert _ok(client.get("/api/skills", headers=member))[0]["id"] == sid
    assert _ok(client.get(f"/api/skills/{sid}", headers=member))["name"] == "tea"
    assert _ok(client.get("/api/skills/browse", headers=member))
    assert _ok(client.get(f"/api/agents/{agent}/skills", headers=member)) == []
    for r in (
        client.post("/api/skills", json={"content": TEA}, headers=member),
        client.patch(f"/api/skills/{sid}", json={"enabled": False}, headers=member),
        client.delete(f"/api/skills/{sid}", headers=member),
        client.post(f"/api/skills/{sid}/sync", headers=member),
        client.post(f"/api/agents/{agent}/skills", json={"skillIds": [sid]}, headers=member),
    ):
        assert r.status_code == 403, r.text
    other_org = bearer(make_jwt("u-1", f"other-{uuid.uuid4().hex[:8]}", role="admin"))
    assert client.get(f"/api/skills/{sid}", headers=other_org).status_code == 404


def test_the_local_model_loads_a_skill_and_follows_it(client: Client, auth: H) -> None:
    sid = _skill(client, auth, content=TEA, files={"ref/temps.md": "green: 80C"})["id"]
    agent = _agent(client, auth)
    _ok(client.post(f"/api/agents/{agent}/skills", json={"skillIds": [sid]}, headers=auth))
    thread = thread_of(client, auth, agent)
    events = say(client, auth, thread, 'use load_skill {"name": "tea"}')
    result = result_of(events)
    assert result.startswith("# Skill tea (version 1)")
    assert "Steep 3 min." in result
    assert "- ref/temps.md (10 bytes)" in result
    done = next(e for e in events if e.event == "done").data
    assert "Steep 3 min." in done["content"]  # the reply reports what the skill said
    file_events = say(
        client, auth, thread, 'use load_skill {"name": "tea", "path": "ref/temps.md"}'
    )
    assert result_of(file_events) == "green: 80C"
    # a deleted skill is no longer offered
    _ok(client.delete(f"/api/skills/{sid}", headers=auth))
    gone = say(client, auth, thread, 'use load_skill {"name": "tea"}')
    assert not any(e.event == "tool_result" for e in gone)  # no longer offered
