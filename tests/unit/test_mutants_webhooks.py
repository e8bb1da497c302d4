"""The webhook-tool caller (``agentsvc_adapters.webhooks``) through its one public
call: each outcome a tool's answer can have, its bounds at their edges (the size
cap, the deadline, the 2xx range), the guard's refusals before and at connect
time, and what a failure says and logs. A loopback server answers (nothing leaves
the host). Written to kill the mutants `make mutation` found alive in
``agentsvc_adapters.webhooks`` (docs/development.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.webhooks import HttpWebhookCaller
from agentsvc_core.ports.webhooks import WebhookCall
from tests.outbound import closed_port, fake_dns
from tests.unit.test_mutants_resolver import Webhook

HOST = "tools.example.test"
BODY = b'{"tool": "lookup_order", "arguments": {"orderId": "A-1"}}'
CAP = 1000


@pytest.fixture
async def endpoint() -> AsyncIterator[Webhook]:
    hook = Webhook()
    hook.body = b'{"status": "shipped"}'
    await hook.start()
    yield hook
    await hook.stop()


def _guard(*, private: bool) -> OutboundGuard:
    return OutboundGuard(allow_private_network=private, resolver=fake_dns({HOST: ["127.0.0.1"]}))


@pytest.fixture
async def caller() -> AsyncIterator[HttpWebhookCaller]:
    client = HttpWebhookCaller(_guard(private=True))
    yield client
    await client.aclose()


def _call(port: int, **changes: object) -> WebhookCall:
    fields: dict[str, object] = {
        "url": f"http://{HOST}:{port}/tools",
        "method": "POST",
        "headers": {"X-Key": "k-1"},
        "body": BODY,
        "secrets": ["whsec-now"],
        "timeout_ms": 3000,
        "max_bytes": CAP,
        "idempotency_key": "idem-1",
    }
    fields.update(changes)
    return WebhookCall(**fields)  # type: ignore[arg-type]


async def test_the_headers_go_out_spelled_as_documented(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    """docs/byok.md shows the request as sent; a receiver that reads header names
    as they arrive (some gateways hand them over so) finds them spelled so."""
    answer = await caller.call(_call(endpoint.port))
    assert answer.outcome == "ok"
    [names] = endpoint.names
    for name in (
        "Content-Type",
        "Idempotency-Key",
        "X-Service-Timestamp",
        "X-Service-Nonce",
        "X-Service-Signature",
        "X-Key",
    ):
        assert name in names


async def test_a_call_without_an_idempotency_key_sends_none(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    await caller.call(_call(endpoint.port, idempotency_key=None))
    [(_, headers, _)] = endpoint.requests
    assert "idempotency-key" not in headers


async def test_an_answer_says_its_status_body_type_and_duration(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.delay = 0.3
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.status_code) == ("ok", 200)
    assert (answer.body, answer.content_type, answer.reason) == (
        '{"status": "shipped"}',
        "application/json",
        "",
    )
    assert isinstance(answer.duration_ms, int)
    assert 300 <= answer.duration_ms < 3000


async def test_an_answer_without_a_content_type_has_an_empty_one(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.content_type = None
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.content_type) == ("ok", "")


async def test_invalid_utf8_in_an_answer_is_replaced(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.body = b'\xff{"a": "\xc3\xa9"}'
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.body) == ("ok", '\ufffd{"a": "é"}')


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, "ok"), (204, "ok"), (299, "ok"), (300, "status"), (302, "status"), (404, "status")],
)
async def test_only_a_2xx_answer_is_ok(
    endpoint: Webhook, caller: HttpWebhookCaller, status: int, outcome: str
) -> None:
    endpoint.status = status
    endpoint.body = b"" if status == 204 else b"nope"
    if status == 302:
        endpoint.extra_head = b"location: /elsewhere\r\n"
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.status_code) == (outcome, status)
    assert answer.body == ("" if status == 204 else "nope")
    assert len(endpoint.requests) == 1  # a redirect is an answer, not followed


async def test_an_answer_of_exactly_the_cap_is_read_and_one_byte_more_is_too_large(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.body = b"x" * CAP
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, len(answer.body)) == ("ok", CAP)
    endpoint.body = b"x" * (CAP + 1)
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.status_code, answer.body) == ("too_large", 200, "")
    assert answer.reason == f"larger than {CAP} bytes"


async def test_an_answer_that_arrives_in_many_pieces_is_read_whole(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.drip = 0.001
    endpoint.body = bytes(range(48, 58)) * 5
    answer = await caller.call(_call(endpoint.port))
    assert (answer.outcome, answer.body) == ("ok", "0123456789" * 5)


async def test_a_slow_answer_is_a_timeout_at_the_deadline(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    endpoint.delay = 5
    started = time.monotonic()
    answer = await caller.call(_call(endpoint.port, timeout_ms=300))
    assert time.monotonic() - started < 2
    assert (answer.outcome, answer.status_code) == ("timeout", None)
    assert answer.reason == "no answer within 300 ms"


async def test_the_deadline_bounds_an_answer_sent_a_byte_at_a_time(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    """Each byte comes well within any read timeout; only a deadline on the whole
    exchange stops it."""
    endpoint.drip = 0.05
    endpoint.body = b"y" * 100
    started = time.monotonic()
    answer = await caller.call(_call(endpoint.port, timeout_ms=400))
    assert answer.outcome == "timeout"
    assert time.monotonic() - started < 2


async def test_a_refused_url_is_not_called_and_says_why(
    endpoint: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    guard = _guard(private=False)
    strict = HttpWebhookCaller(guard)
    url = f"http://127.0.0.1:{endpoint.port}/tools"
    caplog.set_level(logging.WARNING, "agentsvc.outbound")
    try:
        answer = await strict.call(_call(endpoint.port, url=url))
    finally:
        await strict.aclose()
    reason = guard.refusal(url)
    assert reason
    assert (answer.outcome, answer.reason, answer.status_code) == ("refused", reason, None)
    assert endpoint.requests == []
    assert f"refused by the outbound guard: webhook tool: {reason}" in caplog.text


async def test_a_name_resolving_to_loopback_is_refused_when_connecting(
    endpoint: Webhook,
) -> None:
    strict = HttpWebhookCaller(_guard(private=False))
    try:
        answer = await strict.call(_call(endpoint.port, url=f"https://{HOST}:{endpoint.port}/t"))
    finally:
        await strict.aclose()
    assert answer.outcome == "refused"
    assert answer.reason == (
        f"refused by the outbound guard: {HOST} resolves to a loopback address"
    )
    assert endpoint.requests == []


async def test_a_port_nobody_listens_on_is_unreachable_and_logged_without_headers(
    caller: HttpWebhookCaller, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "agentsvc.webhooks")
    with closed_port() as port:
        answer = await caller.call(_call(port, headers={"X-Key": "k-secret-9"}))
    assert (answer.outcome, answer.reason) == ("unreachable", f"could not reach {HOST}")
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.webhooks"] == [
        f"webhook tool call failed: could not reach {HOST}"
    ]
    assert "k-secret-9" not in caplog.text


async def test_a_request_that_cannot_be_built_is_not_sent(
    endpoint: Webhook, caller: HttpWebhookCaller
) -> None:
    answer = await caller.call(_call(endpoint.port, headers={"X-Key": "clé\u2603"}))
    assert (answer.outcome, answer.reason) == ("unreachable", "the request could not be built")
    assert endpoint.requests == []
