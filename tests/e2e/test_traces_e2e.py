"""Stored traces, logs and analytics end to end (docs/observability.md).

The real service on PostgreSQL, the fake 'beta' provider, an MCP server and a
credential resolver, all on loopback, and a price file of the test's own. A
conversation makes every kind of span: the resolver call, a compaction summary,
model calls (one slow to its first token), an MCP tool that answers and one that
fails, a client-side tool and its results. Then ``/api/logs`` and the trace tree are
checked against what happened, span by span, total by total, cost by cost, and
``/api/analytics`` against the usage records in the database.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import psycopg
import pytest

from tests.e2e.secret_scan import SCAN
from tests.e2e.service import Service, client
from tests.fakes.providers import FakeProvider, Reply, ToolCallSpec
from tests.mcp_servers.server import HttpMcpServer
from tests.sse import names, parse
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

USER_KEY = "sk-traced-user-key-0123456789"  # what the resolver answers
JWT_SECRET = "logs-e2e-jwt-secret-0123456789abcdefghijklmnop"
# the test's own price: USD per million input, output and cached input tokens
PRICE = {"input": 2.0, "output": 8.0, "cached": 0.5}
LEAKY = "Bearer abcdefghijklmnopqrstuvwx"  # a credential a model put in a tool's arguments


def cost(input_tokens: int, output_tokens: int, cached: int = 0) -> float:
    return (
        (input_tokens - cached) * PRICE["input"]
        + cached * PRICE["cached"]
        + output_tokens * PRICE["output"]
    ) / 1e6


async def resolver(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps({"apiKey": USER_KEY}).encode()})


@pytest.fixture(scope="module")
def world(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    SCAN.secret(USER_KEY, "the BYOK key of the traced turns")
    tmp = tmp_path_factory.mktemp("logs")
    prices = tmp / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "taken": "2026-11-01",
                "prices": [
                    {
                        "model": "gpt-traced*",
                        "input": PRICE["input"],
                        "output": PRICE["output"],
                        "cachedInput": PRICE["cached"],
                    }
                ],
            }
        )
    )
    fake = FakeProvider("beta")
    base = fake.start()
    mcp = HttpMcpServer("streamable_http")
    mcp.start()
    key = f"ask_e2e_{uuid.uuid4().hex}"
    org = f"logs-{uuid.uuid4().hex[:8]}"
    svc = Service(
        {
            "AGENTSVC_DATABASE_URL": pg_url,
            "AGENTSVC_BOOTSTRAP_API_KEY": key,
            "AGENTSVC_BOOTSTRAP_ORG": org,
            "AGENTSVC_BETA_BASE_URL": f"{base}/v1",
            "AGENTSVC_BETA_API_KEY": "sk-platform-logs-0123456789",
            "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
            "AGENTSVC_JWT_SECRET": JWT_SECRET,
            "AGENTSVC_PRICES_FILE": str(prices),
            "AGENTSVC_EVAL_SLOW_FIRST_TOKEN_MS": "300",
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
        },
        log=tmp / "svc.log",
    )
    with serve(resolver) as resolver_url:
        try:
            svc.wait_ready()
            with client(svc, key) as admin:
                yield {
                    "svc": svc,
                    "admin": admin,
                    "fake": fake,
                    "mcp": mcp,
                    "resolver": f"{resolver_url}/resolve",
                    "org": org,
                    "pg": pg_url,
                }
            assert USER_KEY not in svc.output()
        finally:
            svc.stop()
            mcp.stop()
            fake.stop()


def send(c: httpx.Client, thread: str, **body: Any) -> list[Any]:
    r = c.post(f"/api/threads/{thread}/messages", json={"content": "", **body})
    assert r.status_code == 200, r.text
    events = parse(r.text)
    assert names(events)[-1] == "done", r.text
    return events


def trace_of(events: list[Any]) -> str:
    meta = next(e for e in events if e.event == "meta")
    return str(meta.data["traceId"])


@pytest.fixture(scope="module")
def conversation(world: dict[str, Any]) -> dict[str, Any]:
    """Five turns on one thread: three long ones (each: the resolver call, one model
    call), then the turn with everything, then the client tool's results."""
    c, fake = world["admin"], world["fake"]
    agent = c.post("/api/agents", json={"name": "Tracer", "defaultModel": "gpt-traced"}).json()
    r = c.put(
        f"/api/agents/{agent['id']}/credentials",
        json={"enabled": True, "resolverUrl": world["resolver"], "timeoutMs": 2000},
    )
    assert r.status_code == 200, r.text
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]
    traces = []
    for i in range(3):
        fake.enqueue(Reply(text=f"Noted {i}.", input_tokens=700 * (i + 1), output_tokens=5))
        traces.append(trace_of(send(c, thread, content=f"{i} " + "long " * 400)))
    r = c.put(
        f"/api/agents/{agent['id']}/compaction",
        json={"enabled": True, "betaCompactThreshold": 1000},
    )
    assert r.status_code == 200, r.text
    server = c.post(
        "/api/mcps",
        json={"name": "Test Tools", "transport": "streamable_http", "url": world["mcp"].url},
    ).json()
    r = c.post(f"/api/agents/{agent['id']}/mcps", json={"mcpServerId": server["id"]})
    assert r.status_code in (200, 201), r.text
    fake.enqueue(
        Reply(text="The summary.", input_tokens=900, output_tokens=40),
        Reply(
            text="",
            tool_calls=[ToolCallSpec("c1", "test-tools__echo", {"text": f"token {LEAKY}"})],
            input_tokens=300,
            cached_tokens=200,
            output_tokens=20,
            first_token_delay=0.6,
        ),
        Reply(
            text="",
            tool_calls=[ToolCallSpec("c2", "test-tools__fail", {})],
            input_tokens=550,
            output_tokens=10,
        ),
        Reply(
            text="Where are you?",
            tool_calls=[ToolCallSpec("c3", "get_location", {})],
            input_tokens=600,
            output_tokens=15,
        ),
    )
    tools = [{"name": "get_location", "description": "The user's location"}]
    big = send(c, thread, content="now the tools", tools=tools)
    assert names(big)[-2:] == ["requires_action", "done"]
    fake.enqueue(Reply(text="You are in Paris.", input_tokens=650, output_tokens=6))
    last = send(c, thread, toolResults=[{"toolCallId": "c3", "output": "Paris"}], tools=tools)
    assert names(last)[-1] == "done"
    return {
        "agent": agent["id"],
        "thread": thread,
        "long": traces,
        "big": trace_of(big),
        "last": trace_of(last),
        "big_events": big,
    }


def test_every_turn_is_a_trace_listed_newest_first(
    world: dict[str, Any], conversation: dict[str, Any]
) -> None:
    c = world["admin"]
    listed = c.get("/api/logs", params={"threadId": conversation["thread"]}).json()
    ids = [t["id"] for t in listed["traces"]]
    assert ids == [conversation["last"], conversation["big"], *reversed(conversation["long"])]
    assert listed["nextCursor"] is None
    for t in listed["traces"]:
        assert t["agent_id"] == conversation["agent"]
        assert t["thread_id"] == conversation["thread"]
        assert t["kind"] == "agent_turn"
        assert t["name"] == "Tracer"
        assert t["key_source"] == "byok"
    # pages of two, through the cursor: the same five, no gap, no repeat
    seen, cursor = [], None
    while True:
        params: dict[str, Any] = {"threadId": conversation["thread"], "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = c.get("/api/logs", params=params).json()
        seen += [t["id"] for t in page["traces"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == ids
    # filters: by agent, by status, by time
    assert [
        t["id"]
        for t in c.get("/api/logs", params={"agentId": conversation["agent"]}).json()["traces"]
    ] == ids
    assert c.get("/api/logs", params={"agentId": str(uuid.uuid4())}).json()["traces"] == []
    errors = c.get("/api/logs", params={"status": "error", "threadId": conversation["thread"]})
    assert errors.json()["traces"] == []
    future = c.get("/api/logs", params={"from": "2999-01-01T00:00:00Z"}).json()
    assert future["traces"] == []


def test_the_turn_with_everything_explains_itself_span_by_span(
    world: dict[str, Any], conversation: dict[str, Any]
) -> None:
    c = world["admin"]
    r = c.get(f"/api/logs/{conversation['big']}")
    assert r.status_code == 200, r.text
    body = r.json()
    trace, spans, evaluations = body["trace"], body["spans"], body["evaluations"]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    (root,) = by_name["invoke_agent Tracer"]
    (resolver_span,) = by_name["resolve_credentials"]
    (summary,) = by_name["compaction"]
    chats = by_name["chat gpt-traced"]
    (echo,) = by_name["execute_tool test-tools__echo"]
    (fail,) = by_name["execute_tool test-tools__fail"]
    assert len(spans) == 1 + 1 + 1 + 3 + 2
    assert len(chats) == 3
    # the tree: everything is the turn's child, in the order it happened
    assert root["parent_span_id"] is None
    assert root["kind"] == "agent"
    for s in (resolver_span, summary, *chats, echo, fail):
        assert s["parent_span_id"] == root["span_id"], s["name"]
    starts = [s["started_at"] for s in spans]
    assert starts == sorted(starts)
    assert [s["name"] for s in spans[1:]] == [
        "resolve_credentials",
        "compaction",
        "chat gpt-traced",
        "execute_tool test-tools__echo",
        "chat gpt-traced",
        "execute_tool test-tools__fail",
        "chat gpt-traced",
    ]
    # the resolver: its outcome, never the key
    assert resolver_span["kind"] == "webhook"
    assert resolver_span["attributes"]["agentsvc.resolver.outcome"] == "key"
    assert USER_KEY not in r.text
    # model calls: tokens, cost, key source, first token, finish reason
    expected = [(900, 40, 0), (500, 20, 200), (550, 10, 0), (600, 15, 0)]
    for s, (i, o, cached) in zip([summary, *chats], expected, strict=True):
        assert s["kind"] == "llm"
        assert s["model"] == "gpt-traced"
        assert (s["input_tokens"], s["output_tokens"], s["cached_input_tokens"]) == (i, o, cached)
        assert s["cost_usd"] == pytest.approx(cost(i, o, cached), abs=1e-9)
    for s in chats:
        assert s["attributes"]["agentsvc.key_source"] == "byok"
        assert s["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chats[0]["attributes"]["gen_ai.response.time_to_first_chunk"] >= 0.5
    assert chats[2]["output"]["tool_calls"][0]["name"] == "get_location"
    # tools: MCP kind, arguments and result, the failure, and the credential redacted
    assert echo["kind"] == fail["kind"] == "mcp"
    assert echo["status"] == "ok"
    assert fail["status"] == "error"
    assert fail["attributes"]["agentsvc.tool.outcome"] == "error"
    assert echo["attributes"]["agentsvc.mcp.server"] == "test-tools"
    assert echo["attributes"]["gen_ai.tool.name"] == "test-tools__echo"
    assert echo["input"] == {"text": "token [REDACTED]"}
    assert echo["output"] == "token [REDACTED]"
    assert LEAKY not in r.text
    tool_results = [
        e.data["result"] for e in conversation["big_events"] if e.event == "tool_result"
    ]
    assert tool_results[0] == f"token {LEAKY}"  # the client saw the tool's real answer
    # totals rolled up from the spans
    calls = [(i, o, cached) for i, o, cached in expected]
    assert trace["model_calls"] == 4
    assert trace["input_tokens"] == sum(i for i, _, _ in calls)
    assert trace["output_tokens"] == sum(o for _, o, _ in calls)
    assert trace["cached_input_tokens"] == 200
    assert trace["cost_usd"] == pytest.approx(sum(cost(*x) for x in calls), abs=1e-9)
    assert (trace["tool_calls"], trace["tool_errors"]) == (2, 1)
    assert (trace["status"], trace["run_status"], trace["error"]) == ("ok", "requires_action", None)
    assert trace["input_messages"] == 1
    assert trace["first_token_ms"] is not None
    assert trace["duration_ms"] >= 600
    # evaluations: the failed tool, the slow first token
    found = {(e["name"], e["span_id"]) for e in evaluations}
    assert ("tool_error", fail["span_id"]) in found
    assert ("slow_first_token", chats[0]["span_id"]) in found
    assert all(e["source"] == "heuristic" for e in evaluations)
    assert len(evaluations) == 2


def test_the_client_tools_results_open_the_next_trace(
    world: dict[str, Any], conversation: dict[str, Any]
) -> None:
    body = world["admin"].get(f"/api/logs/{conversation['last']}").json()
    root = body["spans"][0]
    assert root["input"] == {
        "messages": [],
        "tool_results": [{"tool_call_id": "c3", "output": "Paris"}],
    }
    assert root["output"] == "You are in Paris."
    assert body["trace"]["input_messages"] == 0
    assert (body["trace"]["run_status"], body["trace"]["model_calls"]) == ("completed", 1)
    assert body["trace"]["cost_usd"] == pytest.approx(cost(650, 6), abs=1e-9)
    assert body["evaluations"] == []


def test_usage_records_carry_the_cost_and_analytics_adds_them_up(
    world: dict[str, Any], conversation: dict[str, Any]
) -> None:
    with psycopg.connect(world["pg"]) as db:
        rows = db.execute(
            "SELECT input_tokens, output_tokens, coalesce(cached_input_tokens, 0), cost_usd,"
            " purpose, key_source FROM usage_records WHERE thread_id = %s",
            (conversation["thread"],),
        ).fetchall()
    assert len(rows) == 3 + 4 + 1
    for i, o, cached, usd, _, source in rows:
        assert usd == pytest.approx(cost(i, o, cached), abs=1e-9)
        assert source == "byok"
    assert [r[4] for r in rows].count("compaction") == 1
    a = world["admin"].get(
        "/api/analytics", params={"period": "24h", "agentId": conversation["agent"]}
    )
    assert a.status_code == 200, a.text
    report = a.json()
    totals = report["totals"]
    assert totals["model_calls"] == 8
    assert totals["byok_calls"] == 8
    assert totals["platform_calls"] == 0
    assert totals["compaction_calls"] == 1
    assert totals["compaction_cost_usd"] == pytest.approx(cost(900, 40), abs=1e-6)
    assert totals["input_tokens"] == sum(r[0] for r in rows)
    assert totals["output_tokens"] == sum(r[1] for r in rows)
    assert totals["cached_input_tokens"] == 200
    assert totals["cost_usd"] == pytest.approx(sum(r[3] for r in rows), abs=1e-6)
    assert totals["unpriced_calls"] == 0
    assert (totals["threads"], totals["replies"], totals["messages"]) == (1, 5, 4)
    assert (totals["tool_calls"], totals["tool_errors"], totals["errors"]) == (2, 1, 0)
    assert len(report["series"]) == 24
    for field in ("model_calls", "replies", "input_tokens"):
        assert sum(p[field] for p in report["series"]) == totals[field]
    assert report["by_model"] == [
        {
            "model": "gpt-traced",
            "model_calls": 8,
            "input_tokens": totals["input_tokens"],
            "output_tokens": totals["output_tokens"],
            "cached_input_tokens": 200,
            "cost_usd": pytest.approx(totals["cost_usd"], abs=1e-6),
        }
    ]
    assert [a["agent_id"] for a in report["by_agent"]] == [conversation["agent"]]
    assert report["prices_taken"] == "2026-11-01"


def test_logs_and_analytics_are_for_admins(
    world: dict[str, Any], conversation: dict[str, Any]
) -> None:
    member = jwt.encode(
        {"sub": "mallory", "org_id": world["org"], "exp": int(time.time()) + 3600},
        JWT_SECRET,
        algorithm="HS256",
    )
    with httpx.Client(
        base_url=world["svc"].url, headers={"Authorization": f"Bearer {member}"}, timeout=30
    ) as c:
        for path in ("/api/logs", f"/api/logs/{conversation['big']}", "/api/analytics"):
            r = c.get(path)
            assert (r.status_code, r.json()["error"]) == (403, "FORBIDDEN"), path


def test_bad_requests_are_422_and_unknown_traces_404(world: dict[str, Any]) -> None:
    c = world["admin"]
    for params in (
        {"cursor": "not-a-cursor"},
        {"status": "maybe"},
        {"from": "yesterday"},
        {"limit": "0"},
        {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
    ):
        r = c.get("/api/logs", params=params)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (params, r.text)
    assert c.get("/api/logs/not-hex").status_code == 422
    r = c.get(f"/api/logs/{uuid.uuid4().hex}")
    assert (r.status_code, r.json()["error"]) == (404, "NOT_FOUND")
    for params in (
        {"period": "1y"},
        {"period": "custom"},
        {"period": "7d", "from": "2026-01-01T00:00:00Z"},
        {"period": "custom", "from": "2020-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"period": "custom", "from": "2026-01-01T00:00:00Z", "granularity": "hour"},
    ):
        r = c.get("/api/analytics", params=params)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (params, r.text)


def test_times_out_of_range_are_422(world: dict[str, Any]) -> None:
    c = world["admin"]
    for value in ("0001-01-01T00:00:00+01:00", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z"):
        r = c.get("/api/logs", params={"from": value})
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (value, r.text)
        r = c.get("/api/analytics", params={"period": "custom", "from": value})
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), (value, r.text)
