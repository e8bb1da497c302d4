"""The turn's combined read: both adapters return what the separate repositories hold."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from agentsvc_core.entities import McpAttachment
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.oauth import SealedRecord
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_message, a_run, a_thread
from tests.contract.test_mcps_contract import server

KINDS = ["compaction", "resolver"]


def attach(backend: Backend, org: str, kind: str, owner: uuid.UUID, mcp_id: uuid.UUID) -> None:
    backend.run(
        backend.storage.mcps.attach,
        McpAttachment(
            org_id=org,
            owner_kind=kind,  # type: ignore[arg-type]
            owner_id=owner,
            mcp_id=mcp_id,
            allowed_tools=("search",) if kind == "agent" else None,
            created_at=now(),
        ),
    )


def test_everything_the_turn_needs_in_one_read(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    agent = agent_in(org, stable_preamble="be brief")
    backend.run(s.agents.add, agent)
    thread = backend.run(s.threads.add, a_thread(org, agent.id, title="t"))
    other_agent = agent_in(org)
    backend.run(s.agents.add, other_agent)

    # runs: the latest by start time is returned
    first = a_run(thread, status="completed", started_at=now() - timedelta(seconds=5))
    backend.run(s.conversations.begin_turn, first, [a_message(thread)], now())
    backend.run(s.conversations.finish_turn, first, [], [])
    latest = a_run(thread)
    backend.run(s.conversations.begin_turn, latest, [a_message(thread)], now())

    # MCP servers: the agent's, oldest first; not the other agent's, not a runner's
    docs = backend.run(s.mcps.add, server(org, "docs"))
    crm = backend.run(s.mcps.add, server(org, "crm", tools_cache=()))
    unrelated = backend.run(s.mcps.add, server(org, "other"))
    attach(backend, org, "agent", agent.id, crm.id)
    attach(backend, org, "agent", agent.id, docs.id)
    attach(backend, org, "agent", other_agent.id, unrelated.id)
    attach(backend, org, "runner", agent.id, unrelated.id)

    # sealed records: the asked kinds for this agent only
    key = str(agent.id)
    for kind, k, value in (
        ("resolver", key, "sealed-resolver"),
        ("compaction", key, "sealed-compaction"),
        ("oauth_token", key, "not asked"),
        ("resolver", str(other_agent.id), "another agent's"),
    ):
        backend.run(s.secrets.put, org, kind, k, SealedRecord(value=value))

    got = backend.run(s.turn_reader.turn_inputs, org, thread.id, KINDS)
    assert got.thread == backend.run(s.threads.get, org, thread.id)
    assert got.agent == backend.run(s.agents.get, org, agent.id)
    assert got.latest_run == backend.run(s.conversations.latest_run, org, thread.id)
    assert got.latest_run is not None
    assert got.latest_run.id == latest.id
    expected = backend.run(s.mcps.attachments, org, "agent", agent.id)
    assert [a for a, _ in got.mcp] == expected
    assert [srv.id for _, srv in got.mcp] == [crm.id, docs.id]
    assert [srv for _, srv in got.mcp] == [backend.run(s.mcps.get, org, crm.id), docs]
    assert got.records == {
        "resolver": SealedRecord(value="sealed-resolver"),
        "compaction": SealedRecord(value="sealed-compaction"),
    }
    # no kinds asked, none returned
    assert backend.run(s.turn_reader.turn_inputs, org, thread.id, []).records == {}


def test_a_fresh_thread_and_a_deleted_agent(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(s.agents.add, agent)
    thread = backend.run(s.threads.add, a_thread(org, agent.id))

    got = backend.run(s.turn_reader.turn_inputs, org, thread.id, KINDS)
    assert (got.agent, got.latest_run, got.mcp, got.records) == (agent, None, [], {})

    backend.run(s.agents.delete, org, agent.id)
    got = backend.run(s.turn_reader.turn_inputs, org, thread.id, KINDS)
    assert got.thread == thread
    assert got.agent is None


def test_unknown_and_other_orgs_threads_are_not_found(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    thread = backend.run(s.threads.add, a_thread(org))
    with pytest.raises(NotFound):
        backend.run(s.turn_reader.turn_inputs, org, uuid.uuid4(), KINDS)
    with pytest.raises(NotFound):
        backend.run(s.turn_reader.turn_inputs, backend.fresh_org(), thread.id, KINDS)
