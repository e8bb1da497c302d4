"""The OpenAPI document names every Server-Sent Event a reply can send, with the
schema of its data, and what the service streams conforms to it (docs/client-guide.md,
"Events").

The expected events come from the code's own table (``EVENT_NAMES``), so an event
added without being documented fails here."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest
import schemathesis
from jsonschema import Draft202012Validator
from litestar.testing import TestClient

from agentsvc_core.use_cases.turn.events import EVENT_NAMES
from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.sse import Event, parse

KEY = f"ask_web_{uuid.uuid4().hex}"
AUTH = {"Authorization": f"Bearer {KEY}"}
SEND = ("/api/threads/{thread_id}/messages", "post")


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient[Any]]:
    settings = Settings(storage="memory", migrate_on_start=False, bootstrap_api_key=KEY)
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture(scope="module")
def doc(client: TestClient[Any]) -> dict[str, Any]:
    body: dict[str, Any] = client.get("/schema/openapi.json").json()
    return body


def event_streams(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(operation id, media type object) of every text/event-stream response."""
    for item in doc["paths"].values():
        for op in item.values():
            for response in op.get("responses", {}).values():
                media = response.get("content", {}).get("text/event-stream")
                if media is not None:
                    yield op["operationId"], media


def branches(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The send route's documented events: name -> the event object's schema."""
    path, method = SEND
    media = doc["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"]
    out = {}
    for branch in media["schema"]["oneOf"]:
        out[branch["properties"]["event"]["const"]] = branch
    return out


def resolve(doc: dict[str, Any], ref: str) -> dict[str, Any]:
    assert ref.startswith("#/components/schemas/"), ref
    found: dict[str, Any] = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


def test_every_event_is_documented_with_the_schema_of_its_data(doc: dict[str, Any]) -> None:
    documented = branches(doc)
    assert set(documented) == set(EVENT_NAMES.values())
    for struct, name in EVENT_NAMES.items():
        branch = documented[name]
        assert branch["type"] == "object"
        assert set(branch["required"]) == {"event", "id", "data"}
        data = branch["properties"]["data"]
        assert data["type"] == "string"
        assert data["contentMediaType"] == "application/json"
        component = resolve(doc, data["contentSchema"]["$ref"])
        # the fields as the encoder writes them (renames included), and which are required
        wire = msgspec.json.schema(struct)
        expected = wire["$defs"][wire["$ref"].rsplit("/", 1)[1]]
        assert set(component["properties"]) == set(expected["properties"]), name
        assert set(component.get("required", [])) == set(expected.get("required", [])), name


def test_every_event_stream_in_the_document_is_described(doc: dict[str, Any]) -> None:
    streams = list(event_streams(doc))
    assert streams, "no text/event-stream response documented"
    for operation_id, media in streams:
        names = {b["properties"]["event"]["const"] for b in media["schema"]["oneOf"]}
        if operation_id == "threadEvents":  # a thread's live events, not a reply's
            assert names == {"message", "reply", "reply_started"}
            continue
        if operation_id == "execComputerCommand":  # an operator's command on a computer
            assert names == {"exec_started", "stdout", "stderr", "exit"}
            continue
        assert names == set(EVENT_NAMES.values()), operation_id


def test_every_reference_in_the_document_resolves(doc: dict[str, Any]) -> None:
    def refs(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    yield value
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in refs(doc):
        resolve(doc, ref)


def conforms(doc: dict[str, Any], events: list[Event]) -> None:
    """Each event as its documented branch says: the SSE fields, then the JSON of
    ``data`` against the component its ``contentSchema`` names (resolved in the
    document, formats checked)."""
    documented = branches(doc)
    for event in events:
        branch = documented[event.event]
        envelope = {"event": event.event, "id": str(event.id), "data": json.dumps(event.data)}
        Draft202012Validator(branch).validate(envelope)
        ref = branch["properties"]["data"]["contentSchema"]["$ref"]
        Draft202012Validator(
            {"components": doc["components"], "$ref": ref},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        ).validate(event.data)


def replies(client: TestClient[Any]) -> list[httpx.Response]:
    """Two real replies: text, and a client tool call (requires_action)."""
    agent = client.post(
        "/api/agents", json={"name": "Doc", "defaultModel": "local"}, headers=AUTH
    ).json()
    thread = client.post("/api/threads", json={"agentId": agent["id"]}, headers=AUTH).json()
    url = f"/api/threads/{thread['id']}/messages"
    tool = {"name": "lookup", "description": "Look up", "parameters": {"type": "object"}}
    out = []
    for body in ({"content": "hello"}, {"content": 'call lookup {"q": 1}', "tools": [tool]}):
        r = client.post(url, json=body, headers=AUTH)
        assert r.status_code == 200, r.text
        out.append(r)
    return out


def test_what_a_reply_streams_conforms_to_the_document(
    client: TestClient[Any], doc: dict[str, Any]
) -> None:
    seen: set[str] = set()
    for r in replies(client):
        events = parse(r.text)
        conforms(doc, events)
        seen |= {e.event for e in events}
    assert {"meta", "token", "requires_action", "done"} <= seen


def test_schemathesis_validates_each_event_against_the_document(
    client: TestClient[Any], doc: dict[str, Any]
) -> None:
    """The check Schemathesis runs on every send (tests/e2e/test_schemathesis.py):
    it passes, and it does look at the events (a stricter document fails)."""
    path, method = SEND
    sent = replies(client)
    operation = schemathesis.openapi.from_dict(doc)[path][method.upper()]
    for r in sent:
        operation.validate_response(r)
    stricter = copy.deepcopy(doc)
    stricter["components"]["schemas"]["SseToken"]["required"].append("missing")
    operation = schemathesis.openapi.from_dict(stricter)[path][method.upper()]
    with pytest.raises(AssertionError, match="SSE event violates schema"):
        operation.validate_response(sent[0])
