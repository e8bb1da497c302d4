"""A generated month of turns, written through the storage ports, and the sums
analytics should report for it, computed here from what was generated (the
contract tests of analytics and of the trace list share it).

Turns start on a 10-minute grid, so some start at the same instant (the list's
cursor must order them by id) and some exactly on an hour or a day (a bucket's
start belongs to it, a window's end does not). Usage records land from 0 s to 15
minutes after their turn began: some in the next bucket, some after ``NOW``.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import (
    StoredSpan,
    Thread,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
    Usage,
    UsageRecord,
)
from tests.contract.conftest import Backend
from tests.contract.test_conversations_contract import a_message, a_run, a_thread

NOW = datetime(2026, 3, 31, 13, 27, 41, 500_000, tzinfo=UTC)
GRID = timedelta(minutes=10)
# 32 days before NOW, at midnight: the grid of turns holds every hour and day start;
# the 30d window starts later, so some rows fall before it
MONTH_START = datetime(2026, 2, 27, tzinfo=UTC)
# USD per million input and output tokens; None: the model has no price
PRICES: dict[str, tuple[float, float] | None] = {
    "gpt-a": (2.5, 10.0),
    "gpt-b": (0.15, 0.6),
    "local-x": None,
}
STEP = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
COSTS = ("cost_usd", "compaction_cost_usd", "memory_cost_usd")
FIELDS = (
    "threads",
    "messages",
    "replies",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "total_tokens",
    "cost_usd",
    "unpriced_calls",
    "tool_calls",
    "tool_errors",
    "errors",
    "compaction_calls",
    "compaction_cost_usd",
    "memory_calls",
    "memory_cost_usd",
    "byok_calls",
    "platform_calls",
)


class Fixed:
    """The clock, stopped."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


@dataclass
class Month:
    org: str
    other: str  # another organization, same days, same first agent id
    agents: list[UUID]
    runners: list[UUID]
    threads: list[Thread] = field(default_factory=list)
    usage: list[UsageRecord] = field(default_factory=list)
    traces: list[TraceSummary] = field(default_factory=list)


def _slots(after: datetime, n: int, rng: random.Random, before: datetime = NOW) -> list[datetime]:
    """Up to ``n`` distinct grid times in (after, before), oldest first."""
    first = MONTH_START + GRID * (int((after - MONTH_START) / GRID) + 1)
    count = max(0, int((before - first) / GRID) + 1)
    return sorted(first + GRID * k for k in rng.sample(range(count), min(n, count)))


def a_turn(
    backend: Backend,
    m: Month,
    th: Thread,
    at: datetime,
    rng: random.Random,
    trace_id: str | None = None,
    keep_until: datetime | None = None,
) -> None:
    """One turn at ``at``: its messages, usage records and trace, as the reply writes
    (``trace_id``: the trace's id, as a client's ``traceparent`` gives it; kept 30
    days from ``at`` unless ``keep_until`` says otherwise)."""
    store = backend.storage.conversations
    run = a_run(th, started_at=at, heartbeat_at=at)
    asked = rng.choice([1, 1, 1, 2])
    users = [a_message(th, content=f"q{i}", run_id=run.id, created_at=at) for i in range(asked)]
    backend.run(store.begin_turn, run, users, at - timedelta(seconds=45))
    failed = rng.random() < 0.1
    usage = []
    for k in range(rng.randint(1, 3) + (rng.random() < 0.15)):
        model = rng.choice(list(PRICES))
        inp, out = rng.randint(10, 20_000), rng.randint(1, 2_000)
        cached = rng.choice([None, 0, inp // 3])
        price = PRICES[model]
        usage.append(
            UsageRecord(
                id=uuid.uuid4(),
                org_id=th.org_id,
                agent_id=th.agent_id,
                thread_id=th.id,
                run_id=run.id,
                message_id=None,
                provider="fake",
                model=model,
                usage=Usage(input_tokens=inp, output_tokens=out, cached_input_tokens=cached),
                key_source="byok" if rng.random() < 0.2 else "platform",
                metadata={},
                # minutes after the turn began: some land in the next bucket, or
                # after NOW (outside every window)
                created_at=at + timedelta(seconds=rng.choice([0, 1, 599, 900]) + k),
                cost_usd=None if price is None else inp * price[0] / 1e6 + out * price[1] / 1e6,
                purpose="compaction" if k == 3 else "reply",
            )
        )
    tools = rng.randint(0, 3)
    reply = a_message(th, "assistant", "a", run_id=run.id, created_at=at)
    done = msgspec.structs.replace(
        run, status="failed" if failed else "completed", finished_at=at + timedelta(seconds=3)
    )
    costs = [u.cost_usd for u in usage]
    summary = TraceSummary(
        id=trace_id or f"{rng.getrandbits(128):032x}",
        org_id=th.org_id,
        kind="agent_turn",
        name="agent",
        status="error" if failed else "ok",
        run_status=done.status,
        started_at=at,
        ended_at=at + timedelta(seconds=3),
        duration_ms=3000,
        agent_id=th.agent_id,
        thread_id=th.id,
        run_id=run.id,
        runner_id=rng.choice(m.runners) if rng.random() < 0.2 else None,
        message_id=reply.id,
        model=usage[0].model,
        input_tokens=sum(u.usage.input_tokens for u in usage),
        output_tokens=sum(u.usage.output_tokens for u in usage),
        cached_input_tokens=sum(u.usage.cached_input_tokens or 0 for u in usage),
        cost_usd=None if None in costs else sum(c or 0.0 for c in costs),
        model_calls=len(usage),
        tool_calls=tools,
        tool_errors=rng.randint(0, tools),
        input_messages=asked,
        key_source="platform",
        error="PROVIDER_ERROR" if failed else None,
    )
    span = StoredSpan(
        span_id=f"{rng.getrandbits(64):016x}",
        parent_span_id=None,
        name="invoke_agent agent",
        kind="agent",
        status=summary.status,
        started_at=at,
        duration_ms=3000.0,
    )
    evaluations = [TraceEvaluation(span_id=span.span_id, name="tool_error", source="heuristic")]
    trace = TraceRecord(
        summary=summary,
        root_span_id=span.span_id,
        spans=[span],
        evaluations=evaluations if summary.tool_errors else [],
        keep_until=keep_until or at + timedelta(days=30),
    )
    backend.run(store.finish_turn, done, [reply], usage, None, trace)
    m.usage.extend(usage)
    if tools == 1 and not failed:
        # memory collection after the turn: a record of its own, stored later
        collected = msgspec.structs.replace(
            usage[0],
            id=uuid.uuid4(),
            created_at=usage[0].created_at + timedelta(seconds=5),
            purpose="memory",
        )
        backend.run(store.add_usage, [collected])
        m.usage.append(collected)
    m.traces.append(summary)


def generate(backend: Backend) -> Month:
    rng = random.Random(17)
    m = Month(
        org=backend.fresh_org(),
        other=backend.fresh_org(),
        agents=[uuid.uuid4() for _ in range(3)],
        runners=[uuid.uuid4(), uuid.uuid4()],
    )
    plan = [(m.org, m.agents[i % 3], 5) for i in range(45)]
    plan += [(m.other, m.agents[0], 3) for _ in range(10)]
    for i, (org, agent, turns) in enumerate(plan):
        created = MONTH_START + timedelta(
            seconds=rng.uniform(0, (NOW - MONTH_START).total_seconds())
        )
        # the first thread's turns are all before the 30d window
        before = MONTH_START + timedelta(days=2) if i == 0 else NOW
        created = MONTH_START + timedelta(minutes=1) if i == 0 else created
        th = backend.run(
            backend.storage.threads.add,
            a_thread(org, agent, created_at=created, updated_at=created),
        )
        m.threads.append(th)
        for at in _slots(th.created_at, turns, rng, before):
            a_turn(backend, m, th, at, rng)
    return m


# --- what analytics should say: sums made here from the generated rows -----------


def bucket_start(at: datetime, bucket: str) -> datetime:
    at = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return at.replace(hour=0) if bucket == "day" else at


@dataclass
class Expected:
    totals: dict[str, float]
    series: dict[datetime, dict[str, float]]
    agents: dict[UUID, dict[str, float]]
    models: dict[str, dict[str, Any]]


def expected(
    m: Month, org: str, since: datetime, until: datetime, bucket: str, agent: UUID | None
) -> Expected:
    series: dict[datetime, dict[str, float]] = {}
    at = bucket_start(since, bucket)
    while at < until:
        series[at] = dict.fromkeys(FIELDS, 0)
        at += STEP[bucket]
    e = Expected(dict.fromkeys(FIELDS, 0), series, {}, {})

    def wanted(row_org: str, row_agent: UUID | None, when: datetime) -> bool:
        return row_org == org and since <= when < until and agent in (None, row_agent)

    def add(when: datetime, row_agent: UUID, **values: float) -> None:
        targets = (
            e.totals,
            e.series[bucket_start(when, bucket)],
            e.agents.setdefault(row_agent, dict.fromkeys(FIELDS, 0)),
        )
        for target in targets:
            for name, value in values.items():
                target[name] += value

    for u in m.usage:
        if not wanted(u.org_id, u.agent_id, u.created_at):
            continue
        known = u.cost_usd or 0.0
        compaction = u.purpose == "compaction"
        memory = u.purpose == "memory"
        add(
            u.created_at,
            u.agent_id,
            model_calls=1,
            input_tokens=u.usage.input_tokens,
            output_tokens=u.usage.output_tokens,
            cached_input_tokens=u.usage.cached_input_tokens or 0,
            total_tokens=u.usage.input_tokens + u.usage.output_tokens,
            cost_usd=known,
            unpriced_calls=u.cost_usd is None,
            compaction_calls=compaction,
            compaction_cost_usd=known if compaction else 0.0,
            memory_calls=memory,
            memory_cost_usd=known if memory else 0.0,
            byok_calls=u.key_source == "byok",
            platform_calls=u.key_source == "platform",
        )
        mt = e.models.setdefault(
            u.model,
            {
                "model_calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cached_input_tokens": 0,
                "cost_usd": 0.0,
            },
        )
        mt["model_calls"] += 1
        mt["input_tokens"] += u.usage.input_tokens
        mt["output_tokens"] += u.usage.output_tokens
        mt["cached_input_tokens"] += u.usage.cached_input_tokens or 0
        mt["cost_usd"] = None if None in (u.cost_usd, mt["cost_usd"]) else mt["cost_usd"] + known
    for t in m.traces:
        if t.agent_id is not None and wanted(t.org_id, t.agent_id, t.started_at):
            add(
                t.started_at,
                t.agent_id,
                replies=1,
                messages=t.input_messages,
                tool_calls=t.tool_calls,
                tool_errors=t.tool_errors,
                errors=t.status == "error",
            )
    for th in m.threads:
        if wanted(th.org_id, th.agent_id, th.created_at):
            add(th.created_at, th.agent_id, threads=1)
    return e
