"""Computer instances: the memory and PostgreSQL adapters agree on the
ComputerStore contract (agentsvc_core/ports/computer.py): an instance's fields
round-trip and change atomically, one active instance per agent and thread (the
shared one, thread None, counts as one; a destroyed one frees the place),
another organization's id is not found, the agent's list is newest first, the
thread's instance is its active one, the idle sweep sees running instances past
their own idle timeout, and instances go with their agent."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.computer import ComputerInstance
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in


def _agent(backend: Backend, org: str | None = None) -> tuple[str, uuid.UUID]:
    org = org or backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return org, agent.id


def an_instance(org: str, agent: uuid.UUID, **over: object) -> ComputerInstance:
    t = now()
    base = ComputerInstance(
        id=uuid.uuid4(),
        org_id=org,
        agent_id=agent,
        thread_id=uuid.uuid4(),
        provider="local",
        status="idle",
        persistent=True,
        created_at=t,
        last_used_at=t,
        disk_bytes=12_345_678_901,
        ref="sbx-0123",
        state_lost=True,
        error=None,
        idle_timeout_s=600,
    )
    return msgspec.structs.replace(base, **over)


def test_an_instance_round_trips_and_changes(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    instance = an_instance(org, agent)
    assert backend.run(store.add, instance) == instance
    assert backend.run(store.get, org, instance.id) == instance
    assert backend.run(store.active, org, agent, instance.thread_id) == instance
    assert backend.run(store.of_thread, org, instance.thread_id) == instance
    changed = backend.run(
        store.modify,
        org,
        instance.id,
        lambda i: msgspec.structs.replace(
            i, status="error", error="out of capacity", ref=None, state_lost=False, disk_bytes=0
        ),
    )
    assert (changed.status, changed.error, changed.ref) == ("error", "out of capacity", None)
    assert backend.run(store.get, org, instance.id) == changed
    other = backend.fresh_org()
    with pytest.raises(NotFound):
        backend.run(store.get, other, instance.id)
    with pytest.raises(NotFound):
        backend.run(store.modify, other, instance.id, lambda i: i)
    assert backend.run(store.active, other, agent, instance.thread_id) is None
    assert backend.run(store.of_thread, other, instance.thread_id) is None
    with pytest.raises(NotFound):
        backend.run(store.add, an_instance(org, uuid.uuid4()))  # no such agent


def test_one_active_instance_per_agent_and_thread(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    shared = backend.run(store.add, an_instance(org, agent, thread_id=None))
    with pytest.raises(Conflict):
        backend.run(store.add, an_instance(org, agent, thread_id=None))
    assert backend.run(store.active, org, agent, None) == shared
    thread = uuid.uuid4()
    first = backend.run(store.add, an_instance(org, agent, thread_id=thread))
    with pytest.raises(Conflict):
        backend.run(store.add, an_instance(org, agent, thread_id=thread))
    # a destroyed one frees the place
    backend.run(
        store.modify, org, first.id, lambda i: msgspec.structs.replace(i, status="destroyed")
    )
    assert backend.run(store.active, org, agent, thread) is None
    assert backend.run(store.of_thread, org, thread) is None
    second = backend.run(store.add, an_instance(org, agent, thread_id=thread))
    assert backend.run(store.of_thread, org, thread) == second
    # another agent has its own
    _, other = _agent(backend, org)
    backend.run(store.add, an_instance(org, other, thread_id=None))


def test_two_first_uses_at_once_make_one(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    thread = uuid.uuid4()

    async def race() -> list[object]:
        made = [an_instance(org, agent, thread_id=thread) for _ in range(4)]
        return await asyncio.gather(*(store.add(i) for i in made), return_exceptions=True)

    results = backend.run(race)
    assert sum(isinstance(r, ComputerInstance) for r in results) == 1
    assert sum(isinstance(r, Conflict) for r in results) == 3


def test_the_agents_list_is_newest_first_with_destroyed_ones(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    t = now()
    old = backend.run(store.add, an_instance(org, agent, created_at=t, status="destroyed"))
    new = backend.run(store.add, an_instance(org, agent, created_at=t + timedelta(seconds=1)))
    assert [i.id for i in backend.run(store.of_agent, org, agent)] == [new.id, old.id]
    assert backend.run(store.of_agent, backend.fresh_org(), agent) == []


def test_the_idle_sweep_sees_running_instances_past_their_own_timeout(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    t = now() - timedelta(days=3650)  # older than anything another test left running
    due = backend.run(
        store.add, an_instance(org, agent, last_used_at=t, idle_timeout_s=60, status="ready")
    )
    edge = backend.run(
        store.add,
        an_instance(org, agent, last_used_at=t + timedelta(seconds=30), idle_timeout_s=30),
    )
    backend.run(
        store.add, an_instance(org, agent, last_used_at=t + timedelta(seconds=1), idle_timeout_s=60)
    )
    backend.run(store.add, an_instance(org, agent, last_used_at=t, status="stopped"))
    backend.run(store.add, an_instance(org, agent, last_used_at=t, status="bootstrapping"))
    at = t + timedelta(seconds=60)
    found = [i.id for i in backend.run(store.idle_since, at) if i.org_id == org]
    assert found == [due.id, edge.id]  # oldest first; the one used a second later is not due
    # at most ``limit`` (earlier runs of this test on a shared database may come first)
    assert len(backend.run(store.idle_since, at, 1)) == 1


def test_instances_go_with_their_agent(backend: Backend) -> None:
    store = backend.storage.computers
    org, agent = _agent(backend)
    instance = backend.run(store.add, an_instance(org, agent))
    backend.run(backend.storage.agents.delete, org, agent)
    with pytest.raises(NotFound):
        backend.run(store.get, org, instance.id)
