"""The webhook-tool caller (``agentsvc_adapters.webhooks``) as the customer's
endpoint sees it: the signed request, and during a signing-secret rotation a
signature for each secret, so that a receiver still on the old secret and one
already on the new both accept the call (docs/byok.md, "Verifying the signature").
A loopback server records each request (nothing leaves the host)."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.webhooks import HttpWebhookCaller
from agentsvc_core.ports.webhooks import WebhookCall
from tests.outbound import fake_dns
from tests.unit.test_mutants_resolver import Webhook

BODY = b'{"tool": "lookup_order", "arguments": {"orderId": "A-1"}}'


@pytest.fixture
async def endpoint() -> AsyncIterator[Webhook]:
    hook = Webhook()
    hook.body = b'{"status": "shipped"}'
    await hook.start()
    yield hook
    await hook.stop()


@pytest.fixture
async def caller() -> AsyncIterator[HttpWebhookCaller]:
    guard = OutboundGuard(
        allow_private_network=True, resolver=fake_dns({"tools.example.test": ["127.0.0.1"]})
    )
    client = HttpWebhookCaller(guard)
    yield client
    await client.aclose()


def _call(port: int, secrets: list[str]) -> WebhookCall:
    return WebhookCall(
        url=f"http://tools.example.test:{port}/tools",
        method="POST",
        headers={"X-Key": "k-1"},
        body=BODY,
        secrets=secrets,
        timeout_ms=3000,
        max_bytes=64 * 1024,
        idempotency_key="idem-1",
    )


def accepts(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """What a receiver that knows ``secret`` checks: one of the space-separated
    signatures is the HMAC-SHA256 of "{timestamp}.{nonce}.{body}"."""
    message = f"{headers['x-service-timestamp']}.{headers['x-service-nonce']}.".encode() + body
    expected = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, s) for s in headers["x-service-signature"].split())


async def test_a_call_is_signed_with_the_organizations_secret(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    answer = await caller.call(_call(endpoint.port, ["whsec-now"]))
    assert (answer.outcome, answer.status_code, answer.body) == ("ok", 200, '{"status": "shipped"}')
    [(line, headers, body)] = endpoint.requests
    assert (line, body) == ("POST /tools HTTP/1.1", BODY)
    assert (headers["x-key"], headers["idempotency-key"]) == ("k-1", "idem-1")
    assert headers["content-type"] == "application/json"
    assert str(uuid.UUID(headers["x-service-nonce"])) == headers["x-service-nonce"]
    assert len(headers["x-service-signature"].split()) == 1
    assert accepts("whsec-now", headers, body)
    assert not accepts("whsec-other", headers, body)


async def test_during_a_rotation_a_receiver_on_either_secret_accepts_the_call(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    """The organization's secrets, newest first: both sign the call."""
    answer = await caller.call(_call(endpoint.port, ["whsec-new", "whsec-old"]))
    assert answer.outcome == "ok", answer
    [(_, headers, body)] = endpoint.requests
    assert len(headers["x-service-signature"].split()) == 2
    assert accepts("whsec-new", headers, body)  # a receiver already moved to the new one
    assert accepts("whsec-old", headers, body)  # one not yet moved
    assert not accepts("whsec-other", headers, body)
    # newest first
    first = headers["x-service-signature"].split()[0]
    message = f"{headers['x-service-timestamp']}.{headers['x-service-nonce']}.".encode() + body
    assert first == hmac.new(b"whsec-new", message, hashlib.sha256).hexdigest()
