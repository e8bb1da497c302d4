"""MCP tools in a conversation, end to end: the real service process, the real MCP
client, a real MCP server over streamable HTTP and over stdio (tests/mcp_servers)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, running
from tests.mcp_servers.server import HttpMcpServer
from tests.sse import names, parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

SECRET = "identity-from-a-sealed-header"


@pytest.fixture(scope="module")
def svc(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[str, str]]]:
    tmp_path = tmp_path_factory.mktemp("mcp")
    key = f"ask_e2e_{uuid.uuid4().hex}"
    env = {
        "AGENTSVC_DATABASE_URL": pg_url,
        "AGENTSVC_BOOTSTRAP_API_KEY": key,
        "AGENTSVC_BOOTSTRAP_ORG": f"mcp-{uuid.uuid4().hex[:8]}",
        "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
        "AGENTSVC_ALLOW_STDIO_MCP": "true",
        "AGENTSVC_DATA_DIR": str(tmp_path / "data"),
    }
    with running(env, log=tmp_path / "svc.log") as service:
        yield service, {"Authorization": f"Bearer {key}"}
        assert SECRET not in service.output()


def converse(c: httpx.Client, server: dict[str, Any], content: str) -> list[Any]:
    assert c.post(f"/api/mcps/{server['id']}/test").json()["ok"] is True
    agent = c.post("/api/agents", json={"name": "Tool user"}).json()
    c.post(f"/api/agents/{agent['id']}/mcps", json={"mcpServerId": server["id"]})
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def test_mcp_tool_over_streamable_http(svc: tuple[Service, dict[str, str]]) -> None:
    service, h = svc
    # the test server's whoami tool answers the header it received, into the reply
    SCAN.allow(SECRET, "/messages")
    mcp = HttpMcpServer("streamable_http")
    mcp.start()
    try:
        with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
            server = c.post(
                "/api/mcps",
                json={
                    "name": "Test Tools",
                    "transport": "streamable_http",
                    "url": mcp.url,
                    "credentials": {"headers": {"X-Test-Identity": SECRET}},
                },
            ).json()
            events = converse(c, server, 'call test-tools__echo {"text": "hello over http"}')
            assert names(events)[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
            assert events[3].data["result"] == "hello over http"
            assert "hello over http" in events[-1].data["content"]
            # the sealed header reached the server, and only the server
            events = converse(c, server, "call test-tools__whoami")
            assert next(e for e in events if e.event == "tool_result").data["result"] == SECRET
    finally:
        mcp.stop()


def test_mcp_tool_over_stdio(svc: tuple[Service, dict[str, str]]) -> None:
    service, h = svc
    SCAN.not_secret(str(Path.cwd()))  # PYTHONPATH, among the env, is no secret
    SCAN.allow("from-sealed-env", "/messages")  # whoami echoes it into the reply
    with httpx.Client(base_url=service.url, headers=h, timeout=60) as c:
        server = c.post(
            "/api/mcps",
            json={
                "name": "Local Tools",
                "transport": "stdio",
                "command": sys.executable,
                "args": ["-m", "tests.mcp_servers.server"],
                "credentials": {
                    "env": {"TEST_IDENTITY": "from-sealed-env", "PYTHONPATH": str(Path.cwd())}
                },
            },
        ).json()
        events = converse(c, server, 'call local-tools__add {"a": 2, "b": 40}')
        assert next(e for e in events if e.event == "tool_result").data["result"] in ("42", "42.0")
        assert "42" in events[-1].data["content"]
        events = converse(c, server, "call local-tools__whoami")
        assert (
            next(e for e in events if e.event == "tool_result").data["result"] == "from-sealed-env"
        )
