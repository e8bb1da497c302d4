"""Error answers of the real service map to the client's exception tree, with the
body's ``error`` and ``detail``, the status and the ``X-Request-Id``."""

from __future__ import annotations

import time
import uuid

import httpx
import jwt
import pytest

from agentsvc_client import (
    AgentsvcError,
    APIConnectionError,
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    Error,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ReplyError,
    ThreadBusy,
    Unauthorized,
    UnsupportedMediaType,
    ValidationError,
    errors,
)
from tests.client.conftest import JWT_SECRET, KEY
from tests.e2e.service import Service, free_port

pytestmark = pytest.mark.e2e

MISSING = "00000000-0000-4000-8000-000000000000"


def test_statuses_map_to_the_tree(memory_service: Service) -> None:
    with Client(memory_service.url, KEY) as c:
        with pytest.raises(NotFound) as nf:
            c.agents.get(MISSING)
        assert (nf.value.status, nf.value.error) == (404, "NOT_FOUND")
        assert nf.value.detail
        assert nf.value.request_id
    # the request id is the answer's X-Request-Id: the service echoes the caller's
    with Client(memory_service.url, KEY, headers={"X-Request-Id": "client-test-42"}) as c:
        with pytest.raises(NotFound) as nf:
            c.agents.get(MISSING)
        assert nf.value.request_id == "client-test-42"
        assert "client-test-42" not in str(nf.value.detail)

    with Client(memory_service.url, KEY) as c:
        with pytest.raises(ValidationError) as bad:
            c.agents.create(name="")
        assert (bad.value.status, bad.value.error) == (422, "VALIDATION_ERROR")
        assert "name" in (bad.value.detail or "")

        agent = c.agents.create(name="Errors")
        thread = c.threads.create(agent_id=agent.id)
        stream = c.send_message(thread.id, "slowly, please")
        next(iter(stream))  # the reply runs
        with pytest.raises(ThreadBusy) as busy:
            c.send_message(thread.id, "me too").final()
        assert isinstance(busy.value, Conflict)
        assert (busy.value.status, busy.value.error) == (409, "THREAD_BUSY")
        assert c.threads.stop(thread.id).ok is True
        assert stream.final().stopped is True

        with pytest.raises(PayloadTooLarge) as big:
            c.agents.create(name="x", stable_preamble="y" * 3_000_000)
        assert big.value.status == 413

    with Client(memory_service.url, "ask_not_a_key_0123456789abcdefghijklmnop") as anon:
        with pytest.raises(Unauthorized) as who:
            anon.agents.list()
        assert (who.value.status, who.value.error) == (401, "UNAUTHORIZED")


def test_bad_json_and_bad_media_types(memory_service: Service) -> None:
    # the client never sends malformed JSON: the raw answer maps all the same
    h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    with httpx.Client(base_url=memory_service.url, headers=h) as raw:
        exc = errors.from_response(raw.post("/api/agents", content=b"{not json"))
    assert isinstance(exc, BadRequest)
    assert (exc.status, exc.error) == (400, "BAD_REQUEST")
    assert exc.request_id
    with Client(memory_service.url, KEY) as c, pytest.raises(UnsupportedMediaType) as caught:
        c.knowledge.upload(b"PK\x03\x04", filename="archive.zip")
    assert (caught.value.status, caught.value.error) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert "file" in (caught.value.detail or "")


def test_a_jwt_is_a_bearer_token_and_another_users_thread_is_forbidden(
    memory_service: Service,
) -> None:
    def token(user: str) -> str:
        claims = {"sub": user, "org_id": "default", "exp": int(time.time()) + 600}
        return jwt.encode(claims, JWT_SECRET, algorithm="HS256")

    with Client(memory_service.url, KEY) as admin:
        agent = admin.agents.create(name="Shared")
    with Client(memory_service.url, token("alice")) as alice:
        thread = alice.threads.create(agent_id=agent.id)
        assert thread.created_by == "alice"
    with Client(memory_service.url, token("bob")) as bob, pytest.raises(Forbidden) as caught:
        bob.threads.get(thread.id)
    assert (caught.value.status, caught.value.error) == (403, "FORBIDDEN")


def test_a_reply_error_event_is_a_reply_error(memory_service: Service) -> None:
    """A provider that does not answer fails the reply after the stream started: an
    ``error`` event, which ``final()`` raises as ``ReplyError`` with its code."""
    with Client(memory_service.url, KEY) as c:
        agent = c.agents.create(name="Fails")
        thread = c.threads.create(agent_id=agent.id)
        events = list(c.send_message(thread.id, "hi", model_override="beta:gone"))
        last = events[-1]
        assert isinstance(last, Error)
        assert last.code.startswith("PROVIDER_")
        with pytest.raises(ReplyError) as caught:
            c.send_message(thread.id, "again", model_override="beta:gone").final()
        assert caught.value.error == last.code
        assert caught.value.status is None


def test_no_service_is_a_connection_error() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", KEY, timeout=5) as c:
        with pytest.raises(APIConnectionError) as caught:
            c.agents.list()
        assert isinstance(caught.value, AgentsvcError)
        assert caught.value.status is None


async def test_async_errors(memory_service: Service) -> None:
    async with AsyncClient(memory_service.url, KEY) as c:
        with pytest.raises(NotFound) as nf:
            await c.threads.get(str(uuid.uuid4()))
        assert nf.value.request_id
        with pytest.raises(NotFound):
            await c.send_message(str(uuid.uuid4()), "hi").final()
