"""E2B's in-sandbox API (envd), spoken as E2B's Python SDK speaks it: the
``process.Process`` and ``filesystem.Filesystem`` services over the Connect
protocol with the JSON codec, and the ``/files`` HTTP route. What the module
follows is listed in ``e2b.py``'s docstring.

Connect, briefly (what envd's connect-go handlers accept and the SDK sends):

- a unary call is ``POST /<service>/<Method>`` with ``Content-Type:
  application/json`` and the request message as protobuf-JSON; a success is 200
  with the response message, an error a non-200 status with ``{"code":
  "not_found", "message": ...}``;
- a server-streaming call (``Process/Start``) is a ``POST`` with ``Content-Type:
  application/connect+json`` whose body is one *envelope* (a flags byte, a 4-byte
  big-endian length, the JSON message); the answer is 200 and a run of envelopes,
  the last with flag ``0x02`` holding ``{}`` or ``{"error": {...}}``;
- ``Connect-Timeout-Ms`` bounds the call; for ``Start`` envd also kills the
  process when it passes (the process outlives a dropped request otherwise, which
  is why leaving early sends ``SendSignal`` SIGKILL).

Errors that do not come from envd itself are plain HTTP: envd's access-token
middleware answers 401 ``{"code": 401, "message": ...}``, E2B's edge proxy 502
for a sandbox that is not running. Both raise ``EnvdStale``: the caller fetches a
fresh connection (``/connect`` resumes a paused sandbox and hands the token back)
and tries once more.
"""

from __future__ import annotations

import base64
import contextlib
import json
import posixpath
import struct
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx

from agentsvc_adapters.outbound import failure
from agentsvc_core.errors import DomainError, InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import (
    SandboxGone,
    SandboxUnavailable,
)

__all__ = ["ENVD_PORT", "Envd", "EnvdConnection", "EnvdStale"]

ENVD_PORT = 49983  # envd's port in every sandbox (the SDK's ``envd_port``)
_STREAM_TYPE = "application/connect+json"
END_STREAM = 0x02
COMPRESSED = 0x01
# the process deadline sent to envd: later than ours, a backstop when we vanish
_BACKSTOP_S = 30.0
_GROUP_KILL_S = 5.0
# A command runs as the leader of a process group of its own (``setsid``, where the
# template has it: without a fork, as envd's child leads no group), so that a kill
# reaches what it started; ``sh -c SCRIPT COMMAND`` hands the command over as $0.
_GROUP = (
    'if command -v setsid >/dev/null 2>&1; then exec setsid -w /bin/sh -c "$0"; fi; '
    'exec /bin/sh -c "$0"'
)
_CALL_TIMEOUT = httpx.Timeout(30.0)
_STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)  # silence is bounded by our deadline


class EnvdStale(Exception):
    """The connection may be out of date (401 on the access token, 502 from the
    edge proxy): reconnect and retry once; ``final`` is what to raise if it
    happens again."""

    def __init__(self, final: DomainError) -> None:
        super().__init__(final.detail)
        self.final = final


class EnvdConnection:
    """How to reach one sandbox's envd: its base URL and the headers the SDK sends
    (``E2b-Sandbox-Id``, ``E2b-Sandbox-Port``, ``X-Access-Token``)."""

    def __init__(
        self, sandbox_id: str, base_url: str, access_token: str | None, envd_version: str = ""
    ) -> None:
        self.sandbox_id = sandbox_id
        self.base_url = base_url.rstrip("/")
        self._token = access_token
        # raw uploads (``application/octet-stream``) came with envd 0.5.7
        self.octet_stream = _version(envd_version) >= (0, 5, 7)

    def __repr__(self) -> str:  # no token in reprs
        return f"EnvdConnection({self.sandbox_id!r}, {self.base_url!r})"

    def headers(self, user: str) -> dict[str, str]:
        headers = {
            "E2b-Sandbox-Id": self.sandbox_id,
            "E2b-Sandbox-Port": str(ENVD_PORT),
            # envd reads the user from basic auth with an empty password
            "Authorization": "Basic " + base64.b64encode(f"{user}:".encode()).decode(),
        }
        if self._token:
            headers["X-Access-Token"] = self._token
        return headers


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split("-", maxsplit=1)[0].split(".")[:3])
    except ValueError:
        return (0,)


def envelope(message: dict[str, Any], flags: int = 0) -> bytes:
    data = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">BI", flags, len(data)) + data


async def envelopes(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """Splits a Connect stream into ``(flags, message)`` envelopes."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        while len(buffer) >= 5:
            flags, size = struct.unpack(">BI", buffer[:5])
            if len(buffer) < 5 + size:
                break
            yield flags, buffer[5 : 5 + size]
            buffer = buffer[5 + size :]
    if buffer:
        raise SandboxUnavailable("the sandbox's command stream was cut off mid-message")


def _message(body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    text = parsed.get("message") if isinstance(parsed, dict) else None
    return text[:300] if isinstance(text, str) else ""


def _plain_error(status: int, body: bytes) -> Exception:
    """An error status that is not envd's own answer to the call."""
    if status == 401:
        return EnvdStale(SandboxUnavailable("E2B refused the sandbox's access token"))
    if status == 502:
        return EnvdStale(SandboxGone("the sandbox is not running at E2B"))
    if status == 429:
        return SandboxUnavailable("E2B is rate limiting calls to the sandbox; try again later")
    if status == 507:
        return SandboxUnavailable("the sandbox's disk is full")
    return SandboxUnavailable(f"the sandbox answered HTTP {status}")


def connect_error(error: dict[str, Any], what: str) -> Exception:
    """A Connect error (``code`` a string) from envd for the call ``what``."""
    code, message = str(error.get("code", "unknown")), str(error.get("message", ""))[:300]
    if code == "not_found":
        return NotFound(f"{what}: {message or 'not found'}")
    if code == "invalid_argument":
        return InvalidInput("path", message or "refused by the sandbox")
    if code == "unauthenticated":
        return SandboxUnavailable(f"the sandbox refused its user: {message}")
    if code == "deadline_exceeded":
        return SandboxUnavailable(f"the sandbox's {what} took too long")
    return SandboxUnavailable(f"the sandbox could not {what} ({code}): {message}")


class Envd:
    """envd's API on one guarded HTTP client; every call runs as ``user``."""

    def __init__(self, http: httpx.AsyncClient, *, user: str) -> None:
        self._http = http
        self._user = user

    async def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise SandboxUnavailable(
                f"the sandbox cannot be reached: {failure(exc, str(request.url))}"
            ) from exc

    async def unary(
        self, conn: EnvdConnection, method: str, message: dict[str, Any], what: str
    ) -> dict[str, Any]:
        headers = conn.headers(self._user) | {
            "Content-Type": "application/json",
            "Connect-Protocol-Version": "1",
        }
        request = self._http.build_request(
            "POST",
            f"{conn.base_url}/{method}",
            content=json.dumps(message).encode(),
            headers=headers,
            timeout=_CALL_TIMEOUT,
        )
        response = await self._send(request)
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        parsed: Any = None
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
        if response.status_code == 200 and isinstance(parsed, dict):
            return parsed
        if isinstance(parsed, dict) and isinstance(parsed.get("code"), str):
            raise connect_error(parsed, what)
        raise _plain_error(response.status_code, body)

    async def kill(self, conn: EnvdConnection, pid: int) -> None:
        """SIGKILL to a command: to the process envd started (``SendSignal``, which
        also ends its output at once; one that ended is fine), then to its process
        group, what it started (envd signals its one process only)."""
        message = {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}
        with contextlib.suppress(NotFound):
            await self.unary(conn, "process.Process/SendSignal", message, "stop the command")
        with contextlib.suppress(DomainError, EnvdStale):
            group = f"kill -9 -{int(pid)} 2>/dev/null; true"  # -PGID: the group
            response = await self.start(conn, group, cwd="/", env={}, timeout_s=_GROUP_KILL_S)
            try:
                with anyio.move_on_after(_GROUP_KILL_S):
                    async for _ in response.aiter_raw():
                        pass
            finally:
                await response.aclose()

    async def make_dir(self, conn: EnvdConnection, path: str) -> None:
        try:
            await self.unary(
                conn, "filesystem.Filesystem/MakeDir", {"path": path}, "make the workspace"
            )
        except SandboxUnavailable as exc:
            if "(already_exists)" not in exc.detail:
                raise

    async def list_dir(self, conn: EnvdConnection, path: str) -> list[dict[str, Any]]:
        answer = await self.unary(
            conn, "filesystem.Filesystem/ListDir", {"path": path, "depth": 1}, "list the folder"
        )
        entries = answer.get("entries", [])
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    async def read_file(self, conn: EnvdConnection, path: str, max_bytes: int) -> bytes:
        request = self._http.build_request(
            "GET",
            f"{conn.base_url}/files",
            params={"path": path, "username": self._user},
            headers=conn.headers(self._user) | {"Accept-Encoding": "identity"},
            timeout=_CALL_TIMEOUT,
        )
        response = await self._send(request)
        try:
            if response.status_code != 200:
                body = await response.aread()
                if response.status_code == 404:
                    raise NotFound("no such file in the workspace")
                if response.status_code == 400:
                    problem = "is a folder" if "directory" in _message(body) else "cannot be read"
                    raise InvalidInput("path", problem)
                raise _plain_error(response.status_code, body)
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > max_bytes:
                    raise InvalidInput("path", f"the file is larger than {max_bytes} bytes")
            return bytes(data)
        finally:
            await response.aclose()

    async def write_file(self, conn: EnvdConnection, path: str, data: bytes) -> None:
        """``POST /files``: the raw bytes from envd 0.5.7 on, a multipart form with
        one ``file`` part before (as the SDK does); envd makes the folders on the
        way and replaces a file that is there."""
        upload: dict[str, Any] = (
            {"content": data, "headers": {"Content-Type": "application/octet-stream"}}
            if conn.octet_stream
            else {"files": {"file": (posixpath.basename(path), data)}, "headers": {}}
        )
        request = self._http.build_request(
            "POST",
            f"{conn.base_url}/files",
            params={"path": path, "username": self._user},
            content=upload.get("content"),
            files=upload.get("files"),
            headers=conn.headers(self._user) | upload["headers"],
            timeout=_CALL_TIMEOUT,
        )
        response = await self._send(request)
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        if response.status_code == 400:
            raise InvalidInput("path", "the sandbox refused to write there")
        if response.status_code != 200:
            raise _plain_error(response.status_code, body)

    async def start(
        self,
        conn: EnvdConnection,
        command: str,
        *,
        cwd: str,
        env: dict[str, str],
        timeout_s: float,
    ) -> httpx.Response:
        """Opens ``Process/Start`` (``sh -c command``, in a process group of its
        own); the caller reads and closes
        the response. Raises before anything runs when envd refuses."""
        message = {
            "process": {"cmd": "/bin/sh", "args": ["-c", _GROUP, command], "envs": env, "cwd": cwd},
            "stdin": False,
        }
        headers = conn.headers(self._user) | {
            "Content-Type": _STREAM_TYPE,
            "Connect-Protocol-Version": "1",
            # at most 10 digits, as Connect allows
            "Connect-Timeout-Ms": str(min(int((timeout_s + _BACKSTOP_S) * 1000), 9_999_999_999)),
            "Keepalive-Ping-Interval": "50",
            "Accept-Encoding": "identity",
        }
        request = self._http.build_request(
            "POST",
            f"{conn.base_url}/process.Process/Start",
            content=envelope(message),
            headers=headers,
            timeout=_STREAM_TIMEOUT,
        )
        response = await self._send(request)
        if response.status_code != 200:
            body = await response.aread()
            await response.aclose()
            raise _plain_error(response.status_code, body)
        return response
