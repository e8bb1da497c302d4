"""The turn's combined read: both adapters return what the separate repositories hold."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities import McpAttachment, Message, ToolCall
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import SealedRecord
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
    # the thread as stored; its running reply (active_run_id) is the latest run below
    shown = backend.run(s.threads.get, org, thread.id)
    assert got.thread == msgspec.structs.replace(shown, active_run_id=None)
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


def test_the_history_comes_with_the_inputs_whole_and_in_order(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    thread = backend.run(s.threads.add, a_thread(org))
    run = a_run(thread)
    call = ToolCall(id="c1", name="kb__search", arguments={"q": 'a "quoted"\nline', "n": None})
    said = [
        a_message(thread, content="Grüß dich 👋", sender_name="Ann", sender_id="u-1"),
        a_message(thread, "assistant", "", tool_calls=(call,), run_id=run.id),
        a_message(thread, "tool", "3 hits", tool_call_id="c1", sender_name="kb__search"),
        a_message(
            thread,
            "assistant",
            "",
            run_id=run.id,
            provider_blocks=({"type": "compaction", "content": "summary", "x": [1, None]},),
        ),
        a_message(thread, "assistant", "partial", status="failed", run_id=run.id),
    ]
    backend.run(s.conversations.begin_turn, run, said[:1], now())
    backend.run(
        s.conversations.finish_turn,
        msgspec.structs.replace(run, status="failed", finished_at=now()),
        said[1:],
        [],
    )
    got = backend.run(s.turn_reader.turn_inputs, org, thread.id, [])
    assert got.history == said

    empty = backend.run(s.threads.add, a_thread(org))
    assert backend.run(s.turn_reader.turn_inputs, org, empty.id, []).history == []


def test_begin_turn_checks_the_history_the_turn_read(backend: Backend) -> None:
    s = backend.storage
    org = backend.fresh_org()
    thread = backend.run(s.threads.add, a_thread(org))
    stale = now() - timedelta(seconds=45)

    def turn(content: str, seen: int | None) -> list[Message] | None:
        run = a_run(thread)
        got = backend.run(
            s.conversations.begin_turn, run, [a_message(thread, content=content)], stale, seen
        )
        done = msgspec.structs.replace(run, status="completed", finished_at=now())
        backend.run(
            s.conversations.finish_turn, done, [a_message(thread, "assistant", f"re {content}")], []
        )
        return got

    # nothing came since the read: None (the history is what was read, then the new)
    mark = backend.run(s.turn_reader.turn_inputs, org, thread.id, []).history_mark
    assert turn("one", mark) is None
    # the same holds on an empty thread and after a finished turn
    again = backend.run(s.turn_reader.turn_inputs, org, thread.id, [])
    assert [m.content for m in again.history] == ["one", "re one"]
    assert again.history_mark != mark
    assert turn("two", again.history_mark) is None

    # another turn between the read and the write: the whole history, read afresh
    read = backend.run(s.turn_reader.turn_inputs, org, thread.id, [])
    turn("meanwhile", None)
    got = turn("three", read.history_mark)
    assert got is not None
    assert [m.content for m in got] == [
        *("one", "re one", "two", "re two", "meanwhile", "re meanwhile"),
        "three",
    ]

    # a busy thread is refused with or without the check
    backend.run(s.conversations.begin_turn, a_run(thread), [], stale)
    mark = backend.run(s.turn_reader.turn_inputs, org, thread.id, []).history_mark
    with pytest.raises(Conflict):
        backend.run(s.conversations.begin_turn, a_run(thread), [], stale, mark)
