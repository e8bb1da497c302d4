"""Code sessions end to end: the real service process (PostgreSQL, its job worker),
the fake model scripted with tool calls (tests/fakes/providers.py), a loopback
git server (tests/fakes/git.py) and the fake GitHub (tests/fakes/github.py),
with the real adapters: the local sandbox (bubblewrap), the git remote over the
outbound guard and GitHub's pull requests.

A session edits a file, runs its tests, pushes a branch to the loopback server
and opens a pull request on the fake GitHub, its events followed live over SSE;
a follow-up while it waits, a cancel mid-command and an archive each do what
they say; ``kill -9`` of the service mid-session ends, after a restart, in a
finished or clearly failed session. Nothing reaches a non-loopback address.

It needs bubblewrap (``make test`` installs it where it can) and is skipped, saying
so, without it."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.service import Service, client, new_org, running
from tests.fakes.git import GitServer, serve_git
from tests.fakes.github import TOKEN, FakeGitHub
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.pg import fresh_database
from tests.web.live import serve

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None,
        reason="code sessions run in the local sandbox, which needs root and bubblewrap "
        "(apt-get install bubblewrap); make test installs it where it can",
    ),
]


WAIT_S = 90.0
FILES = {
    "app.py": b"def add(a, b):\n    return a - b\n",
    "test_app.py": b"from app import add\n\nassert add(2, 3) == 5\nprint('tests pass')\n",
}
ENDED = {"finished", "error", "cancelled", "expired"}


def _call(name: str, **arguments: Any) -> Reply:
    return Reply(
        text="",
        tool_calls=[ToolCallSpec(id=f"c-{uuid.uuid4().hex[:8]}", name=name, arguments=arguments)],
    )


def _env(
    pg_url: str, model: str, github: str, git_host: str, data: Path, sandboxes: Path
) -> dict[str, str]:
    return {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
        "AGENTSVC_BOOTSTRAP_ORG": f"code-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
        "AGENTSVC_BETA_BASE_URL": f"{model}/v1",
        "AGENTSVC_BETA_API_KEY": "sk-platform",
        "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # the loopback git server and GitHub
        "AGENTSVC_GITHUB_API_URL": github,
        "AGENTSVC_GITHUB_HOST": git_host,
        "AGENTSVC_DATA_DIR": str(data),
        "AGENTSVC_SANDBOX_LOCAL_DIR": str(sandboxes),
    }


@pytest.fixture(scope="module")
def world(own_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The module's service, on a database of its own: another module's service on
    the shared one could take its sessions' jobs and run them elsewhere."""
    tmp = tmp_path_factory.mktemp("code-sessions")
    # the sandboxes' workspaces where their unprivileged users can reach them
    sandboxes = Path(tempfile.mkdtemp(prefix="agentsvc-e2e-code-", dir="/var/tmp"))
    sandboxes.chmod(0o711)
    git, model = GitServer(token=TOKEN), FakeProvider("beta")
    git.commit(dict(FILES))
    model_url = model.start()
    try:
        with serve_git(git) as git_url:
            github = FakeGitHub(git, web_url=git_url)
            with serve(github) as github_url:
                host = git_url.removeprefix("http://")
                env = _env(own_pg_url, model_url, github_url, host, tmp / "data", sandboxes)
                with running(env, log=tmp / "svc.log") as svc:
                    yield {
                        "svc": svc,
                        "env": env,
                        "log": tmp / "svc.log",
                        "git": git,
                        "repo": f"{git_url}/acme/widgets.git",
                        "github": github,
                        "model": model,
                    }
    finally:
        model.stop()
        shutil.rmtree(sandboxes, ignore_errors=True)


def _session(c: httpx.Client, repo: str, prompt: str) -> dict[str, Any]:
    agent = c.post(
        "/api/code-agents",
        json={
            "name": "fixer",
            "model": "gpt-4o",
            "repoUrl": repo,
            "gitCredential": TOKEN,
            "branchPrefix": "fixer/",
        },
    )
    assert agent.status_code == 201, agent.text
    made = c.post("/api/code-sessions", json={"codeAgentId": agent.json()["id"], "prompt": prompt})
    assert made.status_code == 201, made.text
    session: dict[str, Any] = made.json()
    assert session["status"] == "pending"
    return session


def _wait(c: httpx.Client, session_id: str, statuses: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        s: dict[str, Any] = c.get(f"/api/code-sessions/{session_id}").json()
        if s["status"] in statuses:
            return s
        assert time.monotonic() < deadline, s
        time.sleep(0.1)


def _follow(svc: Service, key: str, session_id: str) -> list[dict[str, Any]]:
    """The timeline followed live over SSE until the session ends (the stream ends then)."""
    events: list[dict[str, Any]] = []
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    with httpx.stream(
        "GET", f"{svc.url}/api/code-sessions/{session_id}/events", headers=headers, timeout=WAIT_S
    ) as r:
        assert r.status_code == 200
        events.extend(json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: "))
    return events


def test_a_session_edits_tests_pushes_and_opens_a_pull_request(world: dict[str, Any]) -> None:
    svc, model = world["svc"], world["model"]
    model.reset()
    model.enqueue(
        _call("edit", path="app.py", old_text="a - b", new_text="a + b"),
        _call("exec", command="python3 test_app.py"),
        Reply(text="Fixed add(): it subtracted."),
    )
    _, key = new_org(svc.url, E2E_JWT_SECRET, "code")
    with client(svc, key) as c:
        session = _session(c, world["repo"], "Fix add() and run the tests")
        events = _follow(svc, key, session["id"])
        s = c.get(f"/api/code-sessions/{session['id']}").json()
    assert s["status"] == "finished", s
    assert s["branch"].startswith("fixer/")
    assert s["pr_url"]
    statuses = [e["data"]["status"] for e in events if e["type"] == "status"]
    assert statuses == ["pending", "creating", "running", "finished"]
    [command] = [e["data"] for e in events if e["type"] == "command"]
    assert command["exit_code"] == 0
    assert "tests pass" in command["output"]
    assert any(
        "+    return a + b" in (e["data"]["diff"] or "")
        for e in events
        if e["type"] == "file_change"
    )
    assert world["git"].repo.refs[f"refs/heads/{s['branch']}".encode()]
    assert [e["data"]["url"] for e in events if e["type"] == "pull_request"] == [s["pr_url"]]


def test_a_follow_up_answers_the_model_while_it_waits(world: dict[str, Any]) -> None:
    svc, model = world["svc"], world["model"]
    model.reset()
    model.enqueue(_call("ask_user", question="Which function?"), Reply(text="Nothing to change."))
    _, key = new_org(svc.url, E2E_JWT_SECRET, "code")
    with client(svc, key) as c:
        session = _session(c, world["repo"], "Fix it")
        _wait(c, session["id"], {"awaiting_input"})
        sent = c.post(f"/api/code-sessions/{session['id']}/messages", json={"content": "add()"})
        assert sent.status_code == 200, sent.text
        s = _wait(c, session["id"], ENDED)
        assert s["status"] == "finished"
        late = c.post(f"/api/code-sessions/{session['id']}/messages", json={"content": "more"})
        assert late.status_code == 409
    last = model.requests[-1].json
    assert last is not None
    assert "add()" in str(last["messages"][-1])


def test_cancel_stops_the_command_and_archive_clears_the_sandbox(world: dict[str, Any]) -> None:
    svc, model = world["svc"], world["model"]
    model.reset()
    model.enqueue(_call("exec", command="sleep 60"), Reply(text="never"))
    _, key = new_org(svc.url, E2E_JWT_SECRET, "code")
    with client(svc, key) as c:
        session = _session(c, world["repo"], "Wait a minute")
        path = f"/api/code-sessions/{session['id']}"
        deadline = time.monotonic() + WAIT_S
        while not any(e["type"] == "tool_call" for e in c.get(f"{path}/events").json()["events"]):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)
        began = time.monotonic()
        assert c.post(f"{path}/cancel").status_code == 200
        assert c.post(f"{path}/cancel").status_code == 200  # idempotent
        s = _wait(c, session["id"], ENDED)
        assert s["status"] == "cancelled"
        assert time.monotonic() - began < 10  # the command (60 s) was stopped
        archived = c.post(f"{path}/archive").json()
        assert archived["archived"] is True
        timeline = c.get(f"{path}/events").json()["events"]
        assert timeline[-1]["type"] == "notice"


def test_a_killed_service_ends_the_session_after_its_restart(
    pg_admin_url: str, tmp_path: Path, world: dict[str, Any]
) -> None:
    """``kill -9`` while a command runs: after a restart the job is picked again, and
    the command (not recorded) is reported to the model as interrupted. On a
    database of its own: the module's service would otherwise take the job, and
    the kill would miss it."""
    model = world["model"]
    model.reset()
    model.enqueue(_call("exec", command="echo ran >> log.txt; sleep 30"), Reply(text="Done."))
    own = tmp_path / "db"
    with fresh_database(pg_admin_url) as pg_url:
        _killed_and_restarted(
            {**world["env"], "AGENTSVC_DATABASE_URL": pg_url, "AGENTSVC_JOB_HEARTBEAT_S": "2"},
            own,
            world["repo"],
        )


def _killed_and_restarted(env: dict[str, str], tmp_path: Path, repo: str) -> None:
    tmp_path.mkdir()
    with running(env, log=tmp_path / "first.log") as svc:
        _, key = new_org(svc.url, E2E_JWT_SECRET, "code")
        with client(svc, key) as c:
            session = _session(c, repo, "Run a long command")
            path = f"/api/code-sessions/{session['id']}"
            deadline = time.monotonic() + WAIT_S
            while not any(
                e["type"] == "tool_call" for e in c.get(f"{path}/events").json()["events"]
            ):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(1.0)
        svc.proc.kill()
        svc.proc.wait()
    with running(env, log=tmp_path / "second.log") as svc, client(svc, key) as c:
        s = _wait(c, session["id"], ENDED)
        assert s["status"] in ("finished", "error"), s
        if s["status"] == "error":
            assert s["error"]
        events = c.get(f"{path}/events?limit=500").json()["events"]
    texts = [str(e["data"]) for e in events]
    assert any("interrupted" in t for t in texts), (s, texts)
    # the command was not run a second time: it wrote its line once
    diffs = [e["data"]["diff"] for e in events if e["type"] == "file_change"]
    if s["status"] == "finished":
        assert [d.count("+ran") for d in diffs if "log.txt" in d] == [1], diffs
