"""``agentsvc_client.verify_webhook`` against Standard Webhooks' reference library
(``standardwebhooks``): what it signs verifies, and nothing else does; and the
client's ``event_webhooks`` methods against a real service."""

from __future__ import annotations

import base64
import json
import os
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from agentsvc_client import Client, WebhookVerificationError, verify_webhook
from tests.client.conftest import KEY
from tests.e2e.service import Service

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
BODY = json.dumps({"type": "run.failed", "timestamp": "2026-11-01T12:00:00Z", "data": {"é": 1}})


def _headers(
    msg_id: str = "msg_1", at: float | None = None, secret: str = SECRET
) -> dict[str, str]:
    when = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, when, BODY),
    }


def test_what_the_library_signs_verifies() -> None:
    headers = _headers()
    assert verify_webhook(SECRET, headers, BODY.encode())["data"] == {"é": 1}
    assert verify_webhook(SECRET, {k.title(): v for k, v in headers.items()}, BODY)["type"] == (
        "run.failed"
    )
    # a rotation's two signatures: one matching is enough
    other = _headers(secret="whsec_" + base64.b64encode(os.urandom(24)).decode())
    both = {
        **headers,
        "webhook-signature": f"{other['webhook-signature']} {headers['webhook-signature']}",
    }
    assert verify_webhook(SECRET, both, BODY)["type"] == "run.failed"


@pytest.mark.parametrize(
    "change",
    [
        {"webhook-id": "msg_2"},
        {"webhook-signature": "v1,AAAA"},
        {"webhook-signature": "v2,whatever"},
        {"webhook-signature": "v1,not base64!"},
        {"webhook-timestamp": "soon"},
        {"webhook-id": ""},
    ],
)
def test_anything_else_is_refused(change: dict[str, str]) -> None:
    with pytest.raises(WebhookVerificationError):
        verify_webhook(SECRET, {**_headers(), **change}, BODY)


def test_a_changed_body_a_wrong_secret_or_an_old_timestamp_is_refused() -> None:
    with pytest.raises(WebhookVerificationError):
        verify_webhook(SECRET, _headers(), BODY + " ")
    with pytest.raises(WebhookVerificationError):
        verify_webhook("whsec_" + base64.b64encode(b"x" * 32).decode(), _headers(), BODY)
    old = _headers(at=time.time() - 301)
    with pytest.raises(WebhookVerificationError, match="tolerance"):
        verify_webhook(SECRET, old, BODY)
    assert verify_webhook(SECRET, old, BODY, tolerance_s=600)["type"] == "run.failed"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(SECRET, _headers(at=time.time() + 301), BODY)
    with pytest.raises(WebhookVerificationError, match="whsec_"):
        verify_webhook("whsec_???", _headers(), BODY)


@pytest.mark.e2e
def test_the_client_manages_endpoints(memory_service: Service) -> None:
    with Client(memory_service.url, api_key=KEY) as client:
        types = [t.type for t in client.event_webhooks.event_types()]
        assert "message.created" in types
        made = client.event_webhooks.create(url="https://hooks.example/in", events=["run.failed"])
        assert made.secret.startswith("whsec_")
        endpoint = made.endpoint
        assert client.event_webhooks.get(endpoint.id).events == ["run.failed"]
        changed = client.event_webhooks.update(endpoint.id, enabled=False)
        assert changed.enabled is False
        assert client.event_webhooks.deliveries(endpoint.id).deliveries == []
        assert client.event_webhooks.rotate_secret(endpoint.id).secret != made.secret
        client.event_webhooks.delete(endpoint.id)
        assert endpoint.id not in [e.id for e in client.event_webhooks.list()]
