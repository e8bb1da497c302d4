"""The credential-resolver webhook as its receiver sees it: the exact request, the
signature a receiver recomputes, and every answer that must fall back to the
platform key. A loopback server records each request (nothing leaves the host).
Written to kill the mutants `make mutation` found alive in
``agentsvc_adapters.resolver`` (docs/development.md)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.resolver import HttpCredentialResolver
from agentsvc_adapters.signing import sign
from agentsvc_core.ports.resolver import Resolution, ResolverRequest
from tests.outbound import closed_port, fake_dns

REQUEST = ResolverRequest(user_id="u-1", org_id="acme", provider="beta", model="gpt-x")
LIMIT = 64 * 1024


class Webhook:
    """A loopback HTTP/1.1 server: records each request's head and body (header
    names lowercased; ``names`` keeps them as sent), answers ``status`` with
    ``body`` and ``content_type`` (None: no such header), optionally after
    ``delay`` seconds or a byte at a time every ``drip`` seconds; with ``hang_up``,
    closes the connection unanswered."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b'{"apiKey": "sk-user"}'
        self.content_type: bytes | None = b"application/json"
        self.extra_head = b""
        self.delay = 0.0
        self.drip = 0.0
        self.hang_up = False
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.names: list[list[str]] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.strip().split("\r\n")
            headers = {}
            names = []
            for line in lines:
                name, _, value = line.partition(":")
                names.append(name.strip())
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append((request_line, headers, body))
            self.names.append(names)
            await asyncio.sleep(self.delay)
            if self.hang_up:
                return
            typed = (
                b"" if self.content_type is None else b"content-type: %s\r\n" % self.content_type
            )
            writer.write(
                b"HTTP/1.1 %d X\r\n%s%s"
                b"content-length: %d\r\nconnection: close\r\n\r\n"
                % (self.status, typed, self.extra_head, len(self.body))
            )
            if self.drip:
                for i in range(len(self.body)):
                    writer.write(self.body[i : i + 1])
                    await writer.drain()
                    await asyncio.sleep(self.drip)
            else:
                writer.write(self.body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    await hook.start()
    yield hook
    await hook.stop()


@pytest.fixture
async def resolver() -> AsyncIterator[HttpCredentialResolver]:
    guard = OutboundGuard(
        allow_private_network=True, resolver=fake_dns({"hook.example.test": ["127.0.0.1"]})
    )
    client = HttpCredentialResolver(guard)
    yield client
    await client.aclose()


def url(hook: Webhook) -> str:
    return f"http://hook.example.test:{hook.port}/resolve"


def test_sign_is_hmac_sha256_over_timestamp_nonce_and_body() -> None:
    expected = hmac.new(b"s3cret", b"1700000000.n-1.{}", hashlib.sha256).hexdigest()
    assert sign("s3cret", "1700000000", "n-1", b"{}") == expected
    assert sign("s3cret", "1700000000", "n-1", b"{}") != sign("s3cret", "1700000000", "n-1", b"")
    assert sign("sécret", "1", "n", b"x") == (
        hmac.new("sécret".encode(), b"1.n.x", hashlib.sha256).hexdigest()
    )


async def test_the_request_a_receiver_sees_and_can_verify(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    before = int(time.time())
    answer = await resolver.resolve(url(webhook), REQUEST, ["new", "old"], 2000)
    assert answer == Resolution("sk-user", "key")
    [(request_line, headers, body)] = webhook.requests
    assert request_line == "POST /resolve HTTP/1.1"
    # spelled as docs/byok.md shows them: some receivers read names as they arrive
    assert {"Content-Type", "X-Service-Timestamp", "X-Service-Nonce", "X-Service-Signature"} <= set(
        webhook.names[0]
    )
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "userId": "u-1",
        "orgId": "acme",
        "provider": "beta",
        "model": "gpt-x",
    }
    timestamp, nonce = headers["x-service-timestamp"], headers["x-service-nonce"]
    assert before <= int(timestamp) <= int(time.time())
    assert str(uuid.UUID(nonce)) == nonce
    message = f"{timestamp}.{nonce}.".encode() + body
    assert headers["x-service-signature"] == " ".join(
        hmac.new(s, message, hashlib.sha256).hexdigest() for s in (b"new", b"old")
    )


async def test_each_attempt_has_a_fresh_nonce(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    for _ in range(2):
        await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    nonces = {headers["x-service-nonce"] for _, headers, _ in webhook.requests}
    assert len(nonces) == 2


@pytest.mark.parametrize("status", [201, 204, 302, 401, 500])
async def test_only_a_200_answer_is_used(
    webhook: Webhook, resolver: HttpCredentialResolver, status: int
) -> None:
    webhook.status = status
    if status == 302:
        webhook.extra_head = b"location: /elsewhere\r\n"
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "status", status)
    assert len(webhook.requests) == 1  # a redirect is not followed


async def test_an_answer_of_exactly_the_limit_is_read_and_one_more_byte_is_not(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    body = b'{"apiKey": "sk-big"}'
    webhook.body = body + b" " * (LIMIT - len(body))
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution("sk-big", "key")
    webhook.body += b" "
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "too_large")


@pytest.mark.parametrize(
    "body", [b"not json", b'{"apiKey": 7}', b"[]", b'{"apiKey": "sk-cut'], ids=repr
)
async def test_a_malformed_answer_means_the_platform_key(
    webhook: Webhook, resolver: HttpCredentialResolver, body: bytes
) -> None:
    webhook.body = body
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "malformed")


@pytest.mark.parametrize(
    "body",
    [b'{"apiKey": ""}', b'{"apiKey": null}', b"{}", b'{"apiKey": null, "source": "platform"}'],
    ids=repr,
)
async def test_an_answer_without_a_key_is_the_platform_outcome(
    webhook: Webhook, resolver: HttpCredentialResolver, body: bytes
) -> None:
    webhook.body = body
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "platform")


async def test_a_slow_answer_is_abandoned_at_the_deadline(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    webhook.delay = 5
    started = time.monotonic()
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 300)
    assert answer == Resolution(None, "timeout")
    assert time.monotonic() - started < 2


async def test_the_deadline_bounds_a_body_sent_a_byte_at_a_time(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    """Each byte comes well within any read timeout; only a deadline on the whole
    exchange stops it."""
    webhook.drip = 0.05
    webhook.body = b'{"apiKey": "sk-slow"}' + b" " * 100
    started = time.monotonic()
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 400)
    assert answer == Resolution(None, "timeout")
    assert time.monotonic() - started < 2


async def test_a_connection_closed_unanswered_is_unreachable(
    webhook: Webhook, resolver: HttpCredentialResolver
) -> None:
    webhook.hang_up = True
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "unreachable")
    assert len(webhook.requests) == 1


async def test_a_port_nobody_listens_on_is_unreachable(resolver: HttpCredentialResolver) -> None:
    with closed_port() as port:
        target = f"http://hook.example.test:{port}/resolve"
        answer = await resolver.resolve(target, REQUEST, ["s"], 2000)
    assert answer == Resolution(None, "unreachable")


async def test_the_key_is_in_no_log_line(
    webhook: Webhook, resolver: HttpCredentialResolver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    webhook.body = b'{"apiKey": "sk-never-logged-7c1d"}'
    answer = await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert answer.key == "sk-never-logged-7c1d"
    webhook.status = 500
    await resolver.resolve(url(webhook), REQUEST, ["s"], 2000)
    assert "sk-never-logged-7c1d" not in caplog.text


async def test_a_refused_url_is_logged_with_its_reason(
    webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    guard = OutboundGuard(allow_private_network=False, resolver=fake_dns({}))
    strict = HttpCredentialResolver(guard)
    caplog.set_level(logging.WARNING, "agentsvc.outbound")
    try:
        target = f"http://127.0.0.1:{webhook.port}/resolve"
        assert await strict.resolve(target, REQUEST, ["s"], 2000) == Resolution(None, "refused")
    finally:
        await strict.aclose()
    assert webhook.requests == []
    reason = guard.refusal(f"http://127.0.0.1:{webhook.port}/resolve")
    assert reason
    assert f"refused by the outbound guard: credential resolver: {reason}" in caplog.text


async def _logged(
    resolver: HttpCredentialResolver, target: str, caplog: pytest.LogCaptureFixture
) -> list[str]:
    caplog.clear()
    await resolver.resolve(target, REQUEST, ["s"], 300)
    return [r.getMessage() for r in caplog.records if r.name == "agentsvc.resolver"]


async def test_each_fall_back_to_the_platform_key_is_logged_with_why(
    webhook: Webhook, resolver: HttpCredentialResolver, caplog: pytest.LogCaptureFixture
) -> None:
    """What an operator reads to learn why a call did not use the user's key."""
    caplog.set_level(logging.INFO, "agentsvc.resolver")
    webhook.status = 503
    assert await _logged(resolver, url(webhook), caplog) == [
        "credential resolver answered 503: platform key"
    ]
    webhook.status = 200
    webhook.body = b" " * (LIMIT + 1)
    assert await _logged(resolver, url(webhook), caplog) == [
        "credential resolver answer too large: platform key"
    ]
    webhook.body = b"not json"
    assert await _logged(resolver, url(webhook), caplog) == [
        "credential resolver answer is malformed: platform key"
    ]
    webhook.delay = 5
    assert await _logged(resolver, url(webhook), caplog) == [
        "credential resolver timed out: platform key"
    ]
    with closed_port() as port:
        target = f"http://hook.example.test:{port}/resolve"
        assert await _logged(resolver, target, caplog) == [
            "credential resolver: could not reach hook.example.test: platform key"
        ]
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"hook.example.test": ["127.0.0.1"]})
    )
    strict = HttpCredentialResolver(guard)
    try:
        assert await _logged(strict, "https://hook.example.test/resolve", caplog) == [
            "credential resolver: refused by the outbound guard: hook.example.test resolves"
            " to a loopback address: platform key"
        ]
    finally:
        await strict.aclose()
