"""A turn's stored trace (agentsvc_core/use_cases/traces/build.py), the redaction of
its payloads (agentsvc_core/redact.py), the merge of turns sharing a trace id, and
the read side's cursors (agentsvc_core/use_cases/traces/reading.py)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import (
    Principal,
    Run,
    StoredSpan,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
)
from agentsvc_core.entities.trace import merged
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import TraceFilter
from agentsvc_core.ports.telemetry import AttributeValue, FinishedSpan
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.redact import REDACTED, redact
from agentsvc_core.use_cases.traces.build import TraceConfig, TurnFacts, build_trace
from agentsvc_core.use_cases.traces.reading import Traces, parse_cursor

NOW = datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
TRACE = "ab" * 16
PRICES = PriceTable([("gpt-*", Price(input=2.0, output=8.0, cached_input=0.5))], "2026-11-01")
CONFIG = TraceConfig(prices=PRICES, payload_bytes=400, slow_first_token_s=1.0)

# --- redaction ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "Bearer abcdefghijklmnopqrstuvwxyz012345",
        "basic dXNlcjpwYXNzd29yZDEyMzQ=",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlc2lnbmF0dXJl",
        "sk-proj-abcdefghijklmnop0123456789",
        "sk-ant-api03-abcdefghijklmnop0123",
        "ask_abcdefghijklmnop0123456789",
        "ask_-bcdefgh-jklmnop_0123456789-",  # token_urlsafe: dashes anywhere
        "rt_Ab3-dE_fGhIjKlMnOpQrStUvWxYz0123",  # a runner trigger's token
        "whsec_Ab3-dE_fGhIjKlMnOpQrStUvWxYz0123456789abcd",  # a signing secret
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-1234567890-abcdefghij",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz0123",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
        "password=hunter2hunter2",
    ],
)
def test_credential_shapes_are_redacted_in_text_and_json(secret: str) -> None:
    text = f"before {secret} after"
    out = redact(text)
    assert secret not in out
    assert REDACTED in out
    assert out.startswith("before ")
    encoded = msgspec.json.encode({"note": text}).decode()
    assert secret not in json.loads(redact(encoded))["note"]  # still valid JSON


@pytest.mark.parametrize(
    "field", ["password", "api_key", "apiKey", "x-api-key", "Authorization", "client_secret"]
)
def test_values_of_fields_named_like_secrets_are_redacted(field: str) -> None:
    encoded = msgspec.json.encode({field: 'short "quoted" value', "name": "visible"}).decode()
    out = json.loads(redact(encoded))
    assert out == {field: REDACTED, "name": "visible"}


def test_known_values_are_redacted_and_ordinary_text_is_not() -> None:
    assert redact("the key sk-alice-own-7f is here", ["sk-alice-own-7f"]) == (
        f"the key {REDACTED} is here"
    )
    assert redact("short", ["abc"]) == "short"  # too short to be told from chance
    plain = "The weather in Paris is 21 degrees; token counts: 1200. task-1234 done."
    assert redact(plain) == plain


# --- build_trace --------------------------------------------------------------------


def span(
    name: str,
    span_id: str,
    parent: str | None,
    start_ms: int,
    end_ms: int,
    attributes: dict[str, AttributeValue],
    *,
    error: str | None = None,
    input: object = None,
    output: object = None,
) -> FinishedSpan:
    base = int(NOW.timestamp() * 1e9)
    return FinishedSpan(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=parent,
        parent_remote=False,
        sampled=True,
        name=name,
        kind="internal",
        start_ns=base + start_ms * 1_000_000,
        end_ns=base + end_ms * 1_000_000,
        attributes=attributes,
        status="error" if error else "unset",
        error_type=error,
        input=input,
        output=output,
    )


def chat(
    span_id: str, start: int, tokens: tuple[int, int, int], *, model: str = "gpt-4o", **extra: Any
) -> FinishedSpan:
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        "agentsvc.key_source": extra.pop("source", "platform"),
    }
    if tokens[2]:
        attributes["gen_ai.usage.cache_read.input_tokens"] = tokens[2]
    attributes.update(extra.pop("attributes", {}))
    return span(f"chat {model}", span_id, "r" * 16, start, start + 100, attributes, **extra)


def tool(span_id: str, start: int, *, error: str | None = None, mcp: bool = True) -> FinishedSpan:
    return span(
        "execute_tool search",
        span_id,
        "r" * 16,
        start,
        start + 50,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.type": "extension" if mcp else "function",
            "agentsvc.tool.outcome": "timeout" if error else "ok",
        },
        error=error,
        input={"q": "paris"},
        output="21 degrees",
    )


def root(end: int = 1000, status: str = "completed", parent: str | None = None) -> FinishedSpan:
    return span(
        "invoke_agent Helper",
        "r" * 16,
        parent,
        0,
        end,
        {"gen_ai.operation.name": "invoke_agent", "agentsvc.run.status": status},
        input={"messages": ["hello"]},
        output="hi",
    )


def facts(status: str = "completed", **changes: Any) -> TurnFacts:
    run = Run(
        id=uuid.uuid4(),
        org_id="org",
        thread_id=uuid.uuid4(),
        status=status,  # type: ignore[arg-type]
        started_at=NOW,
        heartbeat_at=NOW,
    )
    values: dict[str, Any] = {
        "org_id": "org",
        "agent_id": uuid.uuid4(),
        "agent_name": "Helper",
        "model": "gpt-4o",
        "run": run,
        "message_id": None,
        "input_messages": 1,
        "step_limit": False,
        "empty": False,
        "error": None,
        **changes,
    }
    return TurnFacts(**values)


def test_the_trace_rolls_up_its_spans() -> None:
    spans = [
        tool("t1" * 8, 200),
        root(),
        chat("c1" * 8, 100, (1000, 20, 400)),
        chat("c2" * 8, 300, (1100, 30, 0), source="byok"),
        tool("t2" * 8, 250, error="TOOL_TIMEOUT", mcp=False),
    ]
    record = build_trace(CONFIG, facts(), spans, NOW)
    s = record.summary
    assert s.id == TRACE
    assert record.root_span_id == "r" * 16
    assert record.spans[0].name == "invoke_agent Helper"  # in the order they began
    assert [x.started_at for x in record.spans] == sorted(x.started_at for x in record.spans)
    kinds = {x.span_id: x.kind for x in record.spans}
    assert kinds == {"r" * 16: "agent", "c1" * 8: "llm", "c2" * 8: "llm"} | {
        "t1" * 8: "mcp",
        "t2" * 8: "tool",
    }
    first = (600 * 2.0 + 400 * 0.5 + 20 * 8.0) / 1e6
    second = (1100 * 2.0 + 30 * 8.0) / 1e6
    assert (s.input_tokens, s.output_tokens, s.cached_input_tokens) == (2100, 50, 400)
    assert s.cost_usd == pytest.approx(first + second)
    assert (s.model_calls, s.tool_calls, s.tool_errors) == (2, 2, 1)
    assert s.key_source == "mixed"
    assert (s.status, s.run_status, s.error) == ("ok", "completed", None)
    assert s.duration_ms == 1000
    assert s.started_at == NOW
    assert record.keep_until == NOW + CONFIG.retention
    llm = next(x for x in record.spans if x.span_id == "c1" * 8)
    assert (llm.model, llm.input_tokens, llm.cached_input_tokens) == ("gpt-4o", 1000, 400)
    assert llm.cost_usd == pytest.approx(first)
    assert all(x.parent_span_id == "r" * 16 for x in record.spans[1:])


def test_an_unpriced_model_makes_the_cost_unknown_not_zero() -> None:
    spans = [root(), chat("c1" * 8, 100, (10, 10, 0)), chat("c2" * 8, 200, (10, 10, 0), model="x")]
    record = build_trace(CONFIG, facts(), spans, NOW)
    assert record.summary.cost_usd is None
    unpriced = next(x for x in record.spans if x.model == "x")
    assert unpriced.cost_usd is None


def test_a_parent_outside_the_turn_is_not_named() -> None:
    record = build_trace(CONFIG, facts(), [root(parent="f" * 16)], NOW)
    assert record.spans[0].parent_span_id is None


def test_a_failed_turn_is_an_error_trace_with_its_code() -> None:
    record = build_trace(
        CONFIG, facts("failed", error="PROVIDER_UNAVAILABLE"), [root(status="failed")], NOW
    )
    assert (record.summary.status, record.summary.error) == ("error", "PROVIDER_UNAVAILABLE")
    stopped = build_trace(CONFIG, facts("stopped", error=None), [root()], NOW)
    assert (stopped.summary.status, stopped.summary.error) == ("ok", None)


def test_heuristic_evaluations() -> None:
    spans = [
        root(),
        chat(
            "c1" * 8,
            100,
            (10, 10, 0),
            attributes={
                "gen_ai.response.time_to_first_chunk": 1.5,
                "agentsvc.provider.retries": 2,
            },
        ),
        chat("c2" * 8, 300, (10, 10, 0), error="PROVIDER_UNAVAILABLE"),
        chat("c3" * 8, 500, (10, 10, 0), attributes={"gen_ai.response.time_to_first_chunk": 0.5}),
        tool("t1" * 8, 200, error="TOOL_TIMEOUT"),
        span(
            "resolve_credentials",
            "w1" * 8,
            "r" * 16,
            10,
            20,
            {"agentsvc.resolver.outcome": "timeout"},
            error="RESOLVER_TIMEOUT",
        ),
    ]
    record = build_trace(CONFIG, facts(step_limit=True, empty=True), spans, NOW)
    found = {(e.name, e.span_id, e.label) for e in record.evaluations}
    assert found == {
        ("slow_first_token", "c1" * 8, "slow"),
        ("provider_retry", "c1" * 8, "retried"),
        ("provider_error", "c2" * 8, "error"),
        ("tool_error", "t1" * 8, "timeout"),
        ("resolver_fallback", "w1" * 8, "timeout"),
        ("step_limit", "r" * 16, "cut"),
        ("empty_reply", "r" * 16, "empty"),
    }
    assert {e.source for e in record.evaluations} == {"heuristic"}
    resolver = next(x for x in record.spans if x.name == "resolve_credentials")
    assert resolver.kind == "webhook"
    quiet = build_trace(CONFIG, facts(), [root(), chat("c1" * 8, 100, (1, 1, 0))], NOW)
    assert quiet.evaluations == []


def test_payloads_are_redacted_and_cut_past_the_cap() -> None:
    leaky = span(
        "execute_tool fetch",
        "t1" * 8,
        "r" * 16,
        1,
        2,
        {"gen_ai.operation.name": "execute_tool"},
        input={"url": "https://x.test/?api_key=abcdefghijkl", "token": "zzzz"},
        output="Authorization: Bearer abcdefghijklmnopqrstu",
    )
    big = span(
        "execute_tool dump",
        "t2" * 8,
        "r" * 16,
        3,
        4,
        {"gen_ai.operation.name": "execute_tool"},
        input={"n": 1},
        output="é" * 1000,  # 2000 bytes of UTF-8
    )
    record = build_trace(CONFIG, facts(known_secrets=("zzzz-not-long",)), [root(), leaky, big], NOW)
    by_id = {s.span_id: s for s in record.spans}
    small = msgspec.json.decode(msgspec.json.encode(by_id["t1" * 8]))
    assert "abcdefghijkl" not in json.dumps(small)
    assert small["input"]["token"] == REDACTED
    assert small["output"] == f"Authorization: {REDACTED}"
    assert "truncated" not in small  # omitted: false
    cut = msgspec.json.decode(msgspec.json.encode(by_id["t2" * 8]))
    assert cut["truncated"] is True
    assert cut["original_bytes"] == len('{"n":1}') + len(msgspec.json.encode("é" * 1000))
    assert isinstance(cut["output"], str)
    assert len(cut["output"].encode()) <= CONFIG.payload_bytes // 2
    assert cut["input"] == '{"n":1}'  # each payload kept as the start of its text


def test_turns_of_one_trace_id_merge() -> None:
    def summary(**changes: Any) -> TraceSummary:
        values: dict[str, Any] = {
            "id": TRACE,
            "org_id": "org",
            "kind": "agent_turn",
            "name": "Helper",
            "status": "ok",
            "run_status": "completed",
            "started_at": NOW,
            "ended_at": NOW + timedelta(seconds=1),
            "duration_ms": 1000,
            "input_tokens": 10,
            "output_tokens": 5,
            "cached_input_tokens": 1,
            "cost_usd": 0.5,
            "model_calls": 1,
            "tool_calls": 1,
            "tool_errors": 0,
            "input_messages": 1,
            "key_source": "platform",
        }
        values.update(changes)
        return TraceSummary(**values)

    later = summary(
        started_at=NOW + timedelta(seconds=10),
        ended_at=NOW + timedelta(seconds=12),
        status="error",
        error="INTERNAL_ERROR",
        key_source="byok",
        cost_usd=0.25,
    )
    both = merged(summary(), later)
    assert (both.started_at, both.ended_at, both.duration_ms) == (
        NOW,
        NOW + timedelta(seconds=12),
        12_000,
    )
    assert (both.input_tokens, both.output_tokens, both.cached_input_tokens) == (20, 10, 2)
    assert (both.model_calls, both.tool_calls, both.input_messages) == (2, 2, 2)
    assert both.cost_usd == pytest.approx(0.75)
    assert (both.status, both.error, both.key_source) == ("error", "INTERNAL_ERROR", "mixed")
    assert merged(summary(), summary(cost_usd=None)).cost_usd is None
    assert merged(summary(key_source=None), summary()).key_source == "platform"


# --- the read side ------------------------------------------------------------------


def test_cursors() -> None:
    at, trace_id = parse_cursor(f"2026-11-24T10:00:00Z|{TRACE}")
    assert (at, trace_id) == (NOW.replace(minute=0), TRACE)
    for bad in ("", "2026-11-24T10:00:00Z", f"yesterday|{TRACE}", "2026-11-24T10:00:00Z|xyz"):
        with pytest.raises(InvalidInput):
            parse_cursor(bad)


def test_a_cursor_refusal_names_the_cursor() -> None:
    for bad in (
        f"2026-11-24T10:00:00Z|{TRACE}0",  # 33 characters
        f"2026-11-24T10:00:00Z|{TRACE[:-1]}",  # 31
        f"2026-11-24T10:00:00Z|{'g' * 32}",  # not hex
        f"2026-11-24T10:00:00Z/{TRACE}",  # no separator
    ):
        with pytest.raises(InvalidInput) as caught:
            parse_cursor(bad)
        assert (caught.value.field, caught.value.problem) == (
            "cursor",
            "must be a nextCursor of this list",
        ), bad


def test_a_cursor_without_an_offset_is_utc_and_one_with_keeps_it() -> None:
    at, _ = parse_cursor(f"2026-11-24T10:00:00|{TRACE}")
    assert at == NOW.replace(minute=0)
    assert at.utcoffset() == timedelta(0)
    at, _ = parse_cursor(f"2026-11-24T12:00:00+02:00|{TRACE}")
    assert at == NOW.replace(minute=0)
    assert at.utcoffset() == timedelta(hours=2)
    # the id after the first separator is kept whole
    assert parse_cursor(f"2026-11-24T10:00:00Z|{TRACE.upper()}")[1] == TRACE.upper()


class MovingClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


READER = Principal(org_id="org-traces", method="api_key")


def stored(
    storage: MemoryStorage, n: int, *, org: str = READER.org_id, zone: tzinfo = UTC
) -> list[str]:
    """``n`` traces of ``org``, a minute apart from NOW (oldest first; their times
    written in ``zone``), each kept a day; their ids."""
    ids = []
    for i in range(n):
        trace_id = f"{uuid.uuid4().hex}"
        started = (NOW + timedelta(minutes=i)).astimezone(zone)
        summary = TraceSummary(
            id=trace_id,
            org_id=org,
            kind="agent_turn",
            name="agent",
            status="ok",
            run_status="completed",
            started_at=started,
            ended_at=started + timedelta(seconds=1),
            duration_ms=1000,
        )
        span = StoredSpan(
            span_id=f"{i:016x}",
            parent_span_id=None,
            name="invoke_agent agent",
            kind="agent",
            status="ok",
            started_at=started,
            duration_ms=1000.0,
        )
        evaluation = TraceEvaluation(span_id=span.span_id, name="tool_error", source="heuristic")
        record = TraceRecord(
            summary=summary,
            root_span_id=span.span_id,
            spans=[span],
            evaluations=[evaluation],
            keep_until=started + timedelta(days=1),
        )
        asyncio.run(storage.traces.add_trace(record))
        ids.append(trace_id)
    return ids


def test_traces_are_listed_newest_first_by_pages_of_the_limit() -> None:
    storage = MemoryStorage()
    ids = stored(storage, 5)
    stored(storage, 2, org="another-org")
    traces = Traces(storage.traces, MovingClock(NOW))
    seen: list[str] = []
    cursor: str | None = None
    pages = []
    while True:
        page = asyncio.run(traces.list_traces(READER, TraceFilter(), cursor=cursor, limit=2))
        pages.append(len(page.traces))
        seen += [t.id for t in page.traces]
        cursor = page.next_cursor
        if cursor is None:
            break
        last = page.traces[-1]
        assert cursor == f"{last.started_at.isoformat().replace('+00:00', 'Z')}|{last.id}"
    assert seen == ids[::-1]
    assert pages == [2, 2, 1]
    # a page exactly as long as what is left has no next cursor
    whole = asyncio.run(traces.list_traces(READER, TraceFilter(), cursor=None, limit=5))
    assert (len(whole.traces), whole.next_cursor) == (5, None)


@pytest.fixture
def far_east() -> Iterator[None]:
    """The machine's own time zone is Tokyo's (UTC+9) for the test."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


@pytest.mark.usefixtures("far_east")
def test_a_cursor_is_written_in_utc() -> None:
    storage = MemoryStorage()
    paris = timezone(timedelta(hours=1))
    [only, _] = stored(storage, 2, zone=paris)
    traces = Traces(storage.traces, MovingClock(NOW))
    page = asyncio.run(traces.list_traces(READER, TraceFilter(), cursor=None, limit=1))
    assert page.next_cursor is not None
    assert page.next_cursor.startswith("2026-11-24T10:31:00Z|")
    # a cursor written with another offset names the same place
    at = (NOW + timedelta(minutes=1)).astimezone(paris).isoformat()
    rest = asyncio.run(
        traces.list_traces(READER, TraceFilter(), cursor=f"{at}|{page.next_cursor[-32:]}", limit=5)
    )
    assert [t.id for t in rest.traces] == [only]


def test_a_time_filter_must_start_before_it_ends() -> None:
    storage = MemoryStorage()
    stored(storage, 3)
    traces = Traces(storage.traces, MovingClock(NOW))

    def listed(**where: Any) -> int:
        page = asyncio.run(traces.list_traces(READER, TraceFilter(**where), cursor=None, limit=10))
        return len(page.traces)

    with pytest.raises(InvalidInput) as caught:
        listed(since=NOW, until=NOW)
    assert (caught.value.field, caught.value.problem) == ("from", "must be before to")
    assert listed(since=NOW, until=NOW + timedelta(minutes=1)) == 1
    assert listed(since=NOW + timedelta(minutes=1)) == 2
    assert listed(until=NOW + timedelta(minutes=1)) == 1


def test_a_trace_is_read_by_its_id_in_any_case_within_its_organization() -> None:
    storage = MemoryStorage()
    [trace_id] = stored(storage, 1)
    traces = Traces(storage.traces, MovingClock(NOW))
    summary, spans, evaluations = asyncio.run(traces.get(READER, trace_id.upper()))
    assert summary.id == trace_id
    assert [s.name for s in spans] == ["invoke_agent agent"]
    assert [e.name for e in evaluations] == ["tool_error"]
    other = Principal(org_id="another-org", method="api_key")
    with pytest.raises(NotFound) as caught:
        asyncio.run(traces.get(other, trace_id))
    assert str(caught.value) == "trace not found"


def test_a_trace_is_pruned_once_the_clock_passes_its_keep_until() -> None:
    storage = MemoryStorage()
    first, second = stored(storage, 2)  # kept until NOW + 1 day and a minute later
    clock = MovingClock(NOW + timedelta(days=1))
    traces = Traces(storage.traces, clock)
    assert asyncio.run(traces.prune()) == 0  # kept until exactly now: still kept
    clock.at += timedelta(microseconds=1)
    assert asyncio.run(traces.prune()) == 1
    page = asyncio.run(traces.list_traces(READER, TraceFilter(), cursor=None, limit=10))
    assert [t.id for t in page.traces] == [second]
    clock.at += timedelta(minutes=1)
    assert asyncio.run(traces.prune()) == 1
    with pytest.raises(NotFound):
        asyncio.run(traces.get(READER, first))


# --- build_trace: each part of the record ---------------------------------------------


def test_the_summary_names_the_turn_it_was_built_for() -> None:
    message = uuid.uuid4()
    f = facts(message_id=message, input_messages=3, model="gpt-4o-mini")
    spans = [
        root(end=1_000_000),  # 1000 s
        chat("c1" * 8, 100, (5, 1, 0), attributes={"gen_ai.response.time_to_first_chunk": 0.75}),
        chat("c2" * 8, 200, (5, 1, 0), attributes={"gen_ai.response.time_to_first_chunk": 0.25}),
    ]
    s = build_trace(CONFIG, f, spans, NOW).summary
    assert (s.org_id, s.kind, s.name, s.model) == ("org", "agent_turn", "Helper", "gpt-4o-mini")
    assert (s.agent_id, s.thread_id, s.run_id, s.message_id) == (
        f.agent_id,
        f.run.thread_id,
        f.run.id,
        message,
    )
    assert (s.started_at, s.ended_at) == (NOW, NOW + timedelta(seconds=1000))
    assert s.duration_ms == 1_000_000
    assert s.input_messages == 3
    # the first model call's time to its first chunk, in milliseconds
    assert s.first_token_ms == 750
    assert (s.key_source, s.error) == ("platform", None)


def test_no_time_to_first_chunk_is_no_first_token_time() -> None:
    s = build_trace(CONFIG, facts(), [root(), chat("c1" * 8, 100, (5, 1, 0))], NOW).summary
    assert s.first_token_ms is None
    # a value that is not a float is not a time
    odd = chat("c1" * 8, 100, (5, 1, 0), attributes={"gen_ai.response.time_to_first_chunk": 2})
    assert build_trace(CONFIG, facts(), [root(), odd], NOW).summary.first_token_ms is None


def test_a_turn_without_model_calls_has_no_key_source_and_costs_nothing() -> None:
    s = build_trace(CONFIG, facts(), [root()], NOW).summary
    assert (s.key_source, s.cost_usd, s.model_calls) == (None, 0.0, 0)
    assert (s.input_tokens, s.output_tokens, s.tool_calls, s.tool_errors) == (0, 0, 0, 0)
    byok = build_trace(CONFIG, facts(), [root(), chat("c1" * 8, 1, (1, 1, 0), source="byok")], NOW)
    assert byok.summary.key_source == "byok"


def test_a_model_call_that_reports_no_usage_counts_no_tokens() -> None:
    bare = span("chat gpt-4o", "c1" * 8, "r" * 16, 1, 2, {"gen_ai.operation.name": "chat"})
    record = build_trace(CONFIG, facts(), [root(), bare], NOW)
    s = record.summary
    assert (s.model_calls, s.input_tokens, s.output_tokens, s.cached_input_tokens) == (1, 0, 0, 0)
    llm = record.spans[1]
    # no model named: no model and no cost on the span, and the turn's cost is unknown
    assert (llm.model, llm.cost_usd, llm.input_tokens) == (None, None, 0)
    assert s.cost_usd is None


def test_a_model_attribute_that_is_not_text_names_no_model() -> None:
    odd = chat("c1" * 8, 1, (1, 1, 0), attributes={"gen_ai.request.model": 5})
    llm = build_trace(CONFIG, facts(), [root(), odd], NOW).spans[1]
    assert (llm.model, llm.cost_usd) == (None, None)


def test_only_whole_numbers_are_token_counts() -> None:
    odd = chat(
        "c1" * 8,
        1,
        (0, 0, 0),
        attributes={"gen_ai.usage.input_tokens": True, "gen_ai.usage.output_tokens": "12"},
    )
    llm = build_trace(CONFIG, facts(), [root(), odd], NOW).spans[1]
    assert (llm.input_tokens, llm.output_tokens) == (0, 0)


def test_each_failed_tool_call_is_a_tool_error() -> None:
    spans = [
        root(),
        tool("t1" * 8, 100, error="TOOL_TIMEOUT"),
        tool("t2" * 8, 200),
        tool("t3" * 8, 300, error="TOOL_FAILED", mcp=False),
    ]
    s = build_trace(CONFIG, facts(), spans, NOW).summary
    assert (s.tool_calls, s.tool_errors) == (3, 2)


def test_an_interrupted_turn_is_an_error_and_a_completed_one_keeps_no_code() -> None:
    interrupted = build_trace(CONFIG, facts("interrupted", error="INTERRUPTED"), [root()], NOW)
    assert (interrupted.summary.status, interrupted.summary.error) == ("error", "INTERRUPTED")
    completed = build_trace(CONFIG, facts("completed", error="IGNORED"), [root()], NOW)
    assert (completed.summary.status, completed.summary.error) == ("ok", None)


def test_a_span_is_stored_with_its_attributes_error_and_duration() -> None:
    failing = span(
        "execute_tool search",
        "t1" * 8,
        "r" * 16,
        1,
        2,
        {"gen_ai.operation.name": "execute_tool", "agentsvc.tool.outcome": "timeout"},
        error="TOOL_TIMEOUT",
    )
    # 1000.001234567 s
    failing = msgspec.structs.replace(failing, end_ns=failing.start_ns + 1_000_001_234_567)
    record = build_trace(CONFIG, facts(), [root(), failing], NOW)
    stored = record.spans[1]
    assert stored.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "agentsvc.tool.outcome": "timeout",
    }
    assert (stored.status, stored.error, stored.duration_ms) == (
        "error",
        "TOOL_TIMEOUT",
        1_000_001.235,
    )
    assert (record.spans[0].status, record.spans[0].error) == ("ok", None)


def test_a_span_of_no_known_operation_is_a_chain() -> None:
    other = span("plan the reply", "p1" * 8, "r" * 16, 1, 2, {})
    assert build_trace(CONFIG, facts(), [root(), other], NOW).spans[1].kind == "chain"


def test_a_span_keeps_whichever_payloads_it_has() -> None:
    only_in = span("execute_tool a", "a1" * 8, "r" * 16, 1, 2, {}, input={"q": 1})
    only_out = span("execute_tool b", "b1" * 8, "r" * 16, 3, 4, {}, output="done")
    neither = span("execute_tool c", "c1" * 8, "r" * 16, 5, 6, {})
    record = build_trace(CONFIG, facts(), [root(), only_in, only_out, neither], NOW)
    by_id = {s.span_id: msgspec.json.decode(msgspec.json.encode(s)) for s in record.spans}
    assert (by_id["a1" * 8]["input"], by_id["a1" * 8].get("output")) == ({"q": 1}, None)
    assert (by_id["b1" * 8].get("input"), by_id["b1" * 8]["output"]) == (None, "done")
    assert "input" not in by_id["c1" * 8]
    assert "output" not in by_id["c1" * 8]


def test_payloads_exactly_at_the_cap_are_kept_whole_and_past_it_cut_in_halves() -> None:
    cap = CONFIG.payload_bytes  # 400 bytes, input and output together
    out = "x" * (cap - len('{"n":1}') - 2)  # with its quotes: exactly the cap
    at_cap = span("execute_tool a", "a1" * 8, "r" * 16, 1, 2, {}, input={"n": 1}, output=out)
    over = span("execute_tool b", "b1" * 8, "r" * 16, 3, 4, {}, input={"n": 1}, output=out + "y")
    record = build_trace(CONFIG, facts(), [root(), at_cap, over], NOW)
    whole, cut = (msgspec.json.decode(msgspec.json.encode(s)) for s in record.spans[1:])
    assert ("truncated" in whole, whole["output"]) == (False, out)
    assert (cut["truncated"], cut["original_bytes"]) == (True, cap + 1)
    # each payload keeps the start of its text, up to half the cap
    assert cut["output"] == ('"' + out)[: cap // 2]
    assert cut["input"] == '{"n":1}'


def test_known_values_are_redacted_from_payloads() -> None:
    secret = "a-known-credential-value"
    leaky = span("execute_tool a", "a1" * 8, "r" * 16, 1, 2, {}, input={"k": secret}, output=secret)
    record = build_trace(CONFIG, facts(known_secrets=(secret,)), [root(), leaky], NOW)
    stored = msgspec.json.decode(msgspec.json.encode(record.spans[1]))
    assert (stored["input"], stored["output"]) == ({"k": REDACTED}, REDACTED)


def test_a_parent_stored_elsewhere_is_named() -> None:
    f = facts(stored_parent="s" * 16)
    record = build_trace(CONFIG, f, [root(parent="s" * 16)], NOW)
    assert record.spans[0].parent_span_id == "s" * 16
    assert (
        build_trace(CONFIG, facts(), [root(parent="s" * 16)], NOW).spans[0].parent_span_id is None
    )


def test_the_root_is_the_agent_span_or_else_the_first() -> None:
    early = chat("c1" * 8, -5, (1, 1, 0))  # begins before the agent span
    assert build_trace(CONFIG, facts(), [root(), early], NOW).root_span_id == "r" * 16
    spans = [tool("t2" * 8, 20), tool("t1" * 8, 10)]
    record = build_trace(CONFIG, facts(step_limit=True), spans, NOW)
    assert record.root_span_id == "t1" * 8
    # with no agent span the turn's evaluations name no span
    assert [(e.name, e.span_id) for e in record.evaluations] == [("step_limit", None)]


def test_each_evaluation_says_what_happened() -> None:
    spans = [
        root(),
        chat(
            "c1" * 8,
            100,
            (10, 10, 0),
            attributes={
                "gen_ai.response.time_to_first_chunk": 1.25,
                "agentsvc.provider.retries": 2,
            },
        ),
        chat("c2" * 8, 300, (10, 10, 0), error="PROVIDER_UNAVAILABLE"),
        # exactly at the bound: not slow
        chat("c3" * 8, 500, (10, 10, 0), attributes={"gen_ai.response.time_to_first_chunk": 1.0}),
        span(
            "execute_tool f",
            "t1" * 8,
            "r" * 16,
            1,
            2,
            {"gen_ai.operation.name": "execute_tool"},
            error="TOOL_FAILED",
        ),
        span("resolve_credentials", "w1" * 8, "r" * 16, 3, 4, {}, error="RESOLVER_DOWN"),
        span("resolve_credentials", "w2" * 8, "r" * 16, 5, 6, {}),  # answered: no fallback
        span("plan", "p1" * 8, "r" * 16, 7, 8, {}, error="SOMETHING"),  # a chain's error
    ]
    record = build_trace(CONFIG, facts(step_limit=True, empty=True), spans, NOW)
    found = [(e.name, e.span_id, e.label, e.detail) for e in record.evaluations]
    assert found == [
        ("tool_error", "t1" * 8, "error", "TOOL_FAILED"),  # no outcome named: error
        ("resolver_fallback", "w1" * 8, "error", "the platform key was used"),
        ("provider_retry", "c1" * 8, "retried", "2 retries"),
        ("slow_first_token", "c1" * 8, "slow", "first token after 1.2 s (bound 1 s)"),
        ("provider_error", "c2" * 8, "error", "PROVIDER_UNAVAILABLE"),
        ("step_limit", "r" * 16, "cut", "the reply reached the bound of model calls"),
        ("empty_reply", "r" * 16, "empty", "the reply has no text"),
    ]


def test_a_page_reads_one_trace_more_than_it_shows() -> None:
    """Whether there is a next page is known from one more row, not from all of them."""
    storage = MemoryStorage()
    stored(storage, 5)
    asked: list[int] = []
    store = storage.traces
    reading = store.list_traces

    async def counted(*args: Any, limit: int, **kwargs: Any) -> list[TraceSummary]:
        asked.append(limit)
        return await reading(*args, limit=limit, **kwargs)

    store.list_traces = counted  # type: ignore[method-assign]
    traces = Traces(store, MovingClock(NOW))
    page = asyncio.run(traces.list_traces(READER, TraceFilter(), cursor=None, limit=2))
    assert (len(page.traces), asked) == (2, [3])
