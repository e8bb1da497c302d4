"""``SdkMcpClient`` against real MCP servers: the test server of ``tests.mcp_servers``
over streamable HTTP, SSE and stdio, and the reference ``mcp-server-time`` (PyPI)
over stdio. Plus the address guard, on strings and at connect time (a fake resolver
maps test names to 127.0.0.1; no traffic leaves this machine)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Literal

import mcp_types as types
import msgspec
import pytest
from mcp.client.stdio import get_default_environment

from agentsvc_adapters.mcp.child_output import MAX_LINE_BYTES, MAX_LINES
from agentsvc_adapters.mcp.client import SdkMcpClient, result_text
from agentsvc_core.errors import McpAuthRequired, Upstream
from agentsvc_core.ports.mcp import McpEndpoint, Transport
from tests.mcp_servers.server import HttpMcpServer
from tests.outbound import fake_dns

ROOT = Path(__file__).resolve().parents[2]
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
TOOLS = {
    *("echo", "add", "slow", "fail", "protocol_error", "whoami", "env_dump", "stats", "picture"),
    *("shaped", "lookahead", "get_me", "list_issues"),
}


def stdio_endpoint(key: str = "stdio", **env: str) -> McpEndpoint:
    return McpEndpoint(
        key=key,
        transport="stdio",
        command=sys.executable,
        args=("-m", "tests.mcp_servers.server"),
        env={"PYTHONPATH": str(ROOT), **env},
    )


def http_endpoint(server: HttpMcpServer, key: str = "http", **headers: str) -> McpEndpoint:
    return McpEndpoint(key=key, transport=server.transport, url=server.url, headers=headers)


def alive(pid: int) -> bool:
    """Running, or a zombie nobody reaped."""
    return Path(f"/proc/{pid}").exists()


def children() -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


async def pid_of(client: SdkMcpClient, endpoint: McpEndpoint) -> int:
    return int(json.loads((await client.call_tool(endpoint, "stats", {})).text)["pid"])


async def wait_until(condition: Callable[[], bool], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def client() -> AsyncIterator[SdkMcpClient]:
    c = SdkMcpClient(allow_stdio=True, allow_private_network=True, connect_timeout_s=10)
    yield c
    await c.aclose()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, HttpMcpServer]]:
    """One server process per HTTP transport, shared: tests count initializations
    as differences."""
    started = {t: HttpMcpServer(t) for t in ("streamable_http", "sse")}
    try:
        for srv in started.values():
            srv.start()
        yield started
    finally:
        for srv in started.values():
            srv.stop()


@pytest.fixture(params=["streamable_http", "sse"])
def server(request: pytest.FixtureRequest, servers: dict[str, HttpMcpServer]) -> HttpMcpServer:
    return servers[request.param]


@pytest.fixture
def streamable(servers: dict[str, HttpMcpServer]) -> HttpMcpServer:
    return servers["streamable_http"]


# --- the three transports ----------------------------------------------------


async def test_http_list_call_headers_and_reuse(
    client: SdkMcpClient, server: HttpMcpServer
) -> None:
    ep = http_endpoint(server, **{"X-Test-Identity": "alice"})
    before = server.initializations
    tools = {t.name: t for t in await client.list_tools(ep)}
    assert set(tools) >= TOOLS
    assert tools["add"].input_schema["properties"].keys() == {"a", "b"}
    assert tools["echo"].description == "Return the text unchanged."
    assert (await client.call_tool(ep, "echo", {"text": "hi"})).text == "hi"
    assert (await client.call_tool(ep, "add", {"a": 1, "b": 2})).text == "3.0"
    assert (await client.call_tool(ep, "whoami", {})).text == "alice"
    assert (await client.call_tool(ep, "picture", {})).text == "[image/png]"
    failed = await client.call_tool(ep, "fail", {})
    assert failed.is_error
    assert "fail" in failed.text
    assert server.initializations == before + 1  # one session for all the calls above
    # Concurrent first uses of a new endpoint share one session too.
    fresh = http_endpoint(server, key="fresh")
    texts = await asyncio.gather(
        *(client.call_tool(fresh, "echo", {"text": "x"}) for _ in range(5))
    )
    assert {t.text for t in texts} == {"x"}
    assert server.initializations == before + 2


async def test_stdio_list_call_env_isolation_and_reuse(
    client: SdkMcpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSVC_FAKE_SECRET", "do-not-leak")
    ep = stdio_endpoint(TEST_IDENTITY="bob")
    assert {t.name for t in await client.list_tools(ep)} >= TOOLS
    assert (await client.call_tool(ep, "whoami", {})).text == "bob"
    assert (await client.call_tool(ep, "add", {"a": 2, "b": 3})).text == "5.0"
    assert (await client.call_tool(ep, "fail", {})).is_error
    names = set((await client.call_tool(ep, "env_dump", {})).text.splitlines())
    assert "AGENTSVC_FAKE_SECRET" not in names
    assert {"TEST_IDENTITY", "PYTHONPATH"} <= names
    # The SDK's safe defaults, the endpoint's env, and what Python adds itself.
    assert names <= set(get_default_environment()) | set(ep.env) | {"LC_CTYPE"}
    stats = [await client.call_tool(ep, "stats", {}) for _ in range(3)]
    assert len({s.text for s in stats}) == 1  # same process, one initialize
    assert '"initializations":1' in stats[0].text.replace(" ", "")


async def test_reference_time_server_over_stdio(client: SdkMcpClient) -> None:
    assert TIME_SERVER.exists(), "dev dependency missing: pip install mcp-server-time==2026.10.19"
    ep = McpEndpoint(
        key="time", transport="stdio", command=str(TIME_SERVER), args=("--local-timezone", "UTC")
    )
    tools = {t.name for t in await client.list_tools(ep)}
    assert {"get_current_time", "convert_time"} <= tools
    result = await client.call_tool(ep, "get_current_time", {"timezone": "Europe/Paris"})
    assert not result.is_error
    assert "Europe/Paris" in result.text


# --- broken sessions, timeouts, unreachable servers --------------------------


async def test_killed_stdio_server_is_replaced(client: SdkMcpClient) -> None:
    ep = stdio_endpoint()
    first = await pid_of(client, ep)
    os.kill(first, signal.SIGKILL)
    assert {t.name for t in await client.list_tools(ep)} >= TOOLS
    second = await pid_of(client, ep)
    assert second != first
    await wait_until(lambda: not alive(first))


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_restarted_http_server_is_recovered(
    client: SdkMcpClient, transport: Literal["streamable_http", "sse"]
) -> None:
    server = HttpMcpServer(transport)
    server.start()
    try:
        ep = http_endpoint(server)
        await client.list_tools(ep)
        server.stop()
        started = time.monotonic()
        with pytest.raises(Upstream) as caught:
            await client.call_tool(ep, "echo", {"text": "nobody home"})
        assert caught.value.code == "MCP_UNAVAILABLE"
        assert time.monotonic() - started < 3
        server.start()
        assert {t.name for t in await client.list_tools(ep)} >= TOOLS
        assert (await client.call_tool(ep, "echo", {"text": "again"})).text == "again"
        assert server.initializations == 1
    finally:
        await client.aclose()
        server.stop()


async def test_slow_call_times_out_without_blocking_others(server: HttpMcpServer) -> None:
    client = SdkMcpClient(allow_private_network=True, call_timeout_s=1.0)
    try:
        ep = http_endpoint(server)
        before = server.initializations
        await client.list_tools(ep)
        running = server.calls_running
        slow = asyncio.create_task(client.call_tool(ep, "slow", {"seconds": 10}))
        await wait_until(lambda: server.calls_running == running + 1)  # the server runs it
        started = time.monotonic()
        assert (await client.call_tool(ep, "echo", {"text": "quick"})).text == "quick"
        assert not slow.done()  # the fast call went past the slow one
        assert time.monotonic() - started < 0.8
        with pytest.raises(Upstream) as caught:
            await slow
        assert caught.value.code == "MCP_TIMEOUT"
        assert "timed out" in caught.value.detail
        # The session survives a timed-out call.
        assert (await client.call_tool(ep, "echo", {"text": "still"})).text == "still"
        assert server.initializations == before + 1
    finally:
        await client.aclose()


async def test_unreachable_server_fails_fast(client: SdkMcpClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    ep = McpEndpoint(key="gone", transport="streamable_http", url=f"http://127.0.0.1:{port}/mcp")
    started = time.monotonic()
    with pytest.raises(Upstream) as caught:
        await client.list_tools(ep)
    assert caught.value.code == "MCP_UNAVAILABLE"
    assert time.monotonic() - started < 3
    missing = McpEndpoint(key="nocmd", transport="stdio", command="/nonexistent/mcp-server")
    with pytest.raises(Upstream) as caught:
        await client.call_tool(missing, "x", {})
    assert caught.value.code == "MCP_UNAVAILABLE"
    assert "command not found" in caught.value.detail


async def test_server_that_never_answers_times_out_connecting() -> None:
    client = SdkMcpClient(allow_private_network=True, connect_timeout_s=0.5)
    with socket.socket() as listener:  # accepts TCP connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        ep = McpEndpoint(key="mute", transport="streamable_http", url=url)
        try:
            with pytest.raises(Upstream) as caught:
                await client.list_tools(ep)
        finally:
            await client.aclose()
    assert caught.value.code == "MCP_UNAVAILABLE"
    assert "timed out connecting" in caught.value.detail


async def test_protocol_error_is_mcp_error_and_scrubbed(
    client: SdkMcpClient, streamable: HttpMcpServer
) -> None:
    secret = "s3cret-token-value"
    ep = http_endpoint(streamable, Authorization=f"Bearer {secret}")
    with pytest.raises(Upstream) as caught:
        await client.call_tool(ep, "protocol_error", {"message": f"rejected {secret}"})
    assert caught.value.code == "MCP_ERROR"
    assert "rejected ***" in caught.value.detail
    assert secret not in caught.value.detail
    unknown = await client.call_tool(ep, "no-such-tool", {})  # MCPServer: an isError result
    assert unknown.is_error


async def test_results_are_checked_against_the_output_schema_with_re2(
    client: SdkMcpClient, streamable: HttpMcpServer
) -> None:
    """The SDK would check these with Python's backtracking ``re`` on the event loop:
    a lookahead would pass and ``^(a+)+$`` against 40 a's and a "!" would never end."""
    ep = http_endpoint(streamable)
    with pytest.raises(Upstream) as unsupported:
        await client.call_tool(ep, "lookahead", {"value": "a"})
    assert unsupported.value.code == "MCP_ERROR"
    assert "the outputSchema of tool lookahead" in unsupported.value.detail
    assert "the pattern '^(?=a)' is not supported" in unsupported.value.detail
    assert (await client.call_tool(ep, "shaped", {"value": "aaaa"})).text == "aaaa"
    with pytest.raises(Upstream) as refused:
        await client.call_tool(ep, "shaped", {"value": "a" * 40 + "!"})
    assert refused.value.code == "MCP_ERROR"
    assert "does not fit its outputSchema: x: " in refused.value.detail
    assert "does not match '^(a+)+$'" in refused.value.detail
    # one refused result is not a broken session
    before = streamable.initializations
    assert (await client.call_tool(ep, "echo", {"text": "still here"})).text == "still here"
    assert streamable.initializations == before


# --- what a stdio child prints ------------------------------------------------------

CHILD_SECRET = "sk-child-secret-0123456789"


def chatty_endpoint(key: str, *prints: str) -> McpEndpoint:
    """The test server, after the child has run ``prints`` (Python statements)."""
    script = ";".join(
        ["import os, runpy, sys", "secret = os.environ['API_TOKEN']", *prints, "sys.stderr.flush()"]
    )
    script += ";runpy.run_module('tests.mcp_servers.server', run_name='__main__')"
    ep = stdio_endpoint(key, API_TOKEN=CHILD_SECRET)
    return msgspec.structs.replace(ep, args=("-c", script))


PRINTS_ITS_SECRET = (
    "print('stderr says token=' + secret, file=sys.stderr)",
    "print('stdout says token=' + secret, flush=True)",  # not JSON-RPC
)


# A service whose log is its stderr, as in production: the child's stderr would
# otherwise go there directly (in-process, pytest's capture would hide that).
SERVICE = """
import asyncio, logging, sys
import msgspec
from agentsvc_adapters.mcp.client import SdkMcpClient
from agentsvc_core.ports.mcp import McpEndpoint

logging.basicConfig(level=sys.argv[1], stream=sys.stderr)

async def main():
    client = SdkMcpClient(allow_stdio=True)
    try:
        tools = await client.list_tools(msgspec.json.decode(sys.argv[2], type=McpEndpoint))
        print(len(tools))
    finally:
        await client.aclose()  # the child is gone and its stderr read to the end

asyncio.run(main())
"""


@pytest.mark.parametrize("level", ["DEBUG", "INFO"])
def test_child_output_is_logged_at_debug_only_and_redacted(level: str) -> None:
    endpoint = msgspec.json.encode(chatty_endpoint("chatty", *PRINTS_ITS_SECRET)).decode()
    run = subprocess.run(
        [sys.executable, "-c", SERVICE, level, endpoint],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=ROOT,
    )
    assert run.stdout.strip() == str(len(TOOLS))
    assert CHILD_SECRET[:8] not in run.stderr
    said = [line for line in run.stderr.splitlines() if "says token=" in line]
    name = f"stdio MCP server {os.path.basename(sys.executable)!r}"
    if level == "INFO":
        assert said == []
    else:
        assert sorted(said) == [
            f"DEBUG:agentsvc.mcp.child:{name} stderr: stderr says token=***",
            f"DEBUG:agentsvc.mcp.child:{name} stdout: stdout says token=***",
        ]


async def test_child_output_is_bounded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "agentsvc.mcp.child")
    prints = (
        "print('x' * 2040 + secret + 'y' * 5000, file=sys.stderr)",  # the cut falls in the secret
        "[print('line', i, file=sys.stderr) for i in range(2 * 200)]",
    )
    client = SdkMcpClient(allow_stdio=True)
    try:
        await client.list_tools(chatty_endpoint("bounded", *prints))
    finally:
        await client.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "agentsvc.mcp.child"]
    assert len(lines) == MAX_LINES + 1
    assert lines[-1].endswith("further output is not logged")
    assert lines[0].endswith(": " + "x" * 2040 + "***" + "y" * 5 + " [cut]")
    assert all(len(line) < MAX_LINE_BYTES + 100 for line in lines)
    assert CHILD_SECRET[:4] not in caplog.text


# --- 401, stdio switch, the session pool ---------------------------------------


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_401_asks_for_authorization(
    client: SdkMcpClient, transport: Literal["streamable_http", "sse"]
) -> None:
    srv = HttpMcpServer(transport, token="good-token")
    srv.start()
    try:
        bad = McpEndpoint(key="bad", transport=transport, url=srv.url)
        with pytest.raises(McpAuthRequired) as caught:
            await client.list_tools(bad)
        assert caught.value.code == "MCP_AUTH_REQUIRED"
        assert caught.value.resource_metadata_url == srv.metadata_url
        good = McpEndpoint(
            key="good",
            transport=transport,
            url=srv.url,
            headers={"Authorization": "Bearer good-token"},
        )
        assert (await client.call_tool(good, "echo", {"text": "in"})).text == "in"
    finally:
        await client.aclose()
        srv.stop()


async def test_stdio_is_refused_unless_enabled() -> None:
    before = children()
    client = SdkMcpClient()
    with pytest.raises(Upstream) as caught:
        await client.list_tools(stdio_endpoint())
    assert caught.value.code == "MCP_UNAVAILABLE"
    assert "AGENTSVC_ALLOW_STDIO_MCP" in caught.value.detail
    assert children() == before  # nothing was started
    await client.aclose()


async def test_lru_bound_closes_the_least_recent_session(streamable: HttpMcpServer) -> None:
    client = SdkMcpClient(allow_private_network=True, max_sessions=1)
    try:
        a, b = http_endpoint(streamable, key="a"), http_endpoint(streamable, key="b")
        before = streamable.initializations
        await client.list_tools(a)
        await client.list_tools(b)  # evicts a
        await client.list_tools(a)
        assert streamable.initializations == before + 3
    finally:
        await client.aclose()


async def test_idle_sessions_are_closed(streamable: HttpMcpServer) -> None:
    client = SdkMcpClient(allow_private_network=True, idle_ttl_s=0.3)
    try:
        ep = http_endpoint(streamable, key="idle")
        before = streamable.initializations
        await client.list_tools(ep)
        await client.list_tools(ep)
        assert streamable.initializations == before + 1
        # the reaper closes the idle session (the client's own record of it goes)
        await wait_until(lambda: ep.key not in client._sessions, within_s=5)
        await client.list_tools(ep)
        assert streamable.initializations == before + 2
    finally:
        await client.aclose()


async def test_aclose_stops_every_stdio_server() -> None:
    before = children()
    client = SdkMcpClient(allow_stdio=True)
    pids = await asyncio.gather(
        pid_of(client, stdio_endpoint("one")), pid_of(client, stdio_endpoint("two"))
    )
    assert all(alive(p) for p in pids)
    await client.aclose()
    assert not any(alive(p) for p in pids)  # exited and reaped: no zombies
    assert children() <= before
    with pytest.raises(Upstream):
        await client.list_tools(stdio_endpoint("one"))


# --- the address guard ---------------------------------------------------------


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
@pytest.mark.parametrize(
    "addresses",
    # (a public address among them is tested in test_outbound.py with the dialler
    # replaced: here a broken guard would connect, so every address is a refused one)
    [["127.0.0.1"], ["10.1.2.3"], ["169.254.169.254"], ["10.9.9.9", "192.168.0.7"], ["::1"]],
)
async def test_resolved_address_is_checked_at_connect(
    addresses: list[str], transport: Transport
) -> None:
    # The check runs on every address before any connection: nothing is sent anywhere.
    client = SdkMcpClient(resolver=fake_dns({"mcp.example.test": addresses}))
    ep = McpEndpoint(key="k", transport=transport, url="https://mcp.example.test/mcp")
    try:
        with pytest.raises(Upstream) as caught:
            await client.list_tools(ep)
    finally:
        await client.aclose()
    assert caught.value.code == "MCP_UNAVAILABLE"
    assert "mcp.example.test resolves to" in caught.value.detail


async def test_connection_goes_to_the_resolved_address(server: HttpMcpServer) -> None:
    # Allowed private network: a name only the (fake) resolver knows reaches 127.0.0.1.
    client = SdkMcpClient(
        allow_private_network=True, resolver=fake_dns({"mcp.example.test": ["127.0.0.1"]})
    )
    url = server.url.replace("127.0.0.1", "mcp.example.test")
    try:
        ep = McpEndpoint(key="named", transport=server.transport, url=url)
        assert (await client.call_tool(ep, "echo", {"text": "via dns"})).text == "via dns"
    finally:
        await client.aclose()


async def test_plain_http_and_literal_addresses_are_refused_by_the_client() -> None:
    # the name resolves (in this test only) to loopback: nothing leaves the machine
    client = SdkMcpClient(resolver=fake_dns({"mcp.example.test": ["127.0.0.1"]}))
    for url in ("http://mcp.example.test/mcp", "https://0x7f.1/mcp", "https://[::ffff:127.0.0.1]/"):
        with pytest.raises(Upstream) as caught:
            await client.list_tools(McpEndpoint(key=url, transport="streamable_http", url=url))
        assert caught.value.code == "MCP_UNAVAILABLE"
    await client.aclose()


# --- results ---------------------------------------------------------------------


def test_result_text_renders_every_block() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="one"),
            types.ImageContent(data="", mime_type="image/png"),
            types.ResourceLink(name="f", uri="file:///f.txt"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///g.txt", text="inline")
            ),
        ]
    )
    assert result_text(result) == "one\n[image/png]\n[resource file:///f.txt]\ninline"
    structured = types.CallToolResult(content=[], structured_content={"a": 1, "b": [1, 2]})
    assert result_text(structured) == '{"a":1,"b":[1,2]}'


def test_the_sdk_is_imported_at_the_first_call_not_at_start() -> None:
    """The service's app and the CLI import no MCP SDK until a server is used."""
    probe = (
        "import sys, asyncio\n"
        "import agentsvc_web.app, agentsvc_web.cli\n"
        "from agentsvc_adapters.mcp import SdkMcpClient\n"
        "print(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))\n"
        "client = SdkMcpClient(allow_stdio=False)\n"
        "asyncio.run(client.aclose())\n"
        "print(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))\n"
        "async def use():\n"
        "    try:\n"
        "        await client.list_tools(None)\n"
        "    except Exception:\n"
        "        pass\n"
        "asyncio.run(use())\n"
        "print(any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stdout.split() == ["False", "False", "True"]
