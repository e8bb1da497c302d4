"""The computer end to end: the real service process (PostgreSQL, the built-in
``local`` model, which calls a tool it is asked to call) and the local sandbox
provider (bubblewrap).

An agent with the computer on runs ``python3 -c`` in a turn and answers with its
output; a persistent instance keeps a file across a stop (an operator's commands
streamed as Server-Sent Events, the stop route between them)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET, E2E_KEY
from tests.e2e.service import Service, client, new_org, running
from tests.sse import parse

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("bwrap") is None,
        reason="the local sandbox needs root and bubblewrap (apt-get install bubblewrap); "
        "make test installs it where it can",
    ),
]


@pytest.fixture(scope="module")
def computer_service(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, registry_url: str
) -> Iterator[Service]:
    """The service on PostgreSQL, its local sandboxes' workspaces in a folder that
    their unprivileged users can reach (pytest's own is its owner's alone)."""
    tmp = tmp_path_factory.mktemp("computer")
    sandboxes = Path(tempfile.mkdtemp(prefix="agentsvc-e2e-sandboxes-", dir="/var/tmp"))
    sandboxes.chmod(0o711)
    try:
        with running(
            {
                "AGENTSVC_STORAGE": "postgres",
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": E2E_KEY,
                "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
                "AGENTSVC_MCP_REGISTRY_URL": registry_url,
                "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
                "AGENTSVC_DATA_DIR": str(tmp / "data"),
                "AGENTSVC_SANDBOX_LOCAL_DIR": str(sandboxes),
            },
            log=tmp / "service.log",
        ) as svc:
            yield svc
    finally:
        shutil.rmtree(sandboxes, ignore_errors=True)


@pytest.fixture
def c(computer_service: Service) -> Iterator[httpx.Client]:
    _, key = new_org(computer_service.url, E2E_JWT_SECRET, "computer")
    with client(computer_service, key) as http:
        yield http


def _agent(c: httpx.Client) -> str:
    agent = c.post("/api/agents", json={"name": "Builder", "defaultModel": "local"})
    assert agent.status_code == 201, agent.text
    agent_id = str(agent.json()["id"])
    on = c.put(f"/api/agents/{agent_id}/computer", json={"enabled": True})
    assert on.status_code == 200, on.text
    assert on.json()["effective_provider"] == "local"
    assert "local" in on.json()["available_providers"]
    return agent_id


def _turn(c: httpx.Client, thread: str, content: str) -> list[Any]:
    r = c.post(f"/api/threads/{thread}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def _exec(c: httpx.Client, agent: str, instance: str, command: str) -> list[Any]:
    r = c.post(f"/api/agents/{agent}/computer-instances/{instance}/exec", json={"command": command})
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_an_agent_runs_python_in_a_turn_and_answers_with_its_output(c: httpx.Client) -> None:
    agent = _agent(c)
    thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]
    call = {"command": "python3 -c 'import sys; print(sum(range(10)), sys.version_info[0])'"}
    events = _turn(c, thread, "call computer_exec " + json.dumps(call))
    [result] = [e.data for e in events if e.event == "tool_result"]
    assert result["tool_name"] == "computer_exec"
    assert result["result"].startswith("exit code 0\nstdout:\n45 3\n"), result
    [done] = [e.data for e in events if e.event == "done"]
    assert "45 3" in done["content"]
    instance = c.get(f"/api/threads/{thread}/computer")
    assert instance.status_code == 200, instance.text
    assert (instance.json()["provider"], instance.json()["status"]) == ("local", "idle")


def test_a_persistent_instance_keeps_a_file_across_a_stop(c: httpx.Client) -> None:
    agent = _agent(c)
    thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]
    wrote = {"path": "notes/kept.txt", "content": "still here"}
    events = _turn(c, thread, "call computer_write_file " + json.dumps(wrote))
    [result] = [e.data for e in events if e.event == "tool_result"]
    assert result["result"] == "wrote 10 bytes to notes/kept.txt"
    instance = c.get(f"/api/threads/{thread}/computer").json()
    assert instance["persistent"] is True

    stopped = c.post(f"/api/agents/{agent}/computer-instances/{instance['id']}/stop")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "stopped"

    events = _exec(c, agent, instance["id"], "cat notes/kept.txt; echo; pwd")
    assert events[0].event == "exec_started"
    assert "".join(e.data["data"] for e in events if e.event == "stdout") == (
        "still here\n/workspace\n"
    )
    assert events[-1].event == "exit"
    assert events[-1].data["exit_code"] == 0
    after = c.get(f"/api/threads/{thread}/computer").json()
    assert (after["id"], after["status"], after["state_lost"]) == (instance["id"], "idle", False)


def _out(events: list[Any], stream: str) -> str:
    return "".join(e.data["data"] for e in events if e.event == stream)


def test_what_breaks_out_fails_inside_the_sandbox_and_the_service_is_unharmed(
    c: httpx.Client, pg_url: str
) -> None:
    """The database on 127.0.0.1:5432, a write outside the workspace, a fork bomb
    and an allocation past the memory limit: each fails inside the sandbox, and the
    service answers as before."""
    agent = _agent(c)
    small = c.put(f"/api/agents/{agent}/computer", json={"enabled": True, "memoryMb": 256})
    assert small.status_code == 200, small.text
    thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]
    _turn(c, thread, "call computer_exec " + json.dumps({"command": "true"}))
    instance = c.get(f"/api/threads/{thread}/computer").json()["id"]

    def run(command: str) -> tuple[int | None, str, str]:
        events = _exec(c, agent, instance, command)
        assert events[-1].event == "exit", events
        return events[-1].data["exit_code"], _out(events, "stdout"), _out(events, "stderr")

    # the database the service itself uses: no route to it (no network at all)
    reach = (
        'python3 -c "import socket; s = socket.socket(); s.settimeout(3); '
        "s.connect(('127.0.0.1', 5432)); print('connected')\""
    )
    code, out, err = run(reach)
    assert code != 0
    assert "connected" not in out
    assert "Connection refused" in err or "unreachable" in err.lower(), err
    # outside the workspace: the system is read-only, the host's folders are not there
    for target in ("/usr/owned", "/etc/owned", "/root/owned", "/opt/owned"):
        code, out, err = run(f"echo x > {target} && echo wrote")
        assert code != 0, target
        assert "wrote" not in out
    assert not Path("/opt/owned").exists()
    # a fork bomb meets the process limit, and the command ends
    code, out, err = run(
        'python3 -c "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n'
        "            import time; time.sleep(5); os._exit(0)\n        n += 1\n"
        "except OSError as e:\n    print('stopped after', n, e.errno)\n\""
    )
    assert "stopped after" in out, (out, err)
    assert int(out.split()[2]) < 200
    # memory past the limit (256 MB): the allocation fails
    code, out, err = run("python3 -c \"b = bytearray(512 * 1024 * 1024); print('allocated')\"")
    assert code != 0
    assert "allocated" not in out
    assert "MemoryError" in err
    # the service is unharmed: it answers, and the computer still runs commands
    assert c.get("/healthz").status_code == 200
    code, out, _ = run("echo fine")
    assert (code, out) == (0, "fine\n")
    events = _turn(c, thread, "call computer_exec " + json.dumps({"command": "echo again"}))
    [result] = [e.data for e in events if e.event == "tool_result"]
    assert result["result"].startswith("exit code 0\nstdout:\nagain\n"), result
