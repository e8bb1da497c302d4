"""The local sandbox's way out: an HTTP(S) egress proxy the service runs on a unix
socket, one per command whose sandbox may reach the network (``network:
"allowlist"``), and the forwarder that runs inside the sandbox.

A sandbox has its own network namespace with only a loopback interface: no route
out at all. For a command that may reach named hosts, the service listens on a
unix socket bound into the sandbox (``/run/agentsvc/egress-*.sock``); programs that
honour ``HTTP_PROXY``/``HTTPS_PROXY`` need a TCP address, so ``FORWARDER`` (run by
the system's ``python3`` inside the sandbox, before the command) listens on
``127.0.0.1:3128`` in the sandbox's namespace and copies each connection to the
socket.

The proxy speaks the two forms of HTTP proxying:

- ``CONNECT host:port`` (what clients send for ``https://``): a tunnel, the TLS
  session stays between the client and the server;
- an absolute URI (``GET http://host:port/path HTTP/1.1``): the request is sent on
  with its target in origin form, ``Proxy-*`` headers removed and
  ``Connection: close`` (one request per connection).

A host is served when it is in the allowlist (a name, or ``*.example.com`` for
the names under it) *and* the outbound guard accepts the URL and every address
the name resolves to: the connection is made by the guard's own network backend,
so private, loopback and metadata addresses are refused as for any other
outbound call (``AGENTSVC_ALLOW_PRIVATE_NETWORK`` lifts that, and plain
``http://`` is refused without it, as everywhere). A refusal answers ``403`` with
the guard's reason; a host that cannot be reached answers ``502``. Nothing else
leaves the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentsvc_adapters.outbound import GuardedBackendV1, OutboundGuard, Refused, normalise_host

__all__ = ["FORWARDER", "FORWARDER_PORT", "EgressProxy", "host_allowed"]

log = logging.getLogger("agentsvc.sandbox.egress")

FORWARDER_PORT = 3128
_HEAD_LIMIT = 16_384  # bytes of a request's line and headers
_HEAD_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 10.0
_CHUNK = 65_536
_DROPPED = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}

# Run inside the sandbox as ``python3 FORWARDER port socket -- command...``: bind
# 127.0.0.1:port, fork a child that copies each connection to the unix socket (one
# thread, asyncio: threads would count against the sandbox's process limit), and
# exec the command in the parent. The child dies with the sandbox.
FORWARDER = r"""
import asyncio, os, socket, sys

port, path, command = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(128)
if os.fork():
    listener.close()
    os.execvp(command[0], command)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)


async def pump(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def serve(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_unix_connection(path)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


async def main():
    server = await asyncio.start_server(serve, sock=listener)
    await server.serve_forever()


asyncio.run(main())
"""


def host_allowed(host: str, allowed: frozenset[str]) -> bool:
    """``host`` (normalised) is named by the allowlist: exactly, or under a
    ``*.suffix`` entry (which does not name ``suffix`` itself)."""
    if host in allowed:
        return True
    return any(a.startswith("*.") and host.endswith(a[1:]) for a in allowed)


def _normalised(hosts: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for host in hosts:
        wildcard = host.startswith("*.")
        try:
            name = normalise_host(host[2:] if wildcard else host)
        except ValueError:
            continue  # the configuration's validation answers for these
        out.add(f"*.{name}" if wildcard else name)
    return frozenset(out)


class _Refusal(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _target(method: str, target: str) -> tuple[str, str, int, str]:
    """(URL for the guard, host, port, origin-form path) of a request's target."""
    try:  # urlsplit refuses a bracketed host that is no address
        parts = urlsplit(f"//{target}" if method == "CONNECT" else target)
    except ValueError:
        raise _Refusal("400 Bad Request", "the request names no host") from None
    if method == "CONNECT":
        scheme, default = "https", 443
    elif parts.scheme.lower() != "http":
        raise _Refusal("400 Bad Request", "only CONNECT and absolute http:// URIs are proxied")
    else:
        scheme, default = "http", 80
    try:
        host, port = parts.hostname, parts.port or default
    except ValueError:
        host = None
    if not host or "@" in parts.netloc:
        raise _Refusal("400 Bad Request", "the request names no host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"{scheme}://{parts.netloc}/", host, port, path


class EgressProxy:
    """One command's egress proxy: ``open`` on a socket path, ``close`` when the
    command ends (which also cuts the connections still open)."""

    def __init__(self, guard: OutboundGuard, allowed_hosts: tuple[str, ...]) -> None:
        self._guard = guard
        self._allowed = _normalised(allowed_hosts)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, path: Path, *, owner: int) -> None:
        # bound through the folder's descriptor: a unix socket's path is limited
        # to 107 bytes, and the data folder may be deep
        folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            short = f"/proc/self/fd/{folder}/{path.name}"
            self._server = await asyncio.start_unix_server(self._serve, path=short)
        finally:
            os.close(folder)
        os.chown(path, owner, owner, follow_symlinks=False)
        os.chmod(path, 0o600, follow_symlinks=False)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: Any = None
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT)
            if len(head) > _HEAD_LIMIT:
                raise _Refusal("431 Request Header Fields Too Large", "the request is too large")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = [*lines[0].split(" "), "", "", ""][:3]
            if not method or not target or not version.startswith("HTTP/1."):
                raise _Refusal("400 Bad Request", "not an HTTP/1.x request")
            upstream = await self._connect(method.upper(), target)
            if method.upper() == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                await upstream.write(_forwarded(lines, target), _CONNECT_TIMEOUT)
            await _pipe(reader, writer, upstream)
        except _Refusal as exc:
            body = f"{exc.reason}\n".encode()
            writer.write(
                f"HTTP/1.1 {exc.status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass
        finally:
            if upstream is not None:
                with contextlib.suppress(Exception):
                    await upstream.aclose()
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()

    async def _connect(self, method: str, target: str) -> Any:
        url, host, port, _ = _target(method, target)
        try:
            name = normalise_host(host)
        except ValueError:
            raise _Refusal("400 Bad Request", "the request names no valid host") from None
        if not host_allowed(name, self._allowed):
            log.info("sandbox egress refused: %s is not in the allowlist", name)
            raise _Refusal("403 Forbidden", f"{name} is not in this sandbox's allowed hosts")
        if (refusal := self._guard.refusal(url)) is not None:
            raise _Refusal("403 Forbidden", f"refused by the outbound guard: {refusal}")
        backend = GuardedBackendV1(
            allow_private_network=self._guard.allow_private_network, resolver=self._guard.resolver
        )
        try:
            return await backend.connect_tcp(host, port, timeout=_CONNECT_TIMEOUT)
        except Refused as exc:
            raise _Refusal("403 Forbidden", str(exc)) from None
        except Exception:  # noqa: BLE001 - every other failure reads the same
            raise _Refusal("502 Bad Gateway", f"could not reach {name}") from None


def _forwarded(lines: list[str], target: str) -> bytes:
    """The request's head as the server gets it: origin-form, no proxy headers."""
    method, _, version = lines[0].split(" ", 2)
    path = _target(method.upper(), target)[3]
    kept = [
        line for line in lines[1:] if line and line.split(":", 1)[0].strip().lower() not in _DROPPED
    ]
    return "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""]).encode(
        "latin-1"
    )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: Any) -> None:
    """Copy both ways until either side ends."""

    async def up() -> None:  # what came after the head first: it is in the buffer
        while data := await reader.read(_CHUNK):
            await upstream.write(data, None)

    async def down() -> None:
        while data := await upstream.read(_CHUNK, None):
            writer.write(data)
            await writer.drain()

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
