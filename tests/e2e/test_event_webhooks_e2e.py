"""Event webhooks end to end: the real service process on PostgreSQL (its durable
job queue), the built-in ``local`` model, and a receiver on loopback. The
receiver checks every delivery with Standard Webhooks' reference library
(``standardwebhooks``), not with the service's code. The retry schedule is shrunk
(``AGENTSVC_WEBHOOK_RETRY_SPEEDUP``) so that a day of retries takes seconds."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tests.e2e.receivers import read_request
from tests.e2e.service import Service, client, new_org, running
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

JWT_SECRET = "event-webhooks-e2e-jwt-secret-0123456789abcdefghij"
FAILURES = 3  # the flaky endpoint fails each message this many times, then takes it


class Receiver:
    """Two endpoints: ``/flaky`` answers 500 to the first attempts of each message
    (by its ``webhook-id``), then 200; ``/gone`` answers 410. Every call is
    recorded with whether it verified with the endpoint's secret."""

    def __init__(self) -> None:
        self.secrets: dict[str, str] = {}
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, headers = await read_request(scope, receive)
        path = scope["path"]
        try:
            Webhook(self.secrets[path]).verify(body, headers)
            verified = True
        except (WebhookVerificationError, KeyError):
            verified = False
        with self._lock:
            seen = sum(
                1
                for c in self.calls
                if c["path"] == path and c["headers"].get("webhook-id") == headers.get("webhook-id")
            )
            status = 410 if path == "/gone" else (500 if seen < FAILURES else 200)
            self.calls.append(
                {
                    "path": path,
                    "headers": headers,
                    "body": json.loads(body),
                    "verified": verified,
                    "status": status,
                }
            )
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def at(self, path: str, type_: str) -> list[dict[str, Any]]:
        with self._lock:
            return [c for c in self.calls if c["path"] == path and c["body"]["type"] == type_]


def wait_for(what: Callable[[], Any], why: str, within_s: float = 60.0) -> Any:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"never happened: {why}")


@pytest.fixture(scope="module")
def served(own_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    # a database of its own: another test's service on the shared one would take
    # this one's delivery jobs (and re-queue them), with its own retry schedule
    tmp = tmp_path_factory.mktemp("events")
    with running(
        {
            "AGENTSVC_DATABASE_URL": own_pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
            "AGENTSVC_BOOTSTRAP_ORG": f"events-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_JWT_SECRET": JWT_SECRET,
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # the receiver is on loopback
            # 5 s, 5 min, 30 min... become 5 ms, 0.3 s, 1.8 s...
            "AGENTSVC_WEBHOOK_RETRY_SPEEDUP": "1000",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
        },
        log=tmp / "svc.log",
    ) as svc:
        yield svc


def _endpoint(c: httpx.Client, receiver: Receiver, base: str, path: str, *events: str) -> str:
    r = c.post("/api/webhooks", json={"url": f"{base}{path}", "events": list(events)})
    assert r.status_code == 201, r.text
    receiver.secrets[path] = r.json()["secret"]
    return str(r.json()["endpoint"]["id"])


def test_events_arrive_signed_after_retries_and_a_410_disables(served: Service) -> None:
    receiver = Receiver()
    _, key = new_org(served.url, JWT_SECRET, "events")
    with serve(receiver) as base, client(served, key) as c:
        flaky = _endpoint(c, receiver, base, "/flaky", "message.created", "reply.completed")
        gone = _endpoint(c, receiver, base, "/gone", "message.created")
        agent = c.post("/api/agents", json={"name": "Events"}).json()
        thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
        r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": "hello hooks"})
        assert r.status_code == 200, r.text

        # the message: refused three times, then taken; the same message each time
        taken = wait_for(
            lambda: [x for x in receiver.at("/flaky", "message.created") if x["status"] == 200],
            "the flaky endpoint took the message",
        )
        calls = receiver.at("/flaky", "message.created")
        assert [x["status"] for x in calls] == [500] * FAILURES + [200]
        assert all(x["verified"] for x in calls)
        assert len({x["headers"]["webhook-id"] for x in calls}) == 1
        event = taken[0]["body"]
        assert event["data"]["content"] == "hello hooks"
        assert event["data"]["thread_id"] == thread["id"]
        assert event["data"]["role"] == "user"
        assert taken[0]["headers"]["webhook-signature"].startswith("v1,")

        # the reply too (after its own retries)
        reply = wait_for(
            lambda: [x for x in receiver.at("/flaky", "reply.completed") if x["status"] == 200],
            "the flaky endpoint took the reply",
        )
        assert reply[0]["body"]["data"]["thread_id"] == thread["id"]
        assert reply[0]["body"]["data"]["status"] == "completed"

        # the endpoint's deliveries say what happened, newest first
        def delivered() -> list[dict[str, Any]]:
            rows = c.get(f"/api/webhooks/{flaky}/deliveries").json()["deliveries"]
            return [d for d in rows if d["event_type"] == "message.created"]

        [delivery] = wait_for(
            lambda: [d for d in delivered() if d["status"] == "delivered"],
            "the delivery recorded as delivered",
        )
        assert [a["status_code"] for a in delivery["attempts"]] == [500] * FAILURES + [200]
        assert delivery["event_id"] == taken[0]["headers"]["webhook-id"]

        # a resend: the same message once more, signed afresh
        r = c.post(f"/api/webhooks/{flaky}/deliveries/{delivery['id']}/resend")
        assert r.status_code == 202, r.text
        wait_for(
            lambda: len(receiver.at("/flaky", "message.created")) > FAILURES + 1,
            "the resend arrived",
        )
        # (a new delivery: the receiver counts its attempts by webhook-id, so it takes it)
        again = receiver.at("/flaky", "message.created")[-1]
        assert again["headers"]["webhook-id"] == delivery["event_id"]
        assert again["verified"]

        # 410: the endpoint is disabled, its delivery failed after one attempt
        disabled = wait_for(
            lambda: (e := c.get(f"/api/webhooks/{gone}").json())["enabled"] is False and e,
            "the gone endpoint disabled",
        )
        assert disabled["disabled_reason"] == "the endpoint answered 410 Gone"
        [failed] = c.get(f"/api/webhooks/{gone}/deliveries").json()["deliveries"]
        assert failed["status"] == "failed"
        assert [a["status_code"] for a in failed["attempts"]] == [410]
        assert len(receiver.at("/gone", "message.created")) == 1
    log = served.log_path.read_text(errors="replace")
    assert all(secret not in log for secret in receiver.secrets.values())
