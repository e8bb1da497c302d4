"""A turn through the app in the web tests: an agent and a thread to talk in, a
message sent and its answer's events, a tool call's result."""

from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.sse import Event, parse

C = TestClient[Any]
H = dict[str, str]


def thread_of(c: C, h: H, agent_id: str) -> str:
    """A new thread of ``agent_id``: its id."""
    r = c.post("/api/threads", json={"agentId": agent_id}, headers=h)
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


def agent_and_thread(c: C, h: H, name: str = "Helper") -> tuple[str, str]:
    """A new agent called ``name`` and a thread of it: their ids."""
    r = c.post("/api/agents", json={"name": name}, headers=h)
    assert r.status_code == 201, r.text
    agent = str(r.json()["id"])
    return agent, thread_of(c, h, agent)


def say(c: C, h: H, thread: str, content: str) -> list[Event]:
    """Send ``content`` to ``thread``; the answer's events."""
    r = c.post(f"/api/threads/{thread}/messages", json={"content": content}, headers=h)
    assert r.status_code == 200, r.text
    return parse(r.text)


def result_of(events: list[Event]) -> str:
    """The first tool call's result."""
    return str(next(e for e in events if e.event == "tool_result").data["result"])
