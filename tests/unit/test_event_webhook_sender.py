"""The event webhooks' sender (``agentsvc_adapters.event_webhooks``) through its one
call: what each outcome answers (a 2xx, any other status, a redirect not followed,
no answer in time, an answer that never ends, a refused or unreachable endpoint, a
request that cannot be built), what it sends, and what it logs. A loopback server
answers (nothing leaves the host). Written from the mutants `make mutation
SELECTION=event_webhooks` found alive (docs/development.md)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.event_webhooks import MAX_ANSWER_BYTES, HttpEventWebhookSender
from agentsvc_adapters.outbound import OutboundGuard
from tests.outbound import closed_port, fake_dns
from tests.unit.test_mutants_resolver import Webhook

HOST = "hooks.example.test"
BODY = b'{"type": "message.created"}'
HEADERS = {"Content-Type": "application/json", "Webhook-Id": "msg_1", "Webhook-Signature": "v1,x"}


@pytest.fixture
async def endpoint() -> AsyncIterator[Webhook]:
    hook = Webhook()
    hook.body = b"ok"
    await hook.start()
    yield hook
    await hook.stop()


def _sender(*, private: bool = True) -> HttpEventWebhookSender:
    guard = OutboundGuard(allow_private_network=private, resolver=fake_dns({HOST: ["127.0.0.1"]}))
    return HttpEventWebhookSender(guard)


@pytest.fixture
async def sender() -> AsyncIterator[HttpEventWebhookSender]:
    client = _sender()
    yield client
    await client.aclose()


def _url(port: int) -> str:
    return f"http://{HOST}:{port}/events"


async def test_a_2xx_is_a_delivery_and_the_event_goes_out_as_given(
    endpoint: Webhook, sender: HttpEventWebhookSender
) -> None:
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 5.0)
    assert (answer.status_code, answer.error) == (200, None)
    assert answer.duration_ms >= 0
    [(line, headers, body)] = endpoint.requests
    assert line.startswith("POST /events ")
    assert body == BODY
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-signature"] == "v1,x"
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize(("status", "error"), [(204, None), (299, None), (300, "HTTP 300")])
async def test_the_2xx_range_is_a_delivery_and_nothing_past_it(
    endpoint: Webhook, sender: HttpEventWebhookSender, status: int, error: str | None
) -> None:
    endpoint.status = status
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 5.0)
    assert (answer.status_code, answer.error) == (status, error)


@pytest.mark.parametrize("status", [404, 500])
async def test_any_other_status_is_a_failed_attempt_naming_it(
    endpoint: Webhook, sender: HttpEventWebhookSender, status: int
) -> None:
    endpoint.status = status
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 5.0)
    assert (answer.status_code, answer.error) == (status, f"HTTP {status}")


async def test_a_redirect_is_not_followed(
    endpoint: Webhook, sender: HttpEventWebhookSender
) -> None:
    endpoint.status = 307
    endpoint.extra_head = f"location: http://{HOST}:{endpoint.port}/elsewhere\r\n".encode()
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 5.0)
    assert (answer.status_code, answer.error) == (307, "HTTP 307")
    assert len(endpoint.requests) == 1


async def test_no_answer_in_time_is_a_failed_attempt_saying_so(
    endpoint: Webhook, sender: HttpEventWebhookSender
) -> None:
    endpoint.delay = 5.0
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 0.25)
    assert answer.status_code is None
    assert answer.error == "no answer within 0.25 s"
    # it waited for the answer at least as long as the bound, and reports so
    assert answer.duration_ms >= 250
    assert answer.duration_ms < 60_000


async def test_an_answer_trickling_in_is_bounded_as_a_whole(
    endpoint: Webhook, sender: HttpEventWebhookSender
) -> None:
    """Each byte comes well within the client's read timeout; the whole exchange
    still ends at the bound."""
    endpoint.body = b"x" * 1000
    endpoint.drip = 0.05
    answer = await sender.send(_url(endpoint.port), HEADERS, BODY, 0.5)
    assert answer.status_code is None
    assert answer.error == "no answer within 0.5 s"


class _Endless:
    """Answers 200, then ``size`` bytes of a body that never ends (no length, the
    connection held open): a client that reads it all waits forever."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> _Endless:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n" + b"y" * self.size)
        await writer.drain()
        await reader.read()  # until the client hangs up


async def test_an_answer_past_the_cap_is_dropped_and_only_its_status_counts(
    sender: HttpEventWebhookSender,
) -> None:
    """Once more than ``MAX_ANSWER_BYTES`` came, the sender stops reading: an
    endpoint streaming forever is still a delivery, well before the bound."""
    assert MAX_ANSWER_BYTES == 64 * 1024
    async with _Endless(MAX_ANSWER_BYTES + 1) as server:
        answer = await sender.send(_url(server.port), HEADERS, BODY, 30.0)
    assert (answer.status_code, answer.error) == (200, None)


async def test_an_answer_within_the_cap_is_read_to_its_end(
    sender: HttpEventWebhookSender,
) -> None:
    """At the cap, not past it, the sender still waits for the rest (here, for
    ever: the bound ends it)."""
    async with _Endless(MAX_ANSWER_BYTES) as server:
        answer = await sender.send(_url(server.port), HEADERS, BODY, 0.5)
    assert (answer.status_code, answer.error) == (None, "no answer within 0.5 s")


async def test_an_endpoint_the_guard_refuses_is_never_called(
    endpoint: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    client = _sender(private=False)
    try:
        with caplog.at_level(logging.INFO):
            answer = await client.send(f"https://127.0.0.1:{endpoint.port}/events", {}, BODY, 5.0)
    finally:
        await client.aclose()
    assert answer.status_code is None
    assert answer.error is not None
    assert "127.0.0.1" in answer.error
    assert "private" in answer.error or "loopback" in answer.error
    assert answer.duration_ms >= 0
    assert endpoint.requests == []
    assert any("refused by the outbound guard" in r.getMessage() for r in caplog.records)


async def test_a_name_resolving_to_a_refused_address_is_refused_at_connect_time(
    endpoint: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    """The URL passes the early check (a name); its address does not. The answer
    is the guard's refusal, not "could not reach", and no delivery failure is
    logged beside the guard's own line."""
    client = _sender(private=False)
    try:
        with caplog.at_level(logging.INFO):
            answer = await client.send(f"https://{HOST}:{endpoint.port}/events", {}, BODY, 5.0)
    finally:
        await client.aclose()
    assert answer.status_code is None
    assert answer.error is not None
    assert answer.error == f"refused by the outbound guard: {HOST} resolves to a loopback address"
    assert endpoint.requests == []
    assert not any("delivery failed" in r.getMessage() for r in caplog.records)


async def test_an_unreachable_endpoint_is_a_failed_attempt_naming_only_its_host(
    sender: HttpEventWebhookSender, caplog: pytest.LogCaptureFixture
) -> None:
    with closed_port() as port, caplog.at_level(logging.INFO, logger="agentsvc.event_webhooks"):
        answer = await sender.send(_url(port), {"Webhook-Signature": "v1,secret"}, BODY, 5.0)
    assert (answer.status_code, answer.error) == (None, f"could not reach {HOST}")
    [record] = [r for r in caplog.records if r.name == "agentsvc.event_webhooks"]
    assert record.levelno == logging.INFO
    assert record.getMessage() == f"event webhook delivery failed: could not reach {HOST}"


async def test_a_request_that_cannot_be_built_is_a_failed_attempt(
    endpoint: Webhook, sender: HttpEventWebhookSender
) -> None:
    answer = await sender.send(_url(endpoint.port), {"X-Bad": "caf\u00e9 \u2603"}, BODY, 5.0)
    assert (answer.status_code, answer.error) == (None, "the request could not be built")
    assert endpoint.requests == []


async def test_a_url_the_guard_refuses_early_is_never_resolved(endpoint: Webhook) -> None:
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    client = HttpEventWebhookSender(OutboundGuard(allow_private_network=False, resolver=resolve))
    try:
        answer = await client.send(_url(endpoint.port), {}, BODY, 5.0)
    finally:
        await client.aclose()
    assert (answer.status_code, answer.error) == (
        None,
        "plain http:// is refused, use https:// (AGENTSVC_ALLOW_PRIVATE_NETWORK=true allows it)",
    )
    assert asked == []
    assert endpoint.requests == []
