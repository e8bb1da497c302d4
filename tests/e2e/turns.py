"""A turn over HTTP in the end-to-end tests: send a message, read the answer's
events, and, when the model calls one tool, its result."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.sse import Event, names, parse

TOOL_STEP = ["meta", "tool_call", "tool_executing", "tool_result"]


def send(c: httpx.Client, thread: str, content: str) -> list[Event]:
    """Send ``content`` to ``thread``; the answer's events."""
    r = c.post(f"/api/threads/{thread}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def tool_result(c: httpx.Client, thread: str, content: str) -> str:
    """Send ``content`` (the ``local`` model's ``call <tool> <json>``); the one tool
    call's result. The answer must open with that call and its result, and end."""
    events = send(c, thread, content)
    assert names(events)[:4] == TOOL_STEP, names(events)
    assert names(events)[-1] == "done", names(events)
    return str(events[3].data["result"])


def said(c: httpx.Client, thread: str, content: str) -> dict[str, Any]:
    """As ``tool_result``, for a tool that answers a JSON object, not an error."""
    result = tool_result(c, thread, content)
    assert not result.startswith("error"), result
    answer: dict[str, Any] = json.loads(result)
    return answer
