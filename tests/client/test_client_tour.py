"""A tour of the resources through the client against the real service: typed
objects come back from every area (agents and their sub-resources, threads,
messages, keys, settings, MCP servers, knowledge, memories, plans, logs, analytics).
Sync on memory storage and on PostgreSQL; async on memory storage."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pytest

from agentsvc_client import AsyncClient, Client, Done, Meta, Token, models
from tests.client.conftest import KEY
from tests.e2e.service import Service
from tests.mcp_servers.server import HttpMcpServer

pytestmark = pytest.mark.e2e

GUIDE = b"# Travel\n\nThe office in Lyon opens at nine. Badges are collected at the desk.\n"


@pytest.fixture(params=["memory", "postgres"])
def service(request: pytest.FixtureRequest) -> Service:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    svc: Service = request.getfixturevalue(
        f"{'pg' if request.param == 'postgres' else 'memory'}_service"
    )
    return svc


def _wait_ready(c: Client, document_id: str) -> models.Document:
    deadline = time.monotonic() + 60
    while True:
        doc = c.knowledge.get(document_id)
        if doc.status in ("ready", "failed") or time.monotonic() > deadline:
            return doc
        time.sleep(0.1)


def test_tour(service: Service) -> None:
    with Client(service.url, KEY) as c:
        assert c.service.health().ok is True
        # agents and their sub-resources
        agent = c.agents.create(name="Tour", stable_preamble="You answer briefly.")
        assert isinstance(agent, models.Agent)
        assert isinstance(agent.created_at, datetime)
        assert c.agents.get(agent.id) == agent
        renamed = c.agents.update(agent.id, description="for the tour")
        assert renamed.description == "for the tour"
        assert agent.id in [a.id for a in c.agents.list()]
        assert c.agents.memory.put(agent.id, enabled=True).enabled is True
        # a retried create with the same Idempotency-Key answers the first agent
        key = f"tour-{agent.id}"
        once = c.agents.create(name="Once", idempotency_key=key)
        assert c.agents.create(name="Once", idempotency_key=key) == once
        assert [a.name for a in c.agents.list()].count("Once") == 1
        assert c.agents.delete(once.id).ok is True
        assert isinstance(c.agents.compaction.get(agent.id), models.Compaction)
        assert isinstance(c.agents.plan.get(agent.id), models.PlanConfig)

        # a thread, a reply, its history
        thread = c.threads.create(agent_id=agent.id, metadata={"customer": "c-42"})
        assert isinstance(thread, models.Thread)
        assert thread.metadata == {"customer": "c-42"}
        events = list(c.send_message(thread.id, "Hello!"))
        assert isinstance(events[0], Meta)
        assert events[0].thread_id == thread.id
        done = events[-1]
        assert isinstance(done, Done)
        assert done.ok
        assert "".join(e.delta for e in events if isinstance(e, Token)) == done.content
        assert "You answer briefly." in done.content
        history = c.threads.messages.list(thread.id)
        assert [(m.role, m.content) for m in history.messages] == [
            ("user", "Hello!"),
            ("assistant", done.content),
        ]
        assert history.messages[1].id == done.message_id
        assert c.threads.get(thread.id).active_run_id is None
        assert thread.id in [t.id for t in c.threads.list(agent_id=agent.id).threads]
        assert c.threads.stop(thread.id).ok is False  # nothing runs

        # keys and settings
        issued = c.keys.create(name="tour")
        assert issued.key.startswith("ask_")
        assert issued.id in [k.id for k in c.keys.list()]
        with Client(service.url, issued.key) as other:
            assert other.agents.get(agent.id).id == agent.id
        assert c.keys.revoke(issued.id).ok is True
        settings = c.settings.get()
        assert isinstance(settings, models.OrgSettings)
        assert settings.signing_secret
        updated = c.settings.update(allowed_embed_domains=["example.com"])
        assert updated.allowed_embed_domains == ["example.com"]

        # MCP servers, with a real one on loopback
        mcp = HttpMcpServer("streamable_http")
        mcp.start()
        try:
            server = c.mcp_servers.create(
                name="Test Tools", transport="streamable_http", url=mcp.url
            )
            assert isinstance(server, models.Mcp)
            assert c.mcp_servers.get(server.id).name == "Test Tools"
            tested = c.mcp_servers.test(server.id)
            assert tested.ok, tested
            assert "echo" in [t.name for t in tested.tools]
            assert c.mcp_servers.update(server.id, name="Renamed").name == "Renamed"
            attached = c.agents.mcp_servers.attach(agent.id, mcp_server_id=server.id)
            assert attached.mcp_server_id == server.id
            assert attached.server.name == "Renamed"
            assert [a.mcp_server_id for a in c.agents.mcp_servers.list(agent.id)] == [server.id]
            assert c.agents.mcp_servers.detach(agent.id, mcp_server_id=server.id).ok is True
            assert c.mcp_servers.delete(server.id).ok is True
            assert server.id not in [m.id for m in c.mcp_servers.list()]
        finally:
            mcp.stop()

        # knowledge: an upload, indexed in the background, then found
        doc = c.knowledge.upload(GUIDE, filename="travel.md", title="Travel guide")
        assert isinstance(doc, models.Document)
        assert _wait_ready(c, doc.id).status == "ready"
        hits = c.knowledge.search(query="when does the Lyon office open")
        assert hits.results
        assert hits.results[0].document_id == doc.id
        assert doc.id in [d.id for d in c.knowledge.list()]
        assert c.knowledge.delete(doc.id).ok is True

        # memories (none yet: the tour's reply saved nothing) and a recall
        assert c.agents.memory.list(agent.id).memories == []
        assert c.agents.memory.recall(agent.id, query="office").memories == []

        # plans and todos
        plan = c.plans.create(thread_id=thread.id, title="Trip")
        plan = c.plans.todos.add(
            plan.id, todos=[models.TodoBody(content="book"), models.TodoBody(content="pack")]
        )
        first, second = plan.todos
        edge = c.plans.todos.deps.add(plan.id, second.id, depends_on=first.id)
        assert (edge.todo_id, edge.depends_on_id) == (second.id, first.id)
        assert [t.id for t in c.plans.ready(plan.id).ready] == [first.id]
        plan = c.plans.todos.update(plan.id, first.id, status="done")
        assert [t.id for t in c.plans.ready(plan.id).ready] == [second.id]
        assert [p.id for p in c.plans.list(thread_id=thread.id)] == [plan.id]

        # logs and analytics: the reply above is there
        traces = c.logs.list(thread_id=thread.id)
        assert traces.traces
        assert traces.traces[0].thread_id == thread.id
        trace = c.logs.get(traces.traces[0].id)
        assert isinstance(trace, models.TraceDetail)
        analytics = c.analytics.get(agent_id=agent.id)
        assert analytics.totals.replies >= 1

        assert c.agents.delete(agent.id).ok is True


async def test_async_tour(memory_service: Service, tmp_path: Path) -> None:
    async with AsyncClient(memory_service.url, KEY) as c:
        agent = await c.agents.create(name="Async tour")
        thread = await c.threads.create(agent_id=agent.id)
        stream = c.send_message(thread.id, "Hello!")
        text = await stream.text()
        assert text.startswith('You said: "Hello!"')
        again = await c.send_message(thread.id, "Again?").final()
        assert 'Before that you said: "Hello!"' in again.content
        history = await c.threads.messages.list(thread.id)
        assert [m.role for m in history.messages] == ["user", "assistant"] * 2
        (tmp_path / "guide.md").write_bytes(GUIDE)
        doc = await c.knowledge.upload(tmp_path / "guide.md", agent_id=agent.id)
        assert (doc.title, doc.scope, doc.agent_id) == ("guide.md", "agent", agent.id)
        assert doc.status in ("queued", "processing", "ready")
        with (tmp_path / "guide.md").open("rb") as file:
            same = await c.knowledge.upload(file, agent_id=agent.id)
        assert same.content_hash == doc.content_hash
        assert isinstance(await c.settings.get(), models.OrgSettings)
        assert (await c.logs.list(thread_id=thread.id)).traces
        assert (await c.analytics.get()).totals.replies >= 2
        assert agent.id in [a.id for a in await c.agents.list()]
