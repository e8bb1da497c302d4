"""Every operation of the running service's OpenAPI document has a client method,
sync and async; the checked-in generated code is what the document generates; the
events the client knows are the stream's."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import httpx
import pytest

import agentsvc_client
from agentsvc_client import OPERATIONS, AsyncClient, Client
from agentsvc_client.events import EVENT_TYPES
from tests.client.conftest import KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
STREAMS = {
    "sendMessage",
    "editMessage",
    "regenerateReply",
    "streamReply",
    "threadEvents",
}  # answer a stream, not a coroutine


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "agentsvc_client_generate", CLIENT_DIR / "generate.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def document(memory_service: Service) -> dict[str, Any]:
    r = httpx.get(f"{memory_service.url}/schema/openapi.json", timeout=30)
    r.raise_for_status()
    doc: dict[str, Any] = r.json()
    return doc


def _operation_ids(document: dict[str, Any]) -> list[str]:
    return [
        spec["operationId"]
        for item in document["paths"].values()
        for method, spec in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def _resolve(root: object, path: str) -> Any:
    target = root
    for part in path.split("."):
        target = getattr(target, part)
    return target


def test_every_operation_has_a_method(document: dict[str, Any]) -> None:
    ids = _operation_ids(document)
    assert len(ids) == len(set(ids)) > 80
    missing = sorted(set(ids) - set(OPERATIONS))
    assert not missing, f"operations with no client method: {missing} (run `make client`)"
    stale = sorted(set(OPERATIONS) - set(ids))
    assert not stale, f"client methods of operations the service no longer has: {stale}"
    with Client("http://127.0.0.1:1", KEY) as sync:
        for op_id in ids:
            assert callable(_resolve(sync, OPERATIONS[op_id])), op_id
    asynchronous = AsyncClient("http://127.0.0.1:1", KEY)
    for op_id in ids:
        method = _resolve(asynchronous, OPERATIONS[op_id])
        assert inspect.iscoroutinefunction(method) is (op_id not in STREAMS), op_id


def test_the_checked_in_code_is_what_the_document_generates(document: dict[str, Any]) -> None:
    package = Path(agentsvc_client.__file__).parent
    for name, text in _generator().render(document).items():
        checked_in = (package / name).read_text()
        assert checked_in == text, (
            f"clients/python/agentsvc_client/{name} differs from what the service's document"
            " generates: run `make client` and commit the result"
        )


def test_a_new_operation_fails_the_generator(document: dict[str, Any]) -> None:
    changed = {**document, "paths": dict(document["paths"])}
    changed["paths"]["/api/brand-new"] = {
        "get": {"operationId": "brandNew", "responses": {"200": {"description": "ok"}}}
    }
    with pytest.raises(SystemExit, match="brandNew"):
        _generator().render(changed)


def test_the_events_are_the_streams(document: dict[str, Any]) -> None:
    for path, method in (
        ("/api/threads/{thread_id}/messages", "post"),
        ("/api/threads/{thread_id}/stream", "get"),
    ):
        answer = document["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"]
        names = {one["properties"]["event"]["const"] for one in answer["schema"]["oneOf"]}
        assert names == set(EVENT_TYPES), path
