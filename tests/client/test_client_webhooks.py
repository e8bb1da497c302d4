"""``agentsvc_client.webhooks.verify`` against the service's real signature: a webhook
tool on loopback receives the service's signed call (``tools.execute``)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from agentsvc_client import Client, webhooks
from agentsvc_client.webhooks import MemoryNonceCache, WebhookVerificationError, verify
from tests.client.conftest import KEY
from tests.e2e.receivers import read_request
from tests.e2e.service import Service
from tests.web.live import serve

pytestmark = pytest.mark.e2e


class Receiver:
    """Keeps every call's headers and raw body; answers {"ok": true}."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, str], bytes]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, headers = await read_request(scope, receive)
        self.calls.append((headers, body))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"ok": true}'})


def test_the_services_signature_verifies_and_tampering_does_not(memory_service: Service) -> None:
    receiver = Receiver()
    with serve(receiver) as url, Client(memory_service.url, KEY) as c:
        secret = c.settings.get().signing_secret
        name = f"hook_{uuid.uuid4().hex[:8]}"
        c.tools.create(name=name, url=f"{url}/hook", parameters={"type": "object"})
        result = c.tools.execute(name=name, arguments={"city": "Lyon"})
        assert result.ok, result
        # a rotation: the service then signs with both, space-separated
        rotated = c.settings.update(rotate_signing_secret=True).signing_secret
        c.tools.execute(name=name, arguments={"city": "Paris"})
    (headers, body), (headers2, body2) = receiver.calls
    assert b"Lyon" in body

    cache = MemoryNonceCache()
    verify(secret, headers, body, nonce_cache=cache)  # the real call: accepted
    with pytest.raises(WebhookVerificationError, match="replayed"):
        verify(secret, headers, body, nonce_cache=cache)  # the same call again
    with pytest.raises(WebhookVerificationError, match="no signature"):
        verify(secret, headers, body.replace(b"Lyon", b"Nice"))
    with pytest.raises(WebhookVerificationError, match="no signature"):
        verify("not-the-secret", headers, body)
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        verify(secret, headers, body, now=time.time() + 301)  # five minutes later
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        verify(secret, {**headers, "x-service-timestamp": str(int(time.time()) - 600)}, body)

    # during the rotation the call carries two signatures; either secret verifies it,
    # and several secrets may be given
    assert len(headers2["x-service-signature"].split()) == 2
    verify(rotated, headers2, body2)
    verify(secret, headers2, body2)
    verify(["old-and-gone", rotated], headers2, body2)
    # headers in any case
    verify(rotated, {k.upper(): v for k, v in headers2.items()}, body2)
    # sign() is the service's computation
    assert (
        webhooks.sign(rotated, headers2["x-service-timestamp"], headers2["x-service-nonce"], body2)
        in headers2["x-service-signature"].split()
    )


@pytest.mark.parametrize(
    ("timestamp", "signature"),
    [
        ("\u00b2", "ab" * 32),  # a digit to str.isdigit, not to int()
        ("9" * 5000, "ab" * 32),  # longer than int() takes
        (str(int(time.time())), "\u00e9" * 64),  # not ASCII: compare_digest would raise
    ],
    # ids of their own: the parameters hold the time of collection, and parallel
    # workers (pytest-xdist) must collect the same names
    ids=["superscript-digit", "too-long-for-int", "non-ascii-signature"],
)
def test_hostile_headers_are_refused_not_crashed_on(timestamp: str, signature: str) -> None:
    headers = {
        "X-Service-Timestamp": timestamp,
        "X-Service-Nonce": "n-1",
        "X-Service-Signature": signature,
    }
    with pytest.raises(WebhookVerificationError):
        verify("secret", headers, b"{}")


def test_the_nonce_cache_forgets_expired_nonces_only() -> None:
    cache = MemoryNonceCache()
    now = time.time()
    assert cache.add("old", now - 1)
    assert cache.add("new", now + 60)
    assert cache.add("old", now + 60)  # expired: may come again
    assert not cache.add("new", now + 60)
