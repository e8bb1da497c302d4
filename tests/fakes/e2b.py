"""A loopback fake of E2B: the REST API's sandbox lifecycle and the in-sandbox API
(envd) in one ASGI app, exactly the subset the ``e2b`` adapter uses, in the real
encoding. Serve ``FakeE2B`` with ``tests.web.live.serve``; its base URL is both the
adapter's API URL and its sandbox URL (envd requests name their sandbox with the
``E2b-Sandbox-Id`` header, as E2B's SDK sends it).

REST (``X-API-Key`` else 401; JSON bodies with ``Content-Type: application/json``
else 400): ``POST /sandboxes`` (``templateID`` a known template, else 404;
``timeout``, ``autoPause``, ``secure``, ``allow_internet_access``, ``metadata``,
``network`` type-checked: 400; 201 ``Sandbox`` with ``envdAccessToken`` when
``secure``), ``POST /sandboxes/{id}/connect`` (``{"timeout"}`` required; 200
running, 201 resumed, 404 unknown), ``POST /sandboxes/{id}/pause`` (204, 409
paused, 404), ``DELETE /sandboxes/{id}`` (204, 404).

envd (a sandbox not running: 502 from the "edge proxy"; a wrong or missing
``X-Access-Token``: 401, as envd's middleware and ``/files`` answer; a user
other than ``root`` or ``user``: unauthenticated): Connect with the JSON codec,
``process.Process/Start`` (``application/connect+json``, enveloped, server
streaming: start, data as base64, end as Go's protojson writes it, then the
end-of-stream envelope; ``Connect-Timeout-Ms`` kills the process when it passes,
as envd does), ``process.Process/SendSignal``, ``filesystem.Filesystem/ListDir``
and ``MakeDir`` (``application/json`` unary; unknown fields are
``invalid_argument``, as protojson refuses them), and ``GET``/``POST /files``
(``path``, ``username``; octet-stream uploads from envd 0.5.7, multipart
forms always; ``envd_version`` picks which envd it plays).

Commands run for real (``subprocess``) with the sandbox's folder mapped under a
temporary directory: ``/workspace`` in the sandbox is ``<root>/workspace``. As in
envd, ``SendSignal`` signals the one process started (no group) and ends its
output at once. It is a test double for the provider, not a boundary: a
command's own absolute paths are the host's. Pause stops the processes
(SIGSTOP) and keeps the files; resume continues them. ``lose(id)`` deletes a
sandbox behind the adapter's back. ``log`` records ``(kind, method, path,
headers)`` of every request, ``kind`` being ``api`` or ``envd``;
``fail_next(kind, *statuses)`` makes the next requests of a kind fail.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email
import email.policy
import ipaddress
import json
import os
import posixpath
import secrets
import shutil
import signal
import stat
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

API_KEY = "e2b_0123456789abcdef0123456789abcdef01234567"
TEMPLATES = frozenset({"base"})
USERS = {"root": "/root", "user": "/home/user"}
ENVD_VERSION = "0.5.7"
_CODES = {
    "invalid_argument": 400,
    "unauthenticated": 401,
    "not_found": 404,
    "already_exists": 409,
    "failed_precondition": 400,
    "internal": 500,
    "unimplemented": 501,
}
_SIGNAL_NAMES = {signal.SIGKILL: "killed", signal.SIGTERM: "terminated", signal.SIGINT: "interrupt"}
Send = Any


class ConnectError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Proc:
    """A process envd started; ``out_cancel`` ends its output at once, as envd's
    ``SendSignal`` does for SIGKILL and SIGTERM."""

    process: asyncio.subprocess.Process
    out_cancel: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Sandbox:
    id: str
    root: Path
    token: str | None
    body: dict[str, Any]
    state: str = "running"
    procs: dict[int, Proc] = field(default_factory=dict)
    watchers: set[asyncio.Task[None]] = field(default_factory=set)

    def host_path(self, user: str, path: str) -> Path:
        full = posixpath.normpath(posixpath.join(USERS[user], path or "."))
        return self.root / full.lstrip("/")

    def signal_all(self, sig: int) -> None:
        """Signals every process the sandbox runs: the group each command leads
        (its ``setsid``) and the command itself."""
        for pid in list(self.procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, sig)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def _envelope(message: dict[str, Any], flags: int = 0) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">BI", flags, len(data)) + data


def _check_fields(message: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise ConnectError("invalid_argument", f"{where}: not a JSON object")
    if unknown := set(message) - allowed:
        raise ConnectError("invalid_argument", f"{where}: unknown field {sorted(unknown)[0]!r}")
    return message


def _entry(path: str, host: Path) -> dict[str, Any]:
    info = host.lstat()
    kind = (
        "FILE_TYPE_SYMLINK"
        if stat.S_ISLNK(info.st_mode)
        else "FILE_TYPE_DIRECTORY"
        if stat.S_ISDIR(info.st_mode)
        else "FILE_TYPE_FILE"
    )
    entry: dict[str, Any] = {
        "name": posixpath.basename(path),
        "type": kind,
        "path": path,
        "mode": info.st_mode & 0o777,
        "permissions": stat.filemode(info.st_mode),
        "owner": "root",
        "group": "root",
        "modifiedTime": datetime.fromtimestamp(info.st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if info.st_size:
        entry["size"] = str(info.st_size)  # int64 is a string in protobuf-JSON
    if kind == "FILE_TYPE_SYMLINK":
        entry["symlinkTarget"] = os.readlink(host)
    return entry


class FakeE2B:
    def __init__(
        self, base_dir: Path, api_key: str = API_KEY, envd_version: str = ENVD_VERSION
    ) -> None:
        self.base_dir = base_dir
        self.api_key = api_key
        self.envd_version_text = envd_version
        self.envd_version = tuple(int(p) for p in envd_version.split("."))
        self.sandboxes: dict[str, Sandbox] = {}
        self.log: list[tuple[str, str, str, dict[str, str]]] = []
        self.failures: dict[str, list[int]] = {"api": [], "envd": []}

    # --- test switches --------------------------------------------------------

    def lose(self, sandbox_id: str) -> None:
        """E2B deletes the sandbox (expired, removed from the dashboard)."""
        box = self.sandboxes.pop(sandbox_id)
        box.signal_all(signal.SIGKILL)
        shutil.rmtree(box.root, ignore_errors=True)

    def fail_next(self, kind: str, *statuses: int) -> None:
        """The next requests of ``kind`` (``api``, ``envd``) answer these statuses,
        each with E2B's error body."""
        self.failures[kind].extend(statuses)

    def rotate_token(self, sandbox_id: str) -> None:
        box = self.sandboxes[sandbox_id]
        box.token = secrets.token_urlsafe(24)

    # --- ASGI -----------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            for box in self.sandboxes.values():
                box.signal_all(signal.SIGKILL)
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path, method = scope["path"], scope["method"]
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        kind = "api" if path.startswith("/sandboxes") else "envd"
        self.log.append((kind, method, path, headers))
        try:
            if self.failures[kind]:
                status = self.failures[kind].pop(0)
                raise HttpError(status, "Internal error" if status >= 500 else "Refused")
            if kind == "api":
                status, answer = self._api(method, path, headers, body)
                await _json(send, status, answer)
            else:
                await self._envd(method, path, headers, query, body, send)
        except HttpError as exc:
            await _json(send, exc.status, {"code": exc.status, "message": exc.message})
        except ConnectError as exc:
            await _json(send, _CODES[exc.code], {"code": exc.code, "message": exc.message})

    # --- REST -----------------------------------------------------------------

    def _api(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        if headers.get("x-api-key") != self.api_key:
            raise HttpError(401, "Invalid API key, please visit the dashboard to get yours")
        parts = path.strip("/").split("/")
        if method == "POST" and parts == ["sandboxes"]:
            return self._create(_json_body(headers, body))
        if len(parts) < 2 or parts[0] != "sandboxes":
            raise HttpError(404, "not found")
        box = self.sandboxes.get(parts[1])
        action = parts[2] if len(parts) == 3 else None
        if box is None and (method, action) in {
            ("DELETE", None),
            ("POST", "connect"),
            ("POST", "pause"),
        }:
            raise HttpError(404, f"sandbox {parts[1]!r} doesn't exist or you don't have access")
        if method == "DELETE" and action is None and box:
            self.lose(box.id)
            return 204, None
        if method == "POST" and action == "connect" and box:
            request = _json_body(headers, body)
            if not isinstance(request.get("timeout"), int) or request["timeout"] < 0:
                raise HttpError(400, "timeout is required, an integer of seconds")
            resumed = box.state == "paused"
            box.state = "running"
            box.signal_all(signal.SIGCONT)
            return (201 if resumed else 200), self._sandbox(box)
        if method == "POST" and action == "pause" and box:
            if body:
                request = _json_body(headers, body)
                if "memory" in request and not isinstance(request["memory"], bool):
                    raise HttpError(400, "memory must be a boolean")
            if box.state == "paused":
                raise HttpError(409, "sandbox is already paused")
            box.state = "paused"
            box.signal_all(signal.SIGSTOP)
            return 204, None
        raise HttpError(404, "not found")

    def _create(self, request: dict[str, Any]) -> tuple[int, Any]:
        template = request.get("templateID")
        if not isinstance(template, str) or not template:
            raise HttpError(400, "templateID is required")
        checks = {
            "timeout": int,
            "autoPause": bool,
            "secure": bool,
            "allow_internet_access": bool,
            "metadata": dict,
            "network": dict,
        }
        for name, kind in checks.items():
            if name in request and not isinstance(request[name], kind):
                raise HttpError(400, f"{name} has the wrong type")
        if any(not isinstance(v, str) for v in request.get("metadata", {}).values()):
            raise HttpError(400, "metadata values must be strings")
        _check_network(request.get("network", {}))
        if template not in TEMPLATES:
            raise HttpError(404, f"template '{template}' not found")
        sandbox_id = "i" + secrets.token_hex(9)
        root = self.base_dir / sandbox_id
        for home in USERS.values():
            (root / home.lstrip("/")).mkdir(parents=True)
        (root / "tmp").mkdir()
        token = secrets.token_urlsafe(24) if request.get("secure") else None
        box = Sandbox(id=sandbox_id, root=root, token=token, body=request)
        self.sandboxes[sandbox_id] = box
        return 201, self._sandbox(box)

    def _sandbox(self, box: Sandbox) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "templateID": box.body["templateID"],
            "alias": box.body["templateID"],
            "sandboxID": box.id,
            "clientID": "6532622b",
            "envdVersion": self.envd_version_text,
            "domain": None,
            "trafficAccessToken": None,
        }
        if box.token:
            answer["envdAccessToken"] = box.token
        return answer

    # --- envd -----------------------------------------------------------------

    def _box(self, headers: dict[str, str], path: str) -> Sandbox:
        box = self.sandboxes.get(headers.get("e2b-sandbox-id", ""))
        if box is None or box.state != "running" or headers.get("e2b-sandbox-port") != "49983":
            raise HttpError(502, "The sandbox was not found")
        token = headers.get("x-access-token")
        if box.token is not None and token != box.token:
            raise HttpError(
                401,
                "access token present in header but does not match"
                if path == "/files" and token
                else "unauthorized access, please provide a valid access token or method "
                "signing if supported",
            )
        return box

    @staticmethod
    def _user(headers: dict[str, str]) -> str:
        auth = headers.get("authorization", "")
        if not auth:
            return "user"  # the template's default user
        try:
            user = base64.b64decode(auth.removeprefix("Basic ")).decode().split(":")[0]
        except ValueError:
            user = ""
        if not auth.startswith("Basic ") or user not in USERS:
            raise ConnectError("unauthenticated", f"invalid username: '{user}'")
        return user

    async def _envd(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        query: dict[str, str],
        body: bytes,
        send: Send,
    ) -> None:
        box = self._box(headers, path)
        if path == "/files":
            await self._files(box, method, headers, query, body, send)
            return
        if method != "POST":
            raise HttpError(405, "method not allowed")
        if path == "/process.Process/Start":
            await self._start(box, headers, body, send)
            return
        unary = {
            "/process.Process/SendSignal": self._signal,
            "/filesystem.Filesystem/ListDir": self._list_dir,
            "/filesystem.Filesystem/MakeDir": self._make_dir,
        }
        if path not in unary:
            raise HttpError(404, "404 page not found")
        if headers.get("content-type", "").split(";")[0] != "application/json":
            raise HttpError(415, "unsupported content type")
        try:
            request = json.loads(body)
        except ValueError:
            raise ConnectError("invalid_argument", "unmarshal message: bad JSON") from None
        user = self._user(headers)
        await _json(send, 200, unary[path](box, user, request))

    def _signal(self, box: Sandbox, user: str, request: Any) -> dict[str, Any]:
        request = _check_fields(request, {"process", "signal"}, "SendSignalRequest")
        selector = _check_fields(request.get("process"), {"pid", "tag"}, "ProcessSelector")
        sig = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM}.get(
            request.get("signal", "")
        )
        if sig is None:
            raise ConnectError("unimplemented", f"invalid signal: {request.get('signal')}")
        pid = selector.get("pid")
        if not isinstance(pid, int) or pid not in box.procs:
            raise ConnectError("not_found", f"process with pid {pid} not found")
        proc = box.procs[pid]
        proc.out_cancel.set()  # envd signals the one process it started, no group
        with contextlib.suppress(ProcessLookupError):
            proc.process.send_signal(sig)
        return {}

    def _list_dir(self, box: Sandbox, user: str, request: Any) -> dict[str, Any]:
        request = _check_fields(request, {"path", "depth"}, "ListDirRequest")
        path = str(request.get("path", ""))
        full = posixpath.normpath(posixpath.join(USERS[user], path))
        host = box.host_path(user, path)
        if not host.exists():
            raise ConnectError("not_found", f"directory not found: {full}")
        if not host.is_dir():
            raise ConnectError("invalid_argument", f"path is not a directory: {full}")
        children = sorted(host.iterdir())
        return {"entries": [_entry(posixpath.join(full, c.name), c) for c in children]}

    def _make_dir(self, box: Sandbox, user: str, request: Any) -> dict[str, Any]:
        request = _check_fields(request, {"path"}, "MakeDirRequest")
        path = str(request.get("path", ""))
        full = posixpath.normpath(posixpath.join(USERS[user], path))
        host = box.host_path(user, path)
        if host.is_dir():
            raise ConnectError("already_exists", f"directory already exists: {full}")
        if host.exists():
            raise ConnectError(
                "invalid_argument", f"path already exists but it is not a directory: {full}"
            )
        host.mkdir(parents=True)
        return {"entry": _entry(full, host)}

    async def _files(
        self,
        box: Sandbox,
        method: str,
        headers: dict[str, str],
        query: dict[str, str],
        body: bytes,
        send: Send,
    ) -> None:
        user = query.get("username", "user")
        if user not in USERS:
            raise HttpError(401, f"error looking up user '{user}': unknown user")
        path = query.get("path")
        if not path:
            raise HttpError(400, "path is required")
        full = posixpath.normpath(posixpath.join(USERS[user], path))
        host = box.host_path(user, path)
        if method == "GET":
            if not host.exists():
                raise HttpError(404, f"path '{full}' does not exist")
            if host.is_dir():
                raise HttpError(400, f"path '{full}' is a directory")
            await _raw(send, 200, host.read_bytes(), "application/octet-stream")
            return
        if method != "POST":
            raise HttpError(405, "method not allowed")
        data = self._upload(headers.get("content-type", ""), body)
        if host.is_dir():
            raise HttpError(400, f"path '{full}' is a directory")
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)
        answer = [{"path": full, "name": posixpath.basename(full), "type": "file"}]
        await _json(send, 200, answer)

    def _upload(self, content_type: str, body: bytes) -> bytes:
        """The one file of an upload: raw bytes (envd 0.5.7 on) or the ``file``
        part of a multipart form (every envd: what older ones take for anything)."""
        media = content_type.split(";", maxsplit=1)[0].strip()
        if media == "application/octet-stream" and self.envd_version >= (0, 5, 7):
            return body
        if media not in ("application/octet-stream", "multipart/form-data") and (
            self.envd_version >= (0, 5, 7)
        ):
            raise HttpError(400, f"unsupported content type: {content_type}")
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        form = email.message_from_bytes(head + body, policy=email.policy.HTTP)
        if not form.is_multipart():
            raise HttpError(500, "error parsing multipart form: no multipart boundary param")
        parts = [p for p in form.iter_parts() if p.get_param("name", header="content-disposition")]
        if len(parts) != 1 or parts[0].get_param("name", header="content-disposition") != "file":
            raise HttpError(400, "expected exactly one part named 'file'")
        payload = parts[0].get_payload(decode=True)
        return payload if isinstance(payload, bytes) else b""

    async def _start(self, box: Sandbox, headers: dict[str, str], body: bytes, send: Send) -> None:
        if headers.get("content-type") != "application/connect+json":
            raise HttpError(415, "unsupported content type")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/connect+json")],
            }
        )
        try:
            proc, events = await self._spawn(box, headers, body)
        except ConnectError as exc:
            await _stream_end(send, {"error": {"code": exc.code, "message": exc.message}})
            return
        with contextlib.suppress(OSError, RuntimeError):  # the client left: the process runs on
            await _chunk(send, {"event": {"start": {"pid": proc.pid}}})
            while (item := await events.get()) is not None:
                await _chunk(send, {"event": item})
            await _stream_end(send, {})

    async def _spawn(
        self, box: Sandbox, headers: dict[str, str], body: bytes
    ) -> tuple[asyncio.subprocess.Process, asyncio.Queue[dict[str, Any] | None]]:
        if len(body) < 5 or struct.unpack(">BI", body[:5])[1] != len(body) - 5:
            raise ConnectError("invalid_argument", "malformed envelope")
        try:
            request = json.loads(body[5:])
        except ValueError:
            raise ConnectError("invalid_argument", "unmarshal message: bad JSON") from None
        request = _check_fields(request, {"process", "pty", "tag", "stdin"}, "StartRequest")
        config = _check_fields(request.get("process"), {"cmd", "args", "envs", "cwd"}, "config")
        user = self._user(headers)
        timeout_ms = headers.get("connect-timeout-ms", "")
        if timeout_ms and not (timeout_ms.isdigit() and len(timeout_ms) <= 10):
            raise ConnectError("invalid_argument", "bad Connect-Timeout-Ms")
        cwd = box.host_path(user, str(config.get("cwd") or USERS[user]))
        if not cwd.is_dir():
            raise ConnectError("invalid_argument", "cwd does not exist")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "LANG": "C.UTF-8"}
        proc = await asyncio.create_subprocess_exec(
            str(config.get("cmd", "")),
            *[str(a) for a in config.get("args", [])],
            cwd=cwd,
            env=env | dict(config.get("envs") or {}),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        box.procs[proc.pid] = Proc(proc)
        events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        task = asyncio.get_running_loop().create_task(
            _watch(box, proc, events, int(timeout_ms) / 1000 if timeout_ms else None)
        )
        box.watchers.add(task)
        task.add_done_callback(box.watchers.discard)
        return proc, events


async def _watch(
    box: Sandbox,
    proc: asyncio.subprocess.Process,
    events: asyncio.Queue[dict[str, Any] | None],
    deadline_s: float | None,
) -> None:
    async def pump(stream: asyncio.StreamReader | None, name: str) -> None:
        while stream is not None and (chunk := await stream.read(4096)):
            events.put_nowait({"data": {name: base64.b64encode(chunk).decode()}})

    cancel = box.procs[proc.pid].out_cancel
    pumps: asyncio.Future[Any] = asyncio.gather(
        pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr")
    )
    cancelled: asyncio.Future[Any] = asyncio.ensure_future(cancel.wait())
    await asyncio.wait([pumps, cancelled], timeout=deadline_s, return_when="FIRST_COMPLETED")
    if not pumps.done() and not cancel.is_set():  # envd's process context expired
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # the one process, as exec.CommandContext does
    pumps.cancel()
    cancelled.cancel()
    await asyncio.gather(pumps, cancelled, return_exceptions=True)
    await proc.wait()
    box.procs.pop(proc.pid, None)
    code = proc.returncode or 0
    end: dict[str, Any]
    if code >= 0:
        end = {"exitCode": code, "exited": True, "status": f"exit status {code}"}
    else:
        name = _SIGNAL_NAMES.get(signal.Signals(-code), f"signal {-code}")
        end = {"exitCode": -1, "status": f"signal: {name}"}
    events.put_nowait({"end": {k: v for k, v in end.items() if v}})  # protojson omits 0/false
    events.put_nowait(None)


def _check_network(network: Any) -> None:
    for name in ("allowOut", "denyOut"):
        values = network.get(name, [])
        if not isinstance(values, list) or any(not isinstance(v, str) for v in values):
            raise HttpError(400, f"network.{name} must be a list of strings")
    for cidr in network.get("denyOut", []):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise HttpError(400, f"network.denyOut: {cidr!r} is not a CIDR block") from None
    if "allowPublicTraffic" in network and not isinstance(network["allowPublicTraffic"], bool):
        raise HttpError(400, "network.allowPublicTraffic must be a boolean")


def _json_body(headers: dict[str, str], body: bytes) -> dict[str, Any]:
    if headers.get("content-type", "").split(";")[0] != "application/json":
        raise HttpError(400, "request body has an error: header Content-Type has unexpected value")
    try:
        parsed = json.loads(body)
    except ValueError:
        raise HttpError(400, "request body has an error: failed to decode request body") from None
    if not isinstance(parsed, dict):
        raise HttpError(400, "request body has an error: value must be an object")
    return parsed


async def _raw(send: Send, status: int, body: bytes, content_type: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, answer: Any) -> None:
    body = b"" if answer is None else json.dumps(answer).encode()
    await _raw(send, status, body, "application/json; charset=utf-8")


async def _chunk(send: Send, message: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": _envelope(message), "more_body": True})


async def _stream_end(send: Send, message: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": _envelope(message, 0x02)})
