"""Provider set-ups a new user tripped on, configured through the environment as
docs/models.md says, against fake providers on loopback: the alpha family with only a
base URL (a proxy that needs no key), and a provider that answers JSON where a stream
was asked for."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.fakes.providers import FakeProvider, Kind, Reply
from tests.sse import parse

MODEL: dict[Kind, str] = {"alpha": "claude-proxy-1", "beta": "gpt-proxy-1"}


def boot(env: dict[str, str]) -> tuple[TestClient[Any], dict[str, str]]:
    key = f"ask_web_{uuid.uuid4().hex}"
    settings = Settings.from_env(
        {"AGENTSVC_STORAGE": "memory", "AGENTSVC_BOOTSTRAP_API_KEY": key, **env}
    )
    return TestClient(create_app(settings)), {"Authorization": f"Bearer {key}"}


def send(c: TestClient[Any], auth: dict[str, str], kind: Kind, text: str) -> list[Any]:
    agent = c.post(
        "/api/agents", json={"name": "P", "defaultModel": MODEL[kind]}, headers=auth
    ).json()
    thread = c.post("/api/threads", json={"agentId": agent["id"]}, headers=auth).json()
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": text}, headers=auth)
    assert r.status_code == 200, r.text
    return parse(r.text)


@pytest.fixture
def keyless_alpha() -> Iterator[FakeProvider]:
    with FakeProvider("alpha", api_key="") as proxy:  # "": it adds the key itself
        yield proxy


def test_alpha_works_with_only_a_base_url(keyless_alpha: FakeProvider) -> None:
    client, auth = boot({"AGENTSVC_ALPHA_BASE_URL": keyless_alpha.base_url})
    keyless_alpha.enqueue(Reply(text="answered through the proxy"))
    with client as c:
        events = send(c, auth, "alpha", "hello")
    assert events[-1].event == "done", events
    assert events[-1].data["content"] == "answered through the proxy"
    (request,) = keyless_alpha.requests
    assert "x-api-key" not in request.headers


@pytest.mark.parametrize("kind", ["alpha", "beta"])
def test_a_json_answer_instead_of_a_stream_ends_with_an_error_that_says_so(
    kind: Kind, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeProvider(kind, api_key="sk-test-0123456789abcdef") as fake:
        base = fake.base_url if kind == "alpha" else f"{fake.base_url}/v1"
        client, auth = boot(
            {
                f"AGENTSVC_{kind.upper()}_BASE_URL": base,
                f"AGENTSVC_{kind.upper()}_API_KEY": "sk-test-0123456789abcdef",
            }
        )
        fake.enqueue(Reply(text="a reply that was not streamed", ignore_stream=True))
        with client as c, caplog.at_level(logging.WARNING, logger="agentsvc"):
            events = send(c, auth, kind, "hello")
    assert [e.event for e in events] == ["meta", "error"]
    error = events[-1].data
    assert error["code"] == "PROVIDER_ERROR"
    assert (
        f"the {kind} provider answered 200 with JSON instead of an event stream"
        in (error["detail"])
    )
    logged = [r for r in caplog.records if r.name.startswith("agentsvc.llm")]
    assert len(logged) == 1  # one line for the failure, not one per layer
    assert "instead of an event stream" in logged[0].getMessage()
