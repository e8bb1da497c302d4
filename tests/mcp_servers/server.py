"""A small MCP server for the MCP client's tests, written with the SDK's ``MCPServer``.

Tools: ``echo``, ``add``, ``slow``, ``fail`` (raises: an ``isError`` result),
``whoami`` (the ``X-Test-Identity`` header, or the one its ``header`` argument
names, it received over HTTP, else the
``TEST_IDENTITY`` environment variable), ``protocol_error`` (a JSON-RPC error, not
a result), ``env_dump`` (the names of its
environment variables), ``stats`` (how many ``initialize`` requests this process
has answered, and its pid), ``picture`` (an image block), and ``shaped`` and
``lookahead`` (``{"x": value}`` as structured content, under an ``outputSchema``
whose pattern is hostile: ``^(a+)+$``, which a backtracking engine takes time
exponential in the length of ``"aaaa…a!"`` to refuse, and ``^(?=a)``, which RE2
cannot compile).

Run over stdio with ``python -m tests.mcp_servers.server``, over HTTP with
``python -m tests.mcp_servers.server streamable_http|sse PORT [TOKEN]``.
``HttpMcpServer`` runs the latter on 127.0.0.1 in a child process (so the
server's own teardown cannot leak into the test process), optionally behind a
bearer-token gate that answers 401 with an RFC 9728 ``resource_metadata``
challenge; ``GET /stats`` (never gated) reports its initialize count. It can be
killed and started again on the same port.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import uvicorn
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Stats:
    """Counts the ``initialize`` requests a server answered and the tool calls it is
    running now (a ServerMiddleware)."""

    def __init__(self) -> None:
        self.initializations = 0
        self.calls_running = 0

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            self.initializations += 1
        if ctx.method != "tools/call":
            return await call_next(ctx)
        self.calls_running += 1
        try:
            return await call_next(ctx)
        finally:
            self.calls_running -= 1


HOSTILE_PATTERNS = {"shaped": "^(a+)+$", "lookahead": "^(?=a)"}


def shaped_tool(name: str, pattern: str) -> Tool:
    """A tool answering ``{"x": value}`` whose listed ``outputSchema`` asks ``x`` to
    match ``pattern``. The schema is set by hand, with no model behind it, so the
    server sends the result as it is and only the client checks it."""

    def shaped(value: str) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=value)], structured_content={"x": value}
        )

    tool = Tool.from_function(shaped, name=name, description=f"x must match {pattern}")
    tool.fn_metadata.output_schema = {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": pattern}},
        "required": ["x"],
    }
    return tool


def build_server(counter: Stats) -> MCPServer:
    server = MCPServer(
        "agentsvc-test-server",
        middleware=[counter],
        log_level="CRITICAL",
        tools=[shaped_tool(n, p) for n, p in HOSTILE_PATTERNS.items()],
    )

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def fail() -> str:
        """Always raises."""
        raise RuntimeError("this tool always fails")

    @server.tool()
    def protocol_error(message: str) -> str:
        """Answers a JSON-RPC error instead of a result."""
        raise MCPError(INVALID_PARAMS, message)

    @server.tool()
    def whoami(ctx: Context, header: str = "x-test-identity") -> str:
        """The X-Test-Identity header (or the one named, e.g. traceparent) over HTTP,
        the TEST_IDENTITY variable over stdio."""
        headers = ctx.headers
        if headers is not None and header.lower() in headers:
            return headers[header.lower()]
        return os.environ.get("TEST_IDENTITY", "")

    @server.tool()
    def env_dump() -> list[str]:
        """The names of this process's environment variables."""
        return sorted(os.environ)

    @server.tool()
    def stats() -> dict[str, int]:
        """How many initialize requests this process answered, and its pid."""
        return {"initializations": counter.initializations, "pid": os.getpid()}

    # two tools named like GitHub's remote MCP server's, for the managed provider's
    # tests (a "github" provider pointed here: its services own them)
    @server.tool()
    def get_me() -> str:
        """The user (a GitHub-named tool)."""
        return "octocat"

    @server.tool()
    def list_issues(repo: str = "") -> str:
        """Issues of a repository (a GitHub-named tool)."""
        return f"no open issues in {repo or 'any repository'}"

    @server.tool()
    def picture() -> Image:
        """A tiny PNG."""
        return Image(data=PNG, format="png")

    return server


class BearerGate:
    """ASGI wrapper: without ``Authorization: Bearer <token>`` answer 401 with a challenge."""

    def __init__(self, app: Any, token: str, metadata_url: str) -> None:
        self.app = app
        self.token = token
        self.metadata_url = metadata_url

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/stats":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                challenge = f'Bearer resource_metadata="{self.metadata_url}"'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"www-authenticate", challenge.encode()),
                            (b"content-type", b"application/json"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
                return
        await self.app(scope, receive, send)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_http(transport: str, port: int, token: str | None) -> None:
    """Serve the test server over HTTP on 127.0.0.1:port until killed."""
    counter = Stats()
    mcp = build_server(counter)

    @mcp.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse(
            {
                "initializations": counter.initializations,
                "callsRunning": counter.calls_running,
                "pid": os.getpid(),
            }
        )

    # Tests reach the server under other names too (a fake resolver maps them here).
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: Any = (
        mcp.streamable_http_app(transport_security=security)
        if transport == "streamable_http"
        else mcp.sse_app(transport_security=security)
    )
    if token is not None:
        metadata = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource"
        app = BearerGate(app, token, metadata)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", ws="none")


class HttpMcpServer:
    """The test server over HTTP in a child process; ``stop()``/``start()`` keep the port."""

    def __init__(
        self, transport: Literal["streamable_http", "sse"], token: str | None = None
    ) -> None:
        self.transport = transport
        self.token = token
        self.port = _free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp" if self.transport == "streamable_http" else f"{self.base}/sse"

    @property
    def metadata_url(self) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource"

    @property
    def initializations(self) -> int:
        """How many sessions this server process has initialized."""
        return int(httpx.get(f"{self.base}/stats", timeout=5).json()["initializations"])

    @property
    def calls_running(self) -> int:
        """How many tool calls this server process is running now."""
        return int(httpx.get(f"{self.base}/stats", timeout=5).json()["callsRunning"])

    def start(self) -> None:
        args = [sys.executable, "-m", "tests.mcp_servers.server", self.transport, str(self.port)]
        if self.token is not None:
            args.append(self.token)
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        self._proc = subprocess.Popen(args, env=env, cwd=root, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"{self.base}/stats", timeout=1)
                return
            except httpx.TransportError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the test MCP server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(timeout=10)
            self._proc = None


if __name__ == "__main__":
    if len(sys.argv) > 1:
        serve_http(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        build_server(Stats()).run()
