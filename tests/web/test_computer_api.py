"""An agent's computer through the app (memory and PostgreSQL): its configuration
(``GET/PUT /api/agents/{id}/computer``), the computer tools in a turn of the local
model, the instances, an operator's command streamed as SSE, stop, destroy, the
thread's instance, the limits, roles, and the 503 of a service without the
provider (the harness's sandboxes are tests/fakes/sandbox.py's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from litestar.testing import TestClient

from tests.sse import names, parse
from tests.web.conftest import bearer, make_jwt
from tests.web.harness import SharedHarness

H = dict[str, str]

DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "provider": None,
    "persistent": True,
    "scope": "thread",
    "idle_timeout_s": 7200,
    "exec_timeout_s": 60,
    "memory_mb": 512,
    "network": "none",
    "allowed_hosts": [],
    "require_approval": [],
    "effective_provider": "local",
}
INSTANCE_FIELDS = {
    "id",
    "agent_id",
    "thread_id",
    "provider",
    "status",
    "persistent",
    "created_at",
    "last_used_at",
    "disk_bytes",
    "state_lost",
    "error",
}


def _agent(c: TestClient[Any], auth: H, **body: Any) -> str:
    r = c.post("/api/agents", json={"name": "Worker", **body}, headers=auth)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _turn(c: TestClient[Any], auth: H, thread: str, content: str) -> str:
    r = c.post(f"/api/threads/{thread}/messages", json={"content": content}, headers=auth)
    assert r.status_code == 200, r.text
    return "".join(e.data.get("delta", "") for e in parse(r.text) if e.event == "token")


def _conforms(doc: dict[str, Any], events: list[Any]) -> None:
    """Each event of an operator's command as the document describes it: its SSE
    fields, and its data against the component its ``contentSchema`` names."""
    path = "/api/agents/{agent_id}/computer-instances/{instance_id}/exec"
    media = doc["paths"][path]["post"]["responses"]["200"]["content"]["text/event-stream"]
    documented = {b["properties"]["event"]["const"]: b for b in media["schema"]["oneOf"]}
    assert set(documented) == {"exec_started", "stdout", "stderr", "exit"}
    for event in events:
        branch = documented[event.event]
        envelope = {"event": event.event, "id": str(event.id), "data": json.dumps(event.data)}
        Draft202012Validator(branch).validate(envelope)
        ref = branch["properties"]["data"]["contentSchema"]["$ref"]
        Draft202012Validator(
            {"components": doc["components"], "$ref": ref},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        ).validate(event.data)


def _exec_call(command: str) -> str:
    return "call computer_exec " + json.dumps({"command": command})


def test_the_configuration_defaults_put_and_bounds(
    harness: SharedHarness, auth: H, org_id: str
) -> None:
    with harness.client() as c:
        agent = _agent(c, auth)
        got = c.get(f"/api/agents/{agent}/computer", headers=auth)
        assert got.status_code == 200, got.text
        body = got.json()
        assert body == {
            **DEFAULTS,
            "agent_id": agent,
            "org_id": org_id,
            "available_providers": ["e2b", "local"],
        }
        put = c.put(
            f"/api/agents/{agent}/computer",
            json={
                "enabled": True,
                "scope": "agent",
                "idleTimeoutS": 600,
                "network": "allowlist",
                "allowedHosts": ["PyPI.org"],
            },
            headers=auth,
        )
        assert put.status_code == 200, put.text
        assert put.json()["allowed_hosts"] == ["pypi.org"]
        assert put.json()["idle_timeout_s"] == 600
        again = c.get(f"/api/agents/{agent}/computer", headers=auth).json()
        assert (again["enabled"], again["scope"], again["exec_timeout_s"]) == (True, "agent", 60)
        for bad in (
            {"execTimeoutS": 0},
            {"idleTimeoutS": 59},
            {"memoryMb": 16385},
            {"provider": "docker"},
            {"scope": "org"},
            {"allowedHosts": ["https://pypi.org/simple"]},
        ):
            r = c.put(f"/api/agents/{agent}/computer", json=bad, headers=auth)
            assert r.status_code == 422, (bad, r.text)
            assert r.json()["error"] == "VALIDATION_ERROR"
        hosts = c.put(
            f"/api/agents/{agent}/computer", json={"allowedHosts": ["10.0.0.1"]}, headers=auth
        )
        assert "allowedHosts" in hosts.json()["detail"]
        missing = c.get("/api/agents/00000000-0000-4000-8000-000000000000/computer", headers=auth)
        assert missing.status_code == 404


def test_the_runtime_provider_picks_the_effective_provider(harness: SharedHarness, auth: H) -> None:
    with harness.client() as c:
        agent = _agent(c, auth, runtimeProvider="alternative")
        url = f"/api/agents/{agent}/computer"
        assert c.get(url, headers=auth).json()["effective_provider"] == "e2b"
        named = c.put(url, json={"provider": "local"}, headers=auth).json()
        assert (named["provider"], named["effective_provider"]) == ("local", "local")


def test_a_turn_runs_python_on_the_computer_and_an_operator_uses_the_instance(
    harness: SharedHarness, auth: H
) -> None:
    with harness.mcp_client() as c:
        agent = _agent(c, auth)
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        none = c.get(f"/api/threads/{thread}/computer", headers=auth)
        assert none.status_code == 404
        off = _turn(c, auth, thread, _exec_call("python3 -c 'print(6 * 7)'"))
        assert off.startswith("You said")  # not offered while off: no call
        c.put(f"/api/agents/{agent}/computer", json={"enabled": True}, headers=auth)
        said = _turn(c, auth, thread, _exec_call("python3 -c 'print(6 * 7)'"))
        assert said.startswith("The tool computer_exec returned: exit code 0")
        assert "stdout:\n42" in said

        instance = c.get(f"/api/threads/{thread}/computer", headers=auth)
        assert instance.status_code == 200, instance.text
        first = instance.json()
        assert set(first) == INSTANCE_FIELDS  # never the provider's ref
        assert (first["thread_id"], first["status"], first["provider"]) == (thread, "idle", "local")
        listed = c.get(f"/api/agents/{agent}/computer-instances", headers=auth).json()
        assert [i["id"] for i in listed] == [first["id"]]

        base = f"/api/agents/{agent}/computer-instances/{first['id']}"
        r = c.post(f"{base}/exec", json={"command": "echo out; echo err >&2; exit 4"}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        events = parse(r.text)
        assert names(events)[0] == "exec_started"
        assert names(events)[-1] == "exit"
        assert events[0].data == {
            "instance_id": first["id"],
            "command": "echo out; echo err >&2; exit 4",
        }
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert "".join(e.data["data"] for e in events if e.event == "stdout") == "out\n"
        assert "".join(e.data["data"] for e in events if e.event == "stderr") == "err\n"
        assert events[-1].data["exit_code"] == 4
        assert events[-1].data["timed_out"] is False
        _conforms(c.get("/schema/openapi.json").json(), events)

        # a file written, the instance stopped, and the file there after the resume
        c.post(f"{base}/exec", json={"command": "echo kept > keep.txt"}, headers=auth)
        stopped = c.post(f"{base}/stop", headers=auth)
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["status"] == "stopped"
        back = parse(c.post(f"{base}/exec", json={"command": "cat keep.txt"}, headers=auth).text)
        assert [e.data["data"] for e in back if e.event == "stdout"] == ["kept\n"]

        gone = c.delete(base, headers=auth)
        assert (gone.status_code, gone.json()) == (200, {"ok": True})
        assert c.get(f"/api/threads/{thread}/computer", headers=auth).status_code == 404
        assert c.post(f"{base}/exec", json={"command": "true"}, headers=auth).status_code == 404
        listed = c.get(f"/api/agents/{agent}/computer-instances", headers=auth).json()
        assert [i["status"] for i in listed] == ["destroyed"]


def test_members_read_and_admins_act(harness: SharedHarness, auth: H, org_id: str) -> None:
    with harness.mcp_client() as c:
        agent = _agent(c, auth)
        c.put(
            f"/api/agents/{agent}/computer", json={"enabled": True, "scope": "agent"}, headers=auth
        )
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        _turn(c, auth, thread, _exec_call("true"))
        [instance] = c.get(f"/api/agents/{agent}/computer-instances", headers=auth).json()
        member = bearer(make_jwt("member-1", org_id))
        assert c.get(f"/api/agents/{agent}/computer", headers=member).status_code == 200
        assert c.get(f"/api/agents/{agent}/computer-instances", headers=member).status_code == 200
        base = f"/api/agents/{agent}/computer-instances/{instance['id']}"
        for r in (
            c.put(f"/api/agents/{agent}/computer", json={"enabled": False}, headers=member),
            c.post(f"{base}/exec", json={"command": "true"}, headers=member),
            c.post(f"{base}/stop", headers=member),
            c.delete(base, headers=member),
        ):
            assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), r.text
        other = bearer(make_jwt("admin-2", "another-org", role="admin"))
        assert c.get(f"/api/agents/{agent}/computer-instances", headers=other).status_code == 404
        assert c.post(f"{base}/stop", headers=other).status_code == 404
        assert c.get(f"/api/threads/{thread}/computer", headers=other).status_code == 404


def test_an_operators_commands_are_limited_per_agent(harness: SharedHarness, auth: H) -> None:
    with harness.mcp_client() as c:
        agent = _agent(c, auth)
        c.put(
            f"/api/agents/{agent}/computer", json={"enabled": True, "scope": "agent"}, headers=auth
        )
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        _turn(c, auth, thread, _exec_call("true"))  # one of the minute's 60
        [instance] = c.get(f"/api/agents/{agent}/computer-instances", headers=auth).json()
        base = f"/api/agents/{agent}/computer-instances/{instance['id']}"
        # the budget refills one a second while the commands run: the refusal comes
        # after the 60 at once and what refilled meanwhile, not before
        ran = 0
        while (
            r := c.post(f"{base}/exec", json={"command": "true"}, headers=auth)
        ).status_code == 200:
            ran += 1
            assert ran < 90, "no limit"
        assert ran >= 59
        assert r.status_code == 429, r.text
        assert r.json()["error"] == "RATE_LIMITED"
        assert int(r.headers["Retry-After"]) >= 1
        empty = c.post(f"{base}/exec", json={"command": ""}, headers=auth)
        assert empty.status_code == 422, empty.text


def test_without_a_provider_the_computer_says_what_to_install(
    harness: SharedHarness, auth: H
) -> None:
    """Neither provider can serve (no bubblewrap here, no E2B key): none is offered,
    and the model is told what to install."""
    install = "the local sandbox needs bubblewrap: install it (apt-get install bubblewrap)"
    with harness.mcp_client() as client:
        harness.sandboxes["local"].lacks = install
        harness.sandboxes["e2b"].lacks = "E2B is not configured: set AGENTSVC_E2B_API_KEY"
        try:
            agent = _agent(client, auth)
            config = client.put(
                f"/api/agents/{agent}/computer", json={"enabled": True}, headers=auth
            )
            assert config.json()["available_providers"] == []
            thread = client.post("/api/threads", json={"agentId": agent}, headers=auth).json()
            said = _turn(client, auth, thread["id"], _exec_call("true"))
            assert said.startswith(f"The tool computer_exec returned: error: {install}"), said
            instances = client.get(f"/api/agents/{agent}/computer-instances", headers=auth)
            assert instances.json() == []
            thread_computer = client.get(f"/api/threads/{thread['id']}/computer", headers=auth)
            assert thread_computer.status_code == 404
        finally:
            harness.sandboxes["local"].lacks = None
            harness.sandboxes["e2b"].lacks = None


def test_the_registry_offers_the_providers_that_can_serve(tmp_path: Path) -> None:
    """The real registry: both providers always there; E2B offered only with its key,
    the local one only with bubblewrap (here: a program that does not exist)."""
    from agentsvc_adapters.outbound import OutboundGuard  # noqa: PLC0415
    from agentsvc_adapters.sandboxes.registry import providers  # noqa: PLC0415

    guard = OutboundGuard(allow_private_network=False)
    made = providers({"AGENTSVC_SANDBOX_LOCAL_BWRAP": "/nonexistent/bwrap"}, guard, tmp_path)
    assert sorted(made) == ["e2b", "local"]
    assert "bubblewrap" in (made["local"].missing() or "")
    assert "AGENTSVC_E2B_API_KEY" in (made["e2b"].missing() or "")
    keyed = providers({"AGENTSVC_E2B_API_KEY": "e2b_test"}, guard, tmp_path)
    assert keyed["e2b"].missing() is None


def test_a_missing_provider_is_503_and_a_gone_sandbox_409() -> None:
    from agentsvc_core.ports.sandboxes import SandboxGone, SandboxUnavailable  # noqa: PLC0415
    from agentsvc_web.errors import EXCEPTION_HANDLERS  # noqa: PLC0415

    unavailable = EXCEPTION_HANDLERS[SandboxUnavailable](None, SandboxUnavailable("install x"))
    assert unavailable.status_code == 503
    assert (unavailable.content.error, unavailable.content.detail) == ("UNAVAILABLE", "install x")
    assert "Retry-After" not in (unavailable.headers or {})
    gone = EXCEPTION_HANDLERS[SandboxGone](None, SandboxGone("sandbox s is gone"))
    assert (gone.status_code, gone.content.error) == (409, "SANDBOX_GONE")


def test_deleting_an_agent_removes_its_sandboxes(harness: SharedHarness, auth: H) -> None:
    with harness.mcp_client() as c:
        agent = _agent(c, auth)
        c.put(f"/api/agents/{agent}/computer", json={"enabled": True}, headers=auth)
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        local = harness.sandboxes["local"]  # the process's: other tests' calls are there too
        seen = len(local.calls)
        _turn(c, auth, thread, _exec_call("echo kept > f"))
        [ref] = {ref for name, ref in local.calls[seen:] if name == "exec"}
        assert (local.root / ref / "f").exists()
        seen = len(local.calls)
        assert c.delete(f"/api/agents/{agent}", headers=auth).status_code == 200
        assert local.calls[seen:] == [("destroy", ref)]
        assert not (local.root / ref).exists()
        assert c.get(f"/api/agents/{agent}/computer-instances", headers=auth).status_code == 404


def test_nothing_is_served_under_api_internal(client: TestClient[Any], auth: H) -> None:
    """No runtime calls back (docs/security.md): /api/internal/ has no route, for any
    credential."""
    for headers in ({}, auth):
        for method in ("GET", "POST"):
            r = client.request(method, "/api/internal/sandboxes/callback", headers=headers)
            assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")


def test_the_computer_tools_it_names_wait_for_approval(harness: SharedHarness, auth: H) -> None:
    """docs/tools.md, "Approval before a call": ``requireApproval`` in the configuration."""
    with harness.mcp_client() as c:
        agent = _agent(c, auth)
        path = f"/api/agents/{agent}/computer"
        bad = c.put(path, json={"requireApproval": ["computer_reboot"]}, headers=auth)
        assert bad.status_code in (400, 422), bad.text
        r = c.put(
            path,
            json={"enabled": True, "requireApproval": ["computer_exec", "computer_exec"]},
            headers=auth,
        )
        assert r.status_code == 200, r.text
        assert r.json()["require_approval"] == ["computer_exec"]
        thread = c.post("/api/threads", json={"agentId": agent}, headers=auth).json()["id"]
        send = f"/api/threads/{thread}/messages"
        r = c.post(send, json={"content": _exec_call("echo ran > ran.txt")}, headers=auth)
        events = parse(r.text)
        assert names(events) == ["meta", "requires_action", "done"]
        [waiting] = events[1].data["toolCalls"]
        assert (waiting["kind"], waiting["name"]) == ("approval", "computer_exec")
        # nothing ran: no instance was even made
        assert c.get(f"/api/threads/{thread}/computer", headers=auth).status_code == 404

        denied = {"toolCallId": waiting["id"], "approved": False, "reason": "not today"}
        r = c.post(send, json={"content": "", "toolApprovals": [denied]}, headers=auth)
        assert "tool_call" not in names(parse(r.text))
        assert c.get(f"/api/threads/{thread}/computer", headers=auth).status_code == 404
        # reading needs no approval
        said = _turn(c, auth, thread, 'call computer_list_files {"path": "."}')
        assert said.startswith("The tool computer_list_files returned")
