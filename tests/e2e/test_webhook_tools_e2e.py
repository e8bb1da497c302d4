"""Webhook tools end to end: the real service process, the built-in `local` model,
and a receiver on loopback that checks every call's signature with the docs'
receiver (docs/examples/webhook_tool_receiver.py, written from the signing rules of
docs/byok.md, "Verifying the signature", not from the service's code)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.receivers import load_example, read_request
from tests.e2e.service import Service, client, new_org, running
from tests.sse import names, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

receiver_example = load_example("webhook_tool_receiver")

HEADER_SECRET = "tool-header-secret-5b1d0c"


class Receiver:
    """The customer's endpoint: answers by path, records every call and whether its
    signature verified with the organization's signing secret."""

    def __init__(self) -> None:
        self.secret = ""
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, headers = await read_request(scope, receive)
        verdict = receiver_example.verify(self.secret, headers, body)
        self.calls.append(
            {
                "path": scope["path"],
                "method": scope["method"],
                "headers": headers,
                "body": json.loads(body),
                "verified": verdict is None,
            }
        )
        status, payload = 200, b""
        if verdict is not None:
            status, payload = 401, b'{"error": "unauthenticated"}'
        elif scope["path"] == "/orders":
            args = json.loads(body)["arguments"]
            payload = json.dumps({"orderId": args["orderId"], "status": "shipped"}).encode()
        elif scope["path"] == "/fail":
            status, payload = 503, b'{"error": "the order system is down"}'
        elif scope["path"] == "/slow":
            await asyncio.sleep(3)
            payload = b"{}"
        elif scope["path"] == "/huge":
            payload = b'{"x": "' + b"y" * 5000 + b'"}'
        elif scope["path"] == "/redirect":
            status = 302
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"location", b"http://127.0.0.1:1/elsewhere"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


JWT_SECRET = "webhook-tools-e2e-jwt-secret-0123456789abcdefghij"


@pytest.fixture(scope="module")
def served(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One service for the module; each test has an organization and a receiver of its own."""
    tmp = tmp_path_factory.mktemp("hooks")
    with running(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
            "AGENTSVC_BOOTSTRAP_ORG": f"hooks-{uuid.uuid4().hex[:8]}",
            "AGENTSVC_JWT_SECRET": JWT_SECRET,
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # the receiver is on loopback
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
        },
        log=tmp / "svc.log",
    ) as svc:
        yield svc


@pytest.fixture
def world(served: Service) -> Iterator[dict[str, Any]]:
    receiver = Receiver()
    _, key = new_org(served.url, JWT_SECRET, "hooks")
    with (
        serve(receiver) as base,
        client(served, key) as c,
    ):
        receiver.secret = c.get("/api/orgs/settings").json()["signing_secret"]
        yield {"svc": served, "c": c, "receiver": receiver, "base": base}
    assert HEADER_SECRET not in served.log_path.read_text(errors="replace")


ORDER_SCHEMA = {
    "type": "object",
    "properties": {"orderId": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
    "required": ["orderId"],
    "additionalProperties": False,
}


def make_tool(c: httpx.Client, base: str, name: str, path: str, **extra: Any) -> dict[str, Any]:
    r = c.post(
        "/api/tools",
        json={
            "name": name,
            "description": f"{name} at {path}",
            "parameters": ORDER_SCHEMA,
            "url": f"{base}{path}",
            **extra,
        },
    )
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def say(c: httpx.Client, thread_id: str, content: str) -> list[Any]:
    r = c.post(f"/api/threads/{thread_id}/messages", json={"content": content})
    assert r.status_code == 200, r.text
    return parse(r.text)


def result_of(events: list[Any]) -> str:
    return str(next(e for e in events if e.event == "tool_result").data["result"])


def test_a_delegated_webhook_tool_is_called_signed_and_its_answer_reaches_the_model(
    world: dict[str, Any],
) -> None:
    c, receiver, base = world["c"], world["receiver"], world["base"]
    tool = make_tool(
        c,
        base,
        "lookup_order",
        "/orders",
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},
        method="PUT",
    )
    assert tool["has_headers"] is True
    assert "headers" not in tool
    assert HEADER_SECRET not in json.dumps(c.get(f"/api/tools/{tool['id']}").json())
    make_tool(c, base, "not_delegated", "/orders")

    agent = c.post("/api/agents", json={"name": "Orders"}).json()
    r = c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [tool["id"]]})
    assert r.status_code == 200, r.text
    assert r.json()["tools"] == [{"id": tool["id"], "name": "lookup_order"}]
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()

    events = say(c, thread["id"], 'call lookup_order {"orderId": "A-17"}')
    assert names(events)[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
    call_id = events[1].data["tool"]["id"]
    assert json.loads(result_of(events)) == {"orderId": "A-17", "status": "shipped"}
    assert "shipped" in events[-1].data["content"]

    [call] = receiver.calls
    assert call["verified"], "the signature did not verify with the organization's secret"
    assert call["method"] == "PUT"
    assert call["headers"]["authorization"] == f"Bearer {HEADER_SECRET}"
    # the same for a retried call, unlike any other call's (ids repeat across threads)
    assert len(call["headers"]["idempotency-key"]) == 64
    assert call["body"] == {
        "tool": "lookup_order",
        "toolCallId": call_id,
        "arguments": {"orderId": "A-17"},
        "orgId": c.get("/api/orgs/settings").json()["org_id"],
        "agentId": agent["id"],
        "threadId": thread["id"],
        "userId": call["body"]["userId"],
    }

    # arguments that do not fit the schema never leave the service
    events = say(c, thread["id"], 'call lookup_order {"orderId": 17}')
    assert result_of(events).startswith("error: the arguments do not fit the tool's schema")
    assert len(receiver.calls) == 1

    # the tool that was not delegated is not offered: the model cannot call it
    events = say(c, thread["id"], 'call not_delegated {"orderId": "A-1"}')
    assert "tool_call" not in names(events)
    assert len(receiver.calls) == 1

    # the turn is traced: the call is a `tool` span with its outcome
    trace_id = events[0].data["traceId"]
    first = c.get("/api/logs", params={"threadId": thread["id"]}).json()["traces"][-1]
    assert first["id"] != trace_id
    spans = c.get(f"/api/logs/{first['id']}").json()["spans"]
    span = next(s for s in spans if s["name"] == "execute_tool lookup_order")
    assert span["kind"] == "tool"
    assert span["status"] == "ok"


def test_failures_become_tool_errors_the_model_reads(world: dict[str, Any]) -> None:
    c, receiver, base = world["c"], world["receiver"], world["base"]
    tools = [
        make_tool(c, base, "down", "/fail"),
        make_tool(c, base, "slow", "/slow", timeoutMs=500),
        make_tool(c, base, "huge", "/huge", maxResultBytes=1000),
        make_tool(c, base, "moved", "/redirect"),
    ]
    agent = c.post("/api/agents", json={"name": "Unlucky"}).json()
    c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [t["id"] for t in tools]})
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    expected = {
        "down": 'error: the tool answered HTTP 503: {"error": "the order system is down"}',
        "slow": "error: the tool did not answer within 500 ms",
        "huge": "error: the tool's answer is larger than 1000 bytes",
        "moved": "error: the tool answered HTTP 302",
    }
    for name, error in expected.items():
        events = say(c, thread["id"], f'call {name} {{"orderId": "B-2"}}')
        assert result_of(events) == error
        assert names(events)[-1] == "done"  # the reply goes on
        assert error.removeprefix("error: ")[:20] in events[-1].data["content"]
    assert all(call["verified"] for call in receiver.calls)
    assert [call["path"] for call in receiver.calls] == ["/fail", "/slow", "/huge", "/redirect"]


def approve(c: httpx.Client, thread_id: str, *answers: dict[str, Any]) -> httpx.Response:
    return c.post(
        f"/api/threads/{thread_id}/messages", json={"content": "", "toolApprovals": list(answers)}
    )


def test_a_tool_that_needs_approval_is_called_only_once_approved(world: dict[str, Any]) -> None:
    """Done when: a webhook tool that needs approval is not called until approved,
    and is never called when denied."""
    c, receiver, base = world["c"], world["receiver"], world["base"]
    tool = make_tool(c, base, "refund_order", "/orders", approval="always")
    assert tool["approval"] == "always"
    agent = c.post("/api/agents", json={"name": "Refunds", "approvalTimeoutMinutes": 30}).json()
    assert agent["approval_timeout_minutes"] == 30
    c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [tool["id"]]})
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()

    events = say(c, thread["id"], 'call refund_order {"orderId": "A-17"}')
    assert names(events) == ["meta", "requires_action", "done"]
    [waiting] = events[1].data["toolCalls"]
    assert (waiting["kind"], waiting["name"], waiting["arguments"]) == (
        "approval",
        "refund_order",
        {"orderId": "A-17"},
    )
    assert receiver.calls == []  # not called before a person approves

    # a send that does not answer the waiting call, or names another, is refused
    r = c.post(f"/api/threads/{thread['id']}/messages", json={"content": "go on"})
    assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR")
    assert waiting["id"] in r.json()["detail"]
    r = approve(c, thread["id"], {"toolCallId": "call_other", "approved": True})
    assert r.status_code == 422
    assert receiver.calls == []

    r = approve(c, thread["id"], {"toolCallId": waiting["id"], "approved": True})
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert names(events)[:4] == ["meta", "tool_call", "tool_executing", "tool_result"]
    assert names(events)[-1] == "done"
    assert json.loads(result_of(events)) == {"orderId": "A-17", "status": "shipped"}
    assert "shipped" in events[-1].data["content"]
    [call] = receiver.calls  # called once, signed, under the call's own id
    assert call["verified"]
    assert call["body"]["toolCallId"] == waiting["id"]

    # denied: never called, and the model is told why
    events = say(c, thread["id"], 'call refund_order {"orderId": "B-2"}')
    [waiting] = events[1].data["toolCalls"]
    reason = "not without a receipt"
    r = approve(c, thread["id"], {"toolCallId": waiting["id"], "approved": False, "reason": reason})
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert "tool_call" not in names(events)
    assert names(events)[-1] == "done"
    assert "the user denied this call" in events[-1].data["content"]
    assert reason in events[-1].data["content"]
    assert len(receiver.calls) == 1
    # the thread goes on as usual
    assert names(say(c, thread["id"], "thanks"))[-1] == "done"
    assert len(receiver.calls) == 1


def test_execute_runs_one_tool_by_name(world: dict[str, Any]) -> None:
    c, receiver, base = world["c"], world["receiver"], world["base"]
    make_tool(c, base, "lookup_order", "/orders")
    make_tool(c, base, "down", "/fail")
    r = c.post("/api/tools/execute", json={"name": "lookup_order", "arguments": {"orderId": "C-3"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True
    assert body["status_code"] == 200
    assert body["result"] == {"orderId": "C-3", "status": "shipped"}
    assert body["error"] is None
    assert isinstance(body["duration_ms"], int)
    assert receiver.calls[-1]["verified"]
    assert receiver.calls[-1]["body"]["toolCallId"].startswith("exec_")
    foreign = c.post(
        "/api/tools/execute",
        json={
            "name": "lookup_order",
            "arguments": {"orderId": "C-3"},
            "threadId": str(uuid.uuid4()),
        },
    )
    assert foreign.status_code == 404

    down = c.post("/api/tools/execute", json={"name": "down", "arguments": {"orderId": "C-3"}})
    assert down.json()["ok"] is False
    assert down.json()["status_code"] == 503
    assert down.json()["error"].startswith("the tool answered HTTP 503")

    bad = c.post("/api/tools/execute", json={"name": "lookup_order", "arguments": {}})
    assert bad.json()["ok"] is False
    assert "'orderId' is a required property" in bad.json()["error"]
    assert bad.json()["status_code"] is None
    assert len(receiver.calls) == 2

    missing = c.post("/api/tools/execute", json={"name": "nope", "arguments": {}})
    assert missing.status_code == 404
    assert missing.json()["error"] == "NOT_FOUND"


def test_definitions_refuse_what_they_cannot_honour(world: dict[str, Any]) -> None:
    c, base = world["c"], world["base"]
    made = make_tool(c, base, "lookup_order", "/orders")
    assert made["approval"] == "never"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "web_lookup"}, "name: must not start with 'web_'"),
        ({"name": "a__b"}, "name: must not contain '__'"),
        ({"parameters": {"type": "string"}}, "parameters: the root must be"),
        ({"approval": "sometimes"}, "approval"),
        ({"headers": {"X-Service-Signature": "forged"}}, "is set by the service"),
    ]
    for change, detail in cases:
        body = {"name": "fine", "url": f"{base}/orders", **change}
        r = c.post("/api/tools", json=body)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert detail in r.json()["detail"]
    taken = c.post("/api/tools", json={"name": "lookup_order", "url": f"{base}/orders"})
    assert (taken.status_code, taken.json()["error"]) == (409, "TOOL_NAME_TAKEN")
    renamed = c.patch(f"/api/tools/{made['id']}", json={"name": "find_order", "timeoutMs": 700})
    assert (renamed.json()["name"], renamed.json()["timeout_ms"]) == ("find_order", 700)
    gated = c.patch(f"/api/tools/{made['id']}", json={"approval": "always"}).json()
    assert (gated["approval"], gated["name"]) == ("always", "find_order")
    agent = c.post("/api/agents", json={"name": "x"}).json()
    r = c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [str(uuid.uuid4())]})
    assert r.status_code == 422
    assert c.delete(f"/api/tools/{made['id']}").json() == {"ok": True}
    assert c.get(f"/api/tools/{made['id']}").status_code == 404


# ^(a+)+$ against "aaaa…a!": a backtracking engine tries every split of the a's (with
# 25 of them Python's `re` held the event loop 2.3 s; with 40, for ever). RE2 answers
# in time linear in the text.
NESTED = {
    "type": "object",
    "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}},
    "required": ["x"],
}
LOOKAHEAD = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=a)"}}}
STALLING = "a" * 40 + "!"


def test_a_hostile_pattern_is_refused_or_matched_without_stopping_the_service(
    world: dict[str, Any],
) -> None:
    c, svc, receiver, base = world["c"], world["svc"], world["receiver"], world["base"]
    step = {"id": "notify", "kind": "webhook", "url": f"{base}/orders"}
    # a pattern RE2 cannot compile (lookaround, backreferences) is refused when saved
    for where, body in (
        ("/api/tools", {"name": "lookahead", "url": f"{base}/orders", "parameters": LOOKAHEAD}),
        ("/api/runners", {"name": "lookahead", "inputSchema": LOOKAHEAD, "steps": [step]}),
    ):
        r = c.post(where, json=body)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), r.text
        assert "the pattern '^(?=a)' is not supported" in r.json()["detail"]
        assert "at properties/x/pattern" in r.json()["detail"]

    tool = make_tool(c, base, "nested", "/orders", parameters=NESTED)
    refused = c.patch(f"/api/tools/{tool['id']}", json={"parameters": LOOKAHEAD})
    assert refused.status_code == 422, refused.text

    # the call is a tool error naming the pattern, and the service answers meanwhile
    with httpx.Client(base_url=svc.url, timeout=60) as other, ThreadPoolExecutor(1) as pool:
        call = pool.submit(
            c.post, "/api/tools/execute", json={"name": "nested", "arguments": {"x": STALLING}}
        )
        assert other.get("/healthz").status_code == 200
        done = call.result()
        assert other.get("/healthz").status_code == 200
    assert done.status_code == 200, done.text
    assert (done.json()["ok"], done.json()["status_code"]) == (False, None)
    assert done.json()["error"] == (
        f"the arguments do not fit the tool's schema: x: '{STALLING}' does not match '^(a+)+$'"
    )

    # the same from the model, in a turn
    agent = c.post("/api/agents", json={"name": "Patterns"}).json()
    c.put(f"/api/agents/{agent['id']}/delegated", json={"toolIds": [tool["id"]]})
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    events = say(c, thread["id"], f'call nested {{"x": "{STALLING}"}}')
    assert result_of(events).startswith("error: the arguments do not fit the tool's schema")
    assert "does not match '^(a+)+$'" in result_of(events)
    assert names(events)[-1] == "done"
    assert receiver.calls == []

    # a runner's input schema is applied the same way
    runner = c.post(
        "/api/runners", json={"name": "nested", "inputSchema": NESTED, "steps": [step]}
    ).json()
    run = c.post(f"/api/runners/{runner['id']}/runs", json={"input": {"x": STALLING}})
    assert (run.status_code, run.json()["error"]) == (422, "VALIDATION_ERROR"), run.text
    assert "does not match '^(a+)+$'" in run.json()["detail"]
    assert c.get("/healthz").status_code == 200
