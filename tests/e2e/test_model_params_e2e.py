"""Model parameters end to end: the real service process against both fake providers
(tests/fakes/providers.py, strict about these fields as the real APIs are) and the
built-in ``local`` model. What a send and an agent's defaults set reaches the
provider under its own names; what a family cannot honour is a 422 before any
provider call."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e import test_providers_e2e as providers
from tests.e2e.service import Service, client, new_org
from tests.e2e.test_providers_e2e import JWT_SECRET, MODEL, World
from tests.sse import names, parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

# the providers' module's fixtures: a service of this module's own, with both fakes
served = providers.served
world = providers.world

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "jsonSchema": {"name": "answer", "schema": SCHEMA, "strict": True}}


def _agent(w: World, **fields: Any) -> dict[str, Any]:
    r = w.client.post("/api/agents", json={"name": "P", "defaultModel": MODEL[w.kind], **fields})
    assert r.status_code == 201, r.text
    return dict(r.json())


def _thread(w: World, agent: dict[str, Any]) -> str:
    return str(w.client.post("/api/threads", json={"agentId": agent["id"]}).json()["id"])


def _cap(w: World, body: dict[str, Any]) -> int:
    return int(body["max_tokens"] if w.kind == "alpha" else body["max_completion_tokens"])


def _refused(w: World, tid: str, **body: Any) -> str:
    """A send refused with 422 before any provider call: its detail."""
    before = len(w.fake.requests)
    r = w.client.post(f"/api/threads/{tid}/messages", json={"content": "hi", **body})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "VALIDATION_ERROR"
    assert len(w.fake.requests) == before
    return str(r.json()["detail"])


def test_a_sends_parameters_reach_the_provider_under_its_names(world: World) -> None:
    tid = _thread(world, _agent(world))
    alpha = world.kind == "alpha"
    sampler = {"temperature": 0.5} if alpha else {"temperature": 1.5, "topP": 0.9}
    stop = ["END", "###"] if alpha else ["END", "\n\n"]
    events = world.send(
        tid, content="hi", maxOutputTokens=300, stop=stop, responseFormat=FORMAT, **sampler
    )
    assert names(events)[-1] == "done"
    body = world.bodies()[-1]
    assert _cap(world, body) == 300
    if world.kind == "alpha":
        assert body["temperature"] == 0.5
        assert "top_p" not in body
        assert body["stop_sequences"] == ["END", "###"]
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    else:
        assert (body["temperature"], body["top_p"]) == (1.5, 0.9)
        assert body["stop"] == ["END", "\n\n"]
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
        }
    # none given: none sent, and the service's own output cap
    world.send(tid, content="again")
    plain = world.bodies()[-1]
    assert not {"temperature", "top_p", "stop", "stop_sequences", "response_format"} & set(plain)
    assert "output_config" not in plain
    assert _cap(world, plain) == 4096


def test_an_agents_defaults_apply_and_a_send_overrides_them(world: World) -> None:
    defaults = {"temperature": 0.2, "maxOutputTokens": 100, "stop": ["STOP"]}
    agent = _agent(world, modelParams=defaults)
    assert agent["model_params"] == {
        "temperature": 0.2,
        "top_p": None,
        "max_output_tokens": 100,
        "stop": ["STOP"],
        "response_format": None,
    }
    assert (
        world.client.get(f"/api/agents/{agent['id']}").json()["model_params"]
        == (agent["model_params"])
    )
    tid = _thread(world, agent)
    world.send(tid, content="one")
    body = world.bodies()[-1]
    stop_field = "stop_sequences" if world.kind == "alpha" else "stop"
    assert (body["temperature"], _cap(world, body), body[stop_field]) == (0.2, 100, ["STOP"])
    # the send's own win, one by one; an empty stop list sends none
    world.send(tid, content="two", temperature=0.7, stop=[])
    body = world.bodies()[-1]
    assert (body["temperature"], _cap(world, body)) == (0.7, 100)
    assert stop_field not in body
    # a regenerate takes them too
    r = world.client.post(f"/api/threads/{tid}/regenerate", json={"maxOutputTokens": 42})
    assert r.status_code == 200, r.text
    assert names(parse(r.text))[-1] == "done"
    body = world.bodies()[-1]
    assert (body["temperature"], _cap(world, body)) == (0.2, 42)
    # PATCH replaces the defaults whole; null clears them
    patched = world.client.patch(
        f"/api/agents/{agent['id']}", json={"modelParams": {"responseFormat": {"type": "text"}}}
    ).json()
    assert patched["model_params"]["response_format"] == {"type": "text"}
    assert patched["model_params"]["temperature"] is None
    world.send(tid, content="three")
    body = world.bodies()[-1]
    assert "temperature" not in body
    if world.kind == "beta":
        assert body["response_format"] == {"type": "text"}
    else:
        assert "output_config" not in body  # text is what the Messages API answers anyway
    cleared = world.client.patch(f"/api/agents/{agent['id']}", json={"modelParams": None})
    assert cleared.json()["model_params"] is None


def test_what_a_family_cannot_honour_is_a_422(world: World) -> None:
    tid = _thread(world, _agent(world))
    if world.kind == "alpha":
        detail = _refused(world, tid, temperature=1.5)
        assert detail.startswith("temperature:")
        assert "between 0 and 1" in detail
        detail = _refused(world, tid, temperature=0.5, topP=0.5)
        assert detail.startswith("topP:")
        assert "not both" in detail
        detail = _refused(world, tid, stop=["END", "\n\n"])
        assert detail.startswith("stop:")
        assert "whitespace" in detail
        # an agent's default the family cannot honour refuses its sends too
        hot = _thread(world, _agent(world, modelParams={"temperature": 1.2}))
        assert _refused(world, hot).startswith("temperature:")
        # the send's own topP with the agent's temperature: both would be sent
        warm = _thread(world, _agent(world, modelParams={"temperature": 0.3}))
        assert _refused(world, warm, topP=0.8).startswith("topP:")
    else:
        world.send(tid, content="hot", temperature=1.5, topP=0.5)  # the beta family's range
        assert world.bodies()[-1]["temperature"] == 1.5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"topP": 1.01}, "topP"),
        ({"maxOutputTokens": 0}, "maxOutputTokens"),
        ({"maxOutputTokens": 128_001}, "maxOutputTokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": ["x" * 201]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"responseFormat": {"type": "json_schema"}}, "responseFormat"),
        ({"responseFormat": {"type": "xml"}}, "responseFormat"),
        (
            {
                "responseFormat": {
                    "type": "json_schema",
                    "jsonSchema": {"name": "a b", "schema": {}},
                }
            },
            "responseFormat",
        ),
        (
            {
                "responseFormat": {
                    "type": "json_schema",
                    "jsonSchema": {"name": "a", "schema": {"type": 12}},
                }
            },
            "responseFormat",
        ),
        (
            {
                "responseFormat": {
                    "type": "json_schema",
                    "jsonSchema": {"name": "a", "schema": {"description": "x" * 40_000}},
                }
            },
            "responseFormat",
        ),
    ],
)
def test_values_out_of_bounds_are_422_naming_the_field(
    served: tuple[Service, Any], body: dict[str, Any], field: str
) -> None:
    svc, fakes = served
    _, key = new_org(svc.url, JWT_SECRET, "prm")
    with client(svc, key) as c:
        agent = c.post("/api/agents", json={"name": "B", "defaultModel": MODEL["beta"]}).json()
        tid = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]
        before = len(fakes["beta"].requests)
        r = c.post(f"/api/threads/{tid}/messages", json={"content": "hi", **body})
        assert r.status_code == 422, r.text
        error = r.json()
        assert error["error"] == "VALIDATION_ERROR"
        assert field in error["detail"]
        assert len(fakes["beta"].requests) == before
        # the same values as an agent's defaults
        r = c.post("/api/agents", json={"name": "C", "modelParams": body})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "VALIDATION_ERROR"
        assert field in r.json()["detail"]


@pytest.fixture
def local(served: tuple[Service, Any]) -> Iterator[httpx.Client]:
    svc, _ = served
    _, key = new_org(svc.url, JWT_SECRET, "loc")
    with client(svc, key) as c:
        yield c


def test_the_local_model_caps_and_stops_its_reply_and_refuses_a_schema(
    local: httpx.Client,
) -> None:
    agent = local.post("/api/agents", json={"name": "L", "defaultModel": "local"}).json()
    tid = local.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]

    def said(**body: Any) -> str:
        r = local.post(f"/api/threads/{tid}/messages", json={"content": "hello there", **body})
        assert r.status_code == 200, r.text
        return str(parse(r.text)[-1].data["content"])

    whole = said()
    assert whole.startswith('You said: "hello there".')
    assert said(maxOutputTokens=3) == 'You said: "hello'
    assert said(stop=["there"]) == 'You said: "hello '
    # deterministic: accepted, and no change
    assert said(temperature=0.1, topP=0.2).startswith('You said: "hello there".')
    r = local.post(f"/api/threads/{tid}/messages", json={"content": "hi", "responseFormat": FORMAT})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("responseFormat:")
    assert said(responseFormat={"type": "text"}).startswith("You said")
