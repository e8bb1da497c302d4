"""Skills end to end: the real service process and a git server on loopback
(tests/fakes/git.py, dulwich's own smart-HTTP server). A skill made from the
repository is loaded by the local model through ``load_skill`` and changes what
the agent answers; a new commit is picked up by a sync (a new version), a pinned
binding keeps the old one, a sync that fails keeps the last good version; a
runner's skills reach its agent step."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.service import Service
from tests.fakes.git import GitServer, serve_git
from tests.sse import parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


def _md(body: str) -> bytes:
    return (
        "---\nname: tea\ndescription: How this house brews tea. Use for any tea order.\n---\n"
        f"# Tea\n{body}\n"
    ).encode()


KEY = f"ask_e2e_{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def service(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("skills")
    svc = Service(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
            "AGENTSVC_BOOTSTRAP_ORG": f"skills-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
            # the git server is on loopback, which the outbound guard refuses by default
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
        },
        log=tmp / "svc.log",
    )
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def c(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=service.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    ) as client:
        yield client


def _ok(r: httpx.Response, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _ask(c: httpx.Client, agent: str, content: str) -> list[Any]:
    thread = _ok(c.post("/api/threads", json={"agentId": agent}))
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def _loaded(events: list[Any]) -> tuple[str, str]:
    """The load_skill result and the reply's text."""
    names = [e.event for e in events]
    assert names[:4] == ["meta", "tool_call", "tool_executing", "tool_result"], names
    assert events[1].data["tool"]["name"] == "load_skill"
    done = next(e for e in events if e.event == "done").data
    return str(events[3].data["result"]), str(done["content"])


LOAD = 'use load_skill {"name": "tea"}'


def test_a_git_skill_is_loaded_and_a_sync_picks_up_a_new_commit(c: httpx.Client) -> None:
    git = GitServer()
    with serve_git(git) as base:
        first = git.commit(
            {
                "README.md": b"skills of the house",
                "skills/tea/SKILL.md": _md("Steep green tea for 2 minutes at 80C."),
                "skills/tea/ref/cups.md": b"small cups",
            }
        )
        source = {"type": "git", "url": f"{base}/repo.git", "path": "skills/tea", "ref": "main"}
        skill = _ok(c.post("/api/skills", json={"source": source}), 201)
        assert (skill["name"], skill["version"], skill["status"]) == ("tea", 1, "active")
        assert skill["source"]["resolved_ref"] == first
        assert skill["files"] == [{"path": "ref/cups.md", "size": 10}]

        agent = _ok(c.post("/api/agents", json={"name": "Tea house"}), 201)["id"]
        unattached = _ask(c, agent, LOAD)  # not attached yet: load_skill is not offered
        assert "tool_result" not in [e.event for e in unattached]
        _ok(c.post(f"/api/agents/{agent}/skills", json={"skillIds": [skill["id"]]}))
        result, answer = _loaded(_ask(c, agent, LOAD))
        assert result.startswith("# Skill tea (version 1)")
        assert "Steep green tea for 2 minutes at 80C." in answer

        second = git.commit(
            {
                "README.md": b"skills of the house",
                "skills/tea/SKILL.md": _md("Steep black tea for 5 minutes, then add honey."),
            }
        )
        synced = _ok(c.post(f"/api/skills/{skill['id']}/sync"))
        assert (synced["changed"], synced["from_version"], synced["to_version"]) == (True, 1, 2)
        assert synced["skill"]["source"]["resolved_ref"] == second
        assert synced["skill"]["files"] == []
        result, answer = _loaded(_ask(c, agent, LOAD))
        assert result.startswith("# Skill tea (version 2)")
        assert "then add honey" in answer  # the new commit changed what the agent does
        assert "80C" not in answer

        again = _ok(c.post(f"/api/skills/{skill['id']}/sync"))
        assert (again["changed"], again["to_version"]) == (False, 2)

        pinned = {"skills": [{"skillId": skill["id"], "pinnedVersion": 1}]}
        _ok(c.post(f"/api/agents/{agent}/skills", json=pinned))
        result, answer = _loaded(_ask(c, agent, LOAD))
        assert result.startswith("# Skill tea (version 1)")
        assert "80C" in answer
    # the git server is gone: a sync fails, the last good version stays in use
    r = c.post(f"/api/skills/{skill['id']}/sync")
    assert r.status_code == 502, r.text
    assert r.json()["error"] == "SKILL_SYNC_FAILED"
    assert r.json()["detail"].startswith("the sync failed, version 2 is kept: ")
    kept = _ok(c.get(f"/api/skills/{skill['id']}"))
    assert (kept["version"], kept["status"]) == (2, "error")
    assert kept["sync_error"]
    _ok(c.post(f"/api/agents/{agent}/skills", json={"skillIds": [skill["id"]]}))
    result, answer = _loaded(_ask(c, agent, LOAD))
    assert "then add honey" in answer


def test_a_url_skill_and_a_runners_skills(c: httpx.Client) -> None:
    git = GitServer()
    with serve_git(git) as base:
        skill = _ok(
            c.post("/api/skills", json={"source": {"type": "url", "url": f"{base}/skill.md"}}), 201
        )
    assert skill["name"] == "brewing"
    assert skill["source"]["resolved_ref"].startswith("sha256:")
    agent = _ok(c.post("/api/agents", json={"name": "Plain"}), 201)["id"]
    runner = _ok(
        c.post(
            "/api/runners",
            json={
                "name": "brew",
                "steps": [
                    {
                        "id": "ask",
                        "kind": "agent",
                        "agentId": agent,
                        "prompt": 'use load_skill {"name": "brewing"}',
                    }
                ],
            },
        ),
        201,
    )
    _ok(c.post(f"/api/runners/{runner['id']}/skills", json={"skillIds": [skill["id"]]}))
    run = _ok(c.post(f"/api/runners/{runner['id']}/runs", json={"input": {}}), 201)
    deadline = time.monotonic() + 30
    while (got := _ok(c.get(f"/api/runners/{runner['id']}/runs/{run['id']}")))["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, got
        time.sleep(0.1)
    assert got["status"] == "succeeded", got
    assert "Steep briefly." in str(got["steps"][0]["output"])  # the runner's skill, loaded
    # the agent alone has no skills: asked directly, load_skill is not there
    events = _ask(c, agent, 'use load_skill {"name": "brewing"}')
    assert "tool_result" not in [e.event for e in events]
