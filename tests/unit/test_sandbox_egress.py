"""The local sandbox's egress proxy (agentsvc_adapters/sandboxes/egress.py) against
loopback servers, and its path checks (workspace.py): which hosts are served, how
a request is sent on, what a refusal answers."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes import egress
from agentsvc_adapters.sandboxes.egress import EgressProxy, _Refusal, _target, host_allowed
from agentsvc_adapters.sandboxes.workspace import parts_of
from agentsvc_core.errors import InvalidInput


def test_the_allowlist_names_hosts_exactly_or_under_a_wildcard() -> None:
    allowed = frozenset({"pypi.org", "*.github.com"})
    assert host_allowed("pypi.org", allowed)
    assert host_allowed("api.github.com", allowed)
    assert host_allowed("a.b.github.com", allowed)
    assert not host_allowed("github.com", allowed), "*.x does not name x itself"
    assert not host_allowed("evilgithub.com", allowed)
    assert not host_allowed("pypi.org.evil.com", allowed)
    assert not host_allowed("files.pypi.org", allowed)


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("a/b.txt", ["a", "b.txt"]),
        ("./a/./b", ["a", "b"]),
        (".", []),
        ("", []),
        ("/workspace", []),
        ("/workspace/src/x.py", ["src", "x.py"]),
    ],
)
def test_paths_inside_the_workspace(path: str, parts: list[str]) -> None:
    assert parts_of(path) == parts


@pytest.mark.parametrize(
    "path", ["..", "a/../b", "/etc/passwd", "/workspace/../etc", "/workspacex/a", "a\x00b"]
)
def test_paths_leaving_the_workspace(path: str) -> None:
    with pytest.raises(InvalidInput):
        parts_of(path)


class Upstream:
    """A loopback server that records the request it got and answers 200."""

    def __init__(self) -> None:
        self.got = b""
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.got = await reader.readuntil(b"\r\n\r\n")
        if b"Content-Length: 4" in self.got:
            self.got += await reader.readexactly(4)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[Upstream, int]]:
    up = Upstream()
    server = await asyncio.start_server(up.handle, "127.0.0.1", 0)
    async with server:
        yield up, server.sockets[0].getsockname()[1]


async def ask(proxy: EgressProxy, request: bytes) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "egress.sock"
        await proxy.open(path, owner=os.getuid())
        try:
            reader, writer = await asyncio.open_unix_connection(str(path))
            writer.write(request)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 10)
            writer.close()
        finally:
            await proxy.close()
    return answer


async def test_an_absolute_uri_is_sent_on_in_origin_form_without_proxy_headers(
    upstream: tuple[Upstream, int],
) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    answer = await ask(
        proxy,
        f"POST http://127.0.0.1:{port}/a/b?c=d HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n"
        "Content-Length: 4\r\n\r\nbody".encode(),
    )
    assert answer.endswith(b"\r\n\r\nok")
    head, body = up.got.split(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /a/b?c=d HTTP/1.1"
    assert f"Host: 127.0.0.1:{port}" in lines
    assert "Connection: close" in lines
    assert not [line for line in lines if line.lower().startswith("proxy-")]
    assert body == b"body"


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        ("GET http://localhost:{port}/ HTTP/1.1", b"403"),  # not in the allowlist
        ("CONNECT 10.0.0.1:443 HTTP/1.1", b"403"),
        ("GET https://127.0.0.1:{port}/ HTTP/1.1", b"400"),  # https goes by CONNECT
        ("GET /relative HTTP/1.1", b"400"),
        ("GET http://user@127.0.0.1:{port}/ HTTP/1.1", b"400"),
        ("NONSENSE", b"400"),
    ],
)
async def test_refusals(upstream: tuple[Upstream, int], request_line: str, status: bytes) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1", "*.example"))
    answer = await ask(proxy, request_line.format(port=port).encode() + b"\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 " + status)
    assert up.got == b"", "nothing reached the server"


async def test_the_outbound_guard_has_the_last_word(upstream: tuple[Upstream, int]) -> None:
    up, port = upstream
    strict = EgressProxy(OutboundGuard(allow_private_network=False), ("127.0.0.1",))
    answer = await ask(strict, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403")
    assert b"outbound guard" in answer
    assert up.got == b""


async def test_an_unreachable_host_is_a_bad_gateway() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    answer = await ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 502")
    assert b"could not reach 127.0.0.1" in answer


def test_wildcards_and_names_are_normalised_and_bad_entries_dropped() -> None:
    proxy = EgressProxy(
        OutboundGuard(allow_private_network=True),
        ("not a host", "PyPI.org.", "*.[::1", "*.GitHub.com", "*.Bücher.example"),
    )
    assert proxy._allowed == frozenset({"pypi.org", "*.github.com", "*.xn--bcher-kva.example"})


async def test_a_refusal_is_a_plain_text_answer_that_closes(upstream: tuple[Upstream, int]) -> None:
    _, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    answer = await ask(proxy, f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n".encode())
    body = b"localhost is not in this sandbox's allowed hosts\n"
    assert answer == (
        b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
    )


@pytest.mark.parametrize(
    ("request_head", "answer_start"),
    [
        (b"GET https://x/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"GET http://x/ SPDY/3\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"GET http://x/\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b" http://x/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"GET http://:80/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"GET http://x:99999/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"GET http://[zz]/ HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"CONNECT [zz]:443 HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"CONNECT [::1 HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
        (b"CONNECT a@127.0.0.1:1 HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),
    ],
)
async def test_malformed_requests_are_bad_requests(
    request_head: bytes, answer_start: bytes
) -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1", "x"))
    assert (await ask(proxy, request_head)).startswith(answer_start)


async def test_the_reasons_of_bad_requests() -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("x",))
    assert (await ask(proxy, b"GET https://x/ HTTP/1.1\r\n\r\n")).endswith(
        b"\r\n\r\nonly CONNECT and absolute http:// URIs are proxied\n"
    )
    assert (await ask(proxy, b"GET http://x/ FTP\r\n\r\n")).endswith(
        b"\r\n\r\nnot an HTTP/1.x request\n"
    )
    assert (await ask(proxy, b"GET http://u@x/ HTTP/1.1\r\n\r\n")).endswith(
        b"\r\n\r\nthe request names no host\n"
    )


async def test_a_head_past_the_limit_is_refused(upstream: tuple[Upstream, int]) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    start = f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX: ".encode()
    big = start + b"a" * (16_384 - len(start) - 3) + b"\r\n\r\n"
    assert len(big) == 16_385
    answer = await ask(proxy, big)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert answer.endswith(b"the request is too large\n")
    assert up.got == b""
    at_limit = big[:-5] + b"\r\n\r\n"
    assert len(at_limit) == 16_384
    assert (await ask(proxy, at_limit)).endswith(b"\r\n\r\nok")


async def test_connect_answers_established_then_tunnels(upstream: tuple[Upstream, int]) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    answer = await ask(
        proxy,
        f"connect 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\nHost: h\r\n\r\n".encode(),
    )
    assert answer.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
    assert up.got == b"GET /t HTTP/1.1\r\nHost: h\r\n\r\n", "the tunnel carries bytes as they are"


async def test_the_connection_headers_are_replaced_and_the_default_path_is_slash(
    upstream: tuple[Upstream, int],
) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    await ask(
        proxy,
        f"get http://127.0.0.1:{port} HTTP/1.0\r\nConnection: keep-alive\r\n"
        "Keep-Alive: 5\r\nX-Kept: a:b\r\n\r\n".encode(),
    )
    assert up.got == b"get / HTTP/1.0\r\nX-Kept: a:b\r\nConnection: close\r\n\r\n"


async def test_the_socket_is_the_owner_s_alone(tmp_path: Path) -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ())
    path = tmp_path / "egress.sock"
    await proxy.open(path, owner=os.getuid())
    try:
        info = path.stat()
        assert info.st_mode & 0o777 == 0o600
        assert (info.st_uid, info.st_gid) == (os.getuid(), os.getuid())
    finally:
        await proxy.close()


async def test_close_cuts_the_connections_still_open(tmp_path: Path) -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ())
    path = tmp_path / "egress.sock"
    await proxy.open(path, owner=os.getuid())
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(b"GET http://x/ HTTP/1.1\r\n")  # a head that never ends
    await writer.drain()
    for _ in range(100):
        if proxy._tasks:
            break
        await asyncio.sleep(0.01)
    assert proxy._tasks
    await proxy.close()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    assert not proxy._tasks
    writer.close()


async def test_a_dropped_header_whose_value_holds_a_colon_is_still_dropped(
    upstream: tuple[Upstream, int],
) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    await ask(
        proxy,
        f"GET http://127.0.0.1:{port}/p HTTP/1.1 extra\r\n"
        "Proxy-Authorization: Basic a:b\r\n\r\n".encode(),
    )
    assert up.got == b"GET /p HTTP/1.1 extra\r\nConnection: close\r\n\r\n"


def test_the_target_s_parts_and_default_ports() -> None:
    assert _target("CONNECT", "h.example") == ("https://h.example/", "h.example", 443, "/")
    assert _target("GET", "http://h.example") == ("http://h.example/", "h.example", 80, "/")
    assert _target("GET", "HTTP://h.example:8/a?b") == (
        "http://h.example:8/",
        "h.example",
        8,
        "/a?b",
    )
    for method, target in (
        ("CONNECT", ":443"),
        ("GET", "http://x:99999/"),
        ("GET", "http://[zz]/"),
    ):
        with pytest.raises(_Refusal) as refused:
            _target(method, target)
        assert (refused.value.status, refused.value.reason, str(refused.value)) == (
            "400 Bad Request",
            "the request names no host",
            "the request names no host",
        )


@pytest.mark.parametrize(
    ("guard", "allowed", "target", "status", "reason"),
    [
        (True, ("a..b",), "a..b:1", "400 Bad Request", "the request names no valid host"),
        (
            False,
            ("127.0.0.1",),
            "127.0.0.1:{port}",
            "403 Forbidden",
            "refused by the outbound guard: ",
        ),
        (False, ("localhost",), "localhost:{port}", "403 Forbidden", ""),
    ],
)
async def test_each_refusal_s_status_and_reason(
    upstream: tuple[Upstream, int],
    guard: bool,
    allowed: tuple[str, ...],
    target: str,
    status: str,
    reason: str,
) -> None:
    up, port = upstream
    proxy = EgressProxy(OutboundGuard(allow_private_network=guard), allowed)
    answer = await ask(proxy, f"CONNECT {target.format(port=port)} HTTP/1.1\r\n\r\n".encode())
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(f"HTTP/1.1 {status}\r\n".encode())
    assert body.decode().startswith(reason)
    assert len(body) > len(reason) + 1 or reason.endswith("host")
    assert up.got == b""


async def test_an_unreachable_host_s_status_is_exact() -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ("127.0.0.1",))
    answer = await ask(proxy, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")


async def test_names_are_resolved_by_the_guard_s_resolver(upstream: tuple[Upstream, int]) -> None:
    up, port = upstream

    async def dns(host: str, port: int) -> list[str]:
        assert host == "upstream.test"
        return ["127.0.0.1"]

    guard = OutboundGuard(allow_private_network=True, resolver=dns)
    proxy = EgressProxy(guard, ("upstream.test",))
    answer = await ask(proxy, f"GET http://upstream.test:{port}/ HTTP/1.1\r\n\r\n".encode())
    assert answer.endswith(b"\r\n\r\nok")
    assert up.got.startswith(b"GET / HTTP/1.1\r\n")


async def test_a_refusal_by_the_allowlist_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ())
    with caplog.at_level(logging.INFO, logger="agentsvc.sandbox.egress"):
        await ask(proxy, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
    assert [r.getMessage() for r in caplog.records] == [
        "sandbox egress refused: evil.example is not in the allowlist"
    ]


async def test_a_client_that_sends_no_head_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(egress, "_HEAD_TIMEOUT", 0.1)
    proxy = EgressProxy(OutboundGuard(allow_private_network=True), ())
    path = tmp_path / "egress.sock"
    await proxy.open(path, owner=os.getuid())
    try:
        reader, writer = await asyncio.open_unix_connection(str(path))
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
    finally:
        await proxy.close()


async def test_a_name_that_resolves_to_a_private_address_is_refused_by_the_backend(
    upstream: tuple[Upstream, int],
) -> None:
    up, port = upstream

    async def dns(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    guard = OutboundGuard(allow_private_network=False, resolver=dns)
    proxy = EgressProxy(guard, ("upstream.test",))
    answer = await ask(proxy, f"CONNECT upstream.test:{port} HTTP/1.1\r\n\r\n".encode())
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    # the URL check passed (a name); the backend refused the address it resolves to
    assert body == b"refused by the outbound guard: upstream.test resolves to a loopback address\n"
    assert up.got == b""
