"""Webhook tool definitions: the memory and PostgreSQL adapters agree."""

from __future__ import annotations

import asyncio
import uuid

import msgspec
import pytest

from agentsvc_core.entities import WebhookTool
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now


def tool(org: str, name: str = "lookup_order", **over: object) -> WebhookTool:
    t = now()
    base = WebhookTool(
        id=uuid.uuid4(),
        org_id=org,
        name=name,
        description="Look an order up",
        parameters={"type": "object", "properties": {"orderId": {"type": "string"}}},
        url="https://hooks.example/orders",
        method="POST",
        headers=None,
        timeout_ms=10_000,
        max_result_bytes=65_536,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_round_trip_listing_and_lookups(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    store = backend.storage.webhook_tools
    b = tool(org, "b_tool", headers="sealed-b", method="PATCH", approval="always")
    a = tool(org, "a_tool")
    theirs = tool(other, "a_tool")
    for t in (b, a, theirs):
        backend.run(store.add, t)
    assert backend.run(store.get, org, b.id) == b
    assert backend.run(store.list_all, org) == [a, b]
    assert backend.run(store.by_name, org, "a_tool") == a
    assert backend.run(store.by_name, other, "a_tool") == theirs
    assert backend.run(store.by_name, org, "missing") is None
    # unknown and foreign ids are left out
    assert backend.run(store.by_ids, org, [b.id, theirs.id, uuid.uuid4(), a.id]) == [a, b]
    with pytest.raises(NotFound):
        backend.run(store.get, other, a.id)


def test_names_are_unique_per_organization_even_under_concurrency(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.webhook_tools

    async def race() -> list[BaseException | None]:
        return await asyncio.gather(
            *(store.add(tool(org, "same")) for _ in range(6)), return_exceptions=True
        )

    results = backend.run(race)
    assert sum(r is None for r in results) == 1
    refused = [r for r in results if r is not None]
    assert all(isinstance(r, Conflict) and r.code == "TOOL_NAME_TAKEN" for r in refused)
    other = tool(org, "other")
    backend.run(store.add, other)
    with pytest.raises(Conflict):
        backend.run(store.replace, msgspec.structs.replace(other, name="same"), other)


def test_replace_delete_and_reseal(backend: Backend) -> None:
    org = backend.fresh_org()
    store = backend.storage.webhook_tools
    t = tool(org, headers="old-sealed")
    backend.run(store.add, t)
    changed = msgspec.structs.replace(
        t,
        name="renamed",
        url="https://hooks.example/v2",
        timeout_ms=500,
        approval="always",
        updated_at=now(),
    )
    assert backend.run(store.replace, changed, t) is True
    assert backend.run(store.get, org, t.id) == changed
    # compare-and-set: a write from a stale read changes nothing
    stale = msgspec.structs.replace(t, name="stale", updated_at=now())
    assert backend.run(store.replace, stale, t) is False
    assert backend.run(store.get, org, t.id) == changed
    assert (org, t.id, "old-sealed") in backend.run(store.sealed_headers, None)
    assert backend.run(store.sealed_headers, org) == [(org, t.id, "old-sealed")]
    assert backend.run(store.reseal, org, t.id, "stale", "new-sealed") is False
    assert backend.run(store.reseal, org, t.id, "old-sealed", "new-sealed") is True
    assert backend.run(store.get, org, t.id).headers == "new-sealed"
    backend.run(store.delete, org, t.id)
    with pytest.raises(NotFound):
        backend.run(store.delete, org, t.id)
    with pytest.raises(NotFound):
        backend.run(store.replace, changed, changed)
