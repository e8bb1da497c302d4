"""``SdkMcpClient``: the ``McpClient`` port over the official MCP Python SDK (2.x).

Transports: streamable HTTP and SSE (``endpoint.headers`` on every request, every
connection through the outbound guard, ``agentsvc_adapters.outbound``) and stdio
(the child gets only ``endpoint.env`` over the SDK's ``get_default_environment()``:
PATH, HOME..., nothing of this service's own environment; what it prints is logged
at DEBUG only, redacted and bounded: ``child_output.py``). The legacy
``initialize`` handshake is used, which every MCP server speaks. A tool's result is
checked against its ``outputSchema`` with patterns in RE2, not by the SDK's
backtracking check (``results.py``).

Session lifecycle
-----------------
One initialized session per ``endpoint.key``, kept in a bounded LRU (at most
``max_sessions``) and reused by every call, so consecutive turns share one server
connection (and one stdio process). The SDK's transports are async context
managers bound to the task that entered them, so each session is owned by one
background task (``_Session.run``): it enters the transport and the
``ClientSession``, initializes, signals ``ready``, then waits for its stop signal;
callers use the ``ClientSession`` from their own tasks (the SDK multiplexes
concurrent requests, so a slow tool never blocks other calls). Closing sets the
stop signal and the same task exits the contexts (HTTP: DELETE of the session;
stdio: stdin closed, then SIGTERM/SIGKILL of the process group), bounded by
``_CLOSE_GRACE_S``; a session still connecting is cancelled instead.

A session dies when its transport ends (stdio child exited, SSE stream dropped,
an HTTP transport error): the SDK dispatcher's receive loop ending marks it dead,
so the next call opens a fresh one. A call that fails because the session broke
is retried once on a fresh session: always for ``list_tools``; for ``call_tool``
only when the request provably did not run (HTTP 404 to our session id, which the
MCP specification defines as "start a new session", or a connection that was never
made).
Sessions unused for ``idle_ttl_s`` are closed by a reaper task; ``aclose()``
closes them all and waits until every background task (so every stdio child,
reaped) is gone. The client belongs to the event loop that first uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from agentsvc_adapters.mcp.child_output import ChildOutput, secret_values, stderr_pipe
from agentsvc_adapters.mcp.results import CheckedSession, ResultRefused
from agentsvc_adapters.outbound import GuardedBackend, Resolver, check_url, guarded_httpx2_client
from agentsvc_core.errors import McpAuthRequired, Upstream
from agentsvc_core.ports.mcp import McpCallResult, McpClient, McpEndpoint, McpTool

__all__ = ["SdkMcpClient"]

log = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_INFO = types.Implementation(name="agentsvc", version="0.1.0")
_CLOSE_GRACE_S = 3.0
_MAX_PAGES = 50
_SSE_READ_TIMEOUT_S = 300.0
_METADATA = re.compile(r'resource_metadata\s*=\s*(?:"([^"]*)"|([^\s,]+))', re.IGNORECASE)


class _Dispatcher(JSONRPCDispatcher):
    """The SDK's dispatcher, marking the session dead when its receive loop ends
    (the transport's read stream closed: stdio child gone, SSE stream dropped...)."""

    def __init__(self, read: Any, write: Any, owner: _Session) -> None:
        output = owner.output
        # a stdio child's stdout lines that are not JSON-RPC: logged by ChildOutput
        hook = None if output is None else output.stdout_error
        super().__init__(read, write, on_stream_exception=hook)
        self._owner = owner

    async def run(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().run(*args, **kwargs)
        finally:
            self._owner.dead = True


class _Session:
    """One server connection, owned by its background task (see the module docstring)."""

    def __init__(self, endpoint: McpEndpoint, owner: SdkMcpClient) -> None:
        self.endpoint = endpoint
        self._owner = owner
        self.session: ClientSession | None = None
        self.backend: GuardedBackend | None = None
        self.output: ChildOutput | None = None  # stdio: what the child prints
        self.error: Exception | None = None
        self.challenge: str | None = None  # WWW-Authenticate of a 401, if one came
        self.unauthorized = False
        self.session_lost = False  # HTTP 404 for our session id: the server forgot it
        self.timed_out = False
        self.dead = False
        self.in_use = 0
        self.last_used = time.monotonic()
        self.ready = anyio.Event()
        self.done = anyio.Event()
        self._stop = anyio.Event()
        self._scope = anyio.CancelScope()

    def close(self) -> None:
        """Ask the owning task to exit (it cancels a session still connecting)."""
        self._stop.set()
        if self.session is None:
            self._scope.cancel()

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.status_code == 401:
            self.unauthorized = True
            self.challenge = response.headers.get("www-authenticate")
        elif response.status_code == 404 and "mcp-session-id" in response.request.headers:
            self.session_lost = True

    async def run(self) -> None:
        try:
            with self._scope:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport(stack))
                    dispatcher = _Dispatcher(read, write, self)
                    session = await stack.enter_async_context(
                        CheckedSession(dispatcher=dispatcher, client_info=CLIENT_INFO)
                    )
                    await session.initialize()
                    self.session = session
                    self.ready.set()
                    await self._stop.wait()
                    self._scope.deadline = anyio.current_time() + _CLOSE_GRACE_S
        except Exception as exc:  # noqa: BLE001 - any failure ends the session; callers read it
            self.error = exc
        finally:
            self.dead = True
            self.ready.set()
            self.done.set()

    def _transport(
        self, stack: contextlib.AsyncExitStack
    ) -> contextlib.AbstractAsyncContextManager[tuple[Any, Any]]:
        ep, owner = self.endpoint, self._owner
        if ep.transport == "stdio":
            assert ep.command is not None
            params = StdioServerParameters(command=ep.command, args=list(ep.args), env=dict(ep.env))
            return self._stdio(params)
        assert ep.url is not None
        self.backend = GuardedBackend(
            allow_private_network=owner.allow_private_network, resolver=owner.resolver
        )
        read = max(_SSE_READ_TIMEOUT_S, owner.call_timeout_s, owner.list_timeout_s)
        hooks: dict[str, list[Callable[..., Any]]] = {
            "response": [self._on_response],
            "request": list(owner.request_hooks),
        }
        factory = partial(guarded_httpx2_client, self.backend, event_hooks=hooks)
        if ep.transport == "sse":
            return sse_client(
                ep.url,
                headers=dict(ep.headers),
                timeout=owner.connect_timeout_s,
                sse_read_timeout=read,
                httpx_client_factory=factory,
            )
        timeout = httpx2.Timeout(owner.connect_timeout_s, read=read)
        http = factory(headers=dict(ep.headers), timeout=timeout)
        stack.push_async_callback(http.aclose)
        return streamable_http_client(ep.url, http_client=http)

    @contextlib.asynccontextmanager
    async def _stdio(self, params: StdioServerParameters) -> AsyncIterator[tuple[Any, Any]]:
        """The stdio transport, the child's stderr going to ``self.output``."""
        self.output = ChildOutput(where(self.endpoint), secret_values(self.endpoint))
        async with (
            stderr_pipe(self.output) as errlog,
            stdio_client(params, errlog=errlog) as streams,
        ):
            yield streams


class SdkMcpClient(McpClient):
    """Talks to MCP servers through the official SDK; see the module docstring."""

    def __init__(
        self,
        *,
        connect_timeout_s: float = 10,
        list_timeout_s: float = 30,
        call_timeout_s: float = 60,
        idle_ttl_s: float = 300,
        max_sessions: int = 100,
        allow_private_network: bool = False,
        allow_stdio: bool = False,
        resolver: Resolver | None = None,
        request_hooks: tuple[Callable[[Any], Awaitable[None]], ...] = (),
    ) -> None:
        """``resolver`` replaces the system DNS lookup of the address guard (tests);
        ``request_hooks`` see each HTTP request before it is sent (``traceparent``
        when tracing export is on: the SDK sends a request in its caller's context)."""
        self.request_hooks = request_hooks
        self.connect_timeout_s = connect_timeout_s
        self.list_timeout_s = list_timeout_s
        self.call_timeout_s = call_timeout_s
        self.idle_ttl_s = idle_ttl_s
        self.max_sessions = max_sessions
        self.allow_private_network = allow_private_network
        self.allow_stdio = allow_stdio
        self.resolver = resolver
        for name in _SDK_HTTP_LOGGERS:
            logging.getLogger(name).addFilter(_HOSTS_ONLY)  # once: the same filter object
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    # --- the port ----------------------------------------------------------

    async def list_tools(self, endpoint: McpEndpoint) -> list[McpTool]:
        async def run(session: ClientSession) -> list[McpTool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools.extend(page.tools)
                if not (cursor := page.next_cursor):
                    break
            return [
                McpTool(name=t.name, description=t.description or "", input_schema=t.input_schema)
                for t in tools
            ]

        return await self._run(endpoint, run, self.list_timeout_s, "listing tools", idempotent=True)

    async def call_tool(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]
    ) -> McpCallResult:
        async def run(session: ClientSession) -> McpCallResult:
            result = await session.call_tool(name, arguments)
            return McpCallResult(text=result_text(result), is_error=result.is_error)

        return await self._run(endpoint, run, self.call_timeout_s, f"tool {name}", idempotent=False)

    async def aclose(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        for state in list(self._sessions.values()):
            self._drop(state)
        if self._tasks:
            await asyncio.wait(set(self._tasks))

    # --- sessions ----------------------------------------------------------

    async def _run(
        self,
        endpoint: McpEndpoint,
        op: Callable[[ClientSession], Awaitable[T]],
        limit_s: float,
        what: str,
        *,
        idempotent: bool,
    ) -> T:
        for attempt in (1, 2):
            async with self._use(endpoint) as state:
                assert state.session is not None
                try:
                    with anyio.fail_after(limit_s):
                        return await op(state.session)
                except TimeoutError:
                    detail = f"{what} on {where(endpoint)} timed out after {limit_s:g}s"
                    raise Upstream(self._scrub(endpoint, detail), "MCP_TIMEOUT") from None
                except Exception as exc:  # noqa: BLE001 - every SDK failure becomes Upstream
                    if attempt == 1 and await self._retryable(state, exc, idempotent=idempotent):
                        log.info("MCP session %s broke; retrying on a new one", endpoint.key)
                        self._drop(state)
                        continue
                    if _broken(state, exc) or state.unauthorized:
                        self._drop(state)
                    raise self._error(state, exc, what) from None
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def _use(self, endpoint: McpEndpoint) -> AsyncIterator[_Session]:
        """A ready session for ``endpoint`` (opened if needed), marked in use meanwhile."""
        self._refuse_early(endpoint)
        state = self._sessions.get(endpoint.key)
        if state is None or state.dead:
            if state is not None:
                self._drop(state)
            state = _Session(endpoint, self)
            self._spawn(state.run(), f"mcp-session-{endpoint.key}")
            self._sessions[endpoint.key] = state
        self._sessions.move_to_end(endpoint.key)
        state.in_use += 1
        try:
            self._evict()
            self._start_reaper()
            try:
                with anyio.fail_after(self.connect_timeout_s):
                    await state.ready.wait()
            except TimeoutError:
                state.timed_out = True
                self._drop(state)
            if state.session is None or state.dead:
                self._drop(state)
                raise self._error(state, None, None)
            yield state
        finally:
            state.in_use -= 1
            state.last_used = time.monotonic()

    def _refuse_early(self, endpoint: McpEndpoint) -> None:
        problem = None
        if self._closed:
            problem = "the MCP client is closed"
        elif endpoint.transport == "stdio":
            if not self.allow_stdio:
                problem = "stdio MCP servers are disabled (AGENTSVC_ALLOW_STDIO_MCP)"
            elif not endpoint.command:
                problem = "the stdio MCP server has no command"
        elif not endpoint.url:
            problem = "the MCP server has no URL"
        else:
            try:
                check_url(endpoint.url, allow_private_network=self.allow_private_network)
            except ValueError as exc:
                problem = f"refused to connect to {where(endpoint)}: {exc}"
        if problem is not None:
            raise Upstream(self._scrub(endpoint, problem), "MCP_UNAVAILABLE")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _drop(self, state: _Session) -> None:
        if self._sessions.get(state.endpoint.key) is state:
            del self._sessions[state.endpoint.key]
        state.close()

    def _evict(self) -> None:
        while len(self._sessions) > self.max_sessions:
            idle = next((s for s in self._sessions.values() if s.in_use == 0), None)
            if idle is None:
                return
            self._drop(idle)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = self._spawn(self._reap(), "mcp-session-reaper")

    async def _reap(self) -> None:
        interval = max(0.05, min(self.idle_ttl_s / 2, 30.0))
        while self._sessions:
            await anyio.sleep(interval)
            now = time.monotonic()
            for state in list(self._sessions.values()):
                if state.in_use == 0 and (state.dead or now - state.last_used >= self.idle_ttl_s):
                    self._drop(state)

    async def _retryable(self, state: _Session, exc: Exception, *, idempotent: bool) -> bool:
        if state.unauthorized or not _broken(state, exc):
            return False
        if idempotent or state.session_lost:
            return True
        if state.endpoint.transport == "stdio":
            return False
        # A call is retried only if its connection was never made: close the
        # session and let its task record why the transport failed.
        self._drop(state)
        with anyio.move_on_after(_CLOSE_GRACE_S):
            await state.done.wait()
        leaves = _leaves(state.error) if state.error is not None else []
        return bool(leaves) and all(isinstance(e, httpx2.ConnectError) for e in leaves)

    # --- errors ------------------------------------------------------------

    def _error(self, state: _Session, exc: BaseException | None, what: str | None) -> Upstream:
        """The port's error for a failed connect (``what`` is None) or request."""
        ep, place, code = state.endpoint, where(state.endpoint), "MCP_UNAVAILABLE"
        if state.unauthorized:
            found = _METADATA.search(state.challenge or "")
            detail = self._scrub(ep, f"{place} requires authorization (HTTP 401)")
            return McpAuthRequired(detail, (found.group(1) or found.group(2)) if found else None)
        if state.backend is not None and state.backend.refusal is not None:
            detail = f"refused to connect to {place}: {state.backend.refusal}"
        elif what is None and state.timed_out:
            detail = f"timed out connecting to {place} after {self.connect_timeout_s:g}s"
        elif what is None:
            detail = f"cannot connect to {place}: {_describe(state.error or exc)}"
        elif isinstance(exc, MCPError) and not _broken(state, exc):
            detail, code = f"{place} answered an error for {what}: {_message(exc)}", "MCP_ERROR"
        elif isinstance(exc, ResultRefused):
            detail, code = f"{place} answered {what} with a refused result: {exc}", "MCP_ERROR"
        else:
            detail = (
                f"lost the connection to {place} during {what}: {_describe(state.error or exc)}"
            )
        return Upstream(self._scrub(ep, detail), code)

    @staticmethod
    def _scrub(endpoint: McpEndpoint, detail: str) -> str:
        """No header or env value (nor a long word of one) may appear in a detail,
        and a URL in it (the SDK names a redirect's target) is its host only."""
        detail = hosts_only(detail)
        for secret in secret_values(endpoint):
            detail = detail.replace(secret, "***")
        return detail[:500]


# a URL: its scheme, any user information, its host and port, then the rest (path,
# query, fragment) up to a space or a quote
_URL = re.compile(
    r"""\b([A-Za-z][A-Za-z0-9+.-]*://)(?:[^/?#\s'"<>@]*@)?([^/?#\s'"<>]*)[^\s'"<>]*"""
)


def hosts_only(text: str) -> str:
    """Every URL in ``text`` as its scheme, host and port: paths, queries and user
    information can carry keys (``http://h:1/key/mcp?t=x`` -> ``http://h:1``)."""
    return _URL.sub(r"\1\2", text) if "://" in text else text


class _HostsOnly(logging.Filter):
    """The SDK logs a redirect it did not follow with its whole target: its
    records are rewritten with ``hosts_only``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "://" in message:
            record.msg, record.args = hosts_only(message), None
        return True


_HOSTS_ONLY = _HostsOnly()
_SDK_HTTP_LOGGERS = ("mcp.client.streamable_http", "mcp.client.sse")


def where(endpoint: McpEndpoint) -> str:
    """The endpoint for a message: scheme, host and port only (paths and queries can
    carry keys), or the command's name (not its arguments)."""
    if endpoint.transport == "stdio":
        return f"stdio MCP server {os.path.basename(endpoint.command or '?')!r}"
    try:
        parts = urlsplit(endpoint.url or "")
        host, port = parts.hostname or "?", parts.port
    except ValueError:
        return "MCP server (invalid URL)"
    host = f"[{host}]" if ":" in host else host
    return f"MCP server {parts.scheme}://{host}{f':{port}' if port else ''}"


def result_text(result: types.CallToolResult) -> str:
    """Text blocks joined; other blocks named briefly; structured content if no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.mime_type}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block.resource, types.TextResourceContents):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{block.resource.mime_type or 'binary'} resource {block.resource.uri}]")
    has_text = any(isinstance(b, types.TextContent) for b in result.content)
    if not has_text and result.structured_content is not None:
        compact = json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
        parts.insert(0, compact)
    return "\n".join(parts)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "connection closed"
    leaves = [e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)] or [exc]
    first = leaves[0]
    if isinstance(first, httpx2.HTTPStatusError):
        return f"HTTP {first.response.status_code}"
    if isinstance(first, FileNotFoundError):
        return "command not found"
    if isinstance(first, MCPError):
        return _message(first)
    text = str(first) or type(first).__name__
    return (
        text if isinstance(first, httpx2.HTTPError | OSError) else f"{type(first).__name__}: {text}"
    )


# the SDK's words for a redirect it did not follow (it follows none across origins)
_REDIRECT = re.compile(r"Redirect to (\S+?):? not followed")


def _message(exc: MCPError) -> str:
    """An MCP error's message; a redirect the SDK did not follow in our words (its
    own repeats the whole target and tells to use it, which the caller cannot see)."""
    redirect = _REDIRECT.match(exc.message)
    if redirect is None:
        return exc.message
    target = hosts_only(redirect.group(1))
    return f"it answers a redirect (to {target}), which is not followed: use the URL it names"


def _broken(state: _Session, exc: Exception) -> bool:
    """The session can no longer be used (as opposed to one request failing)."""
    if state.dead or state.session_lost:
        return True
    if isinstance(exc, MCPError):
        return exc.code == types.CONNECTION_CLOSED
    return isinstance(
        exc, httpx2.TransportError | OSError | anyio.BrokenResourceError | anyio.ClosedResourceError
    )
