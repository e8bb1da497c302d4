"""The trace list and the retention sweep (``TraceStore``) on both adapters: pages
of a generated month (tests/contract/month.py) under every filter, newest first,
with no duplicate or gap; ``prune_traces``; and records no turn writes
(``add_trace``: a runner run's), alone and with their steps' turns under one trace
id, which analytics never counts as replies.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from agentsvc_core.entities import (
    Principal,
    StoredSpan,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
)
from agentsvc_core.entities.trace import SpanKindName
from agentsvc_core.errors import Conflict
from agentsvc_core.ports import TraceFilter
from agentsvc_core.use_cases.analytics import Analytics, AnalyticsReport
from agentsvc_core.use_cases.traces.reading import Traces
from tests.contract.conftest import Backend
from tests.contract.month import NOW, Fixed, Month, a_turn, bucket_start, expected, generate
from tests.contract.test_analytics_contract import check
from tests.contract.test_conversations_contract import a_thread


@pytest.fixture(scope="module")
def month(backend: Backend) -> Month:
    return generate(backend)


# --- the trace list ----------------------------------------------------------------


def _pages(backend: Backend, org: str, where: TraceFilter, limit: int) -> list[list[str]]:
    traces = Traces(backend.storage.traces, Fixed(NOW))
    who = Principal(org_id=org, method="api_key")
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = backend.run(lambda c=cursor: traces.list_traces(who, where, cursor=c, limit=limit))
        pages.append([t.id for t in page.traces])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def _listed(m: Month, org: str, where: TraceFilter) -> list[str]:
    def keep(t: TraceSummary) -> bool:
        return (
            t.org_id == org
            and where.agent_id in (None, t.agent_id)
            and where.runner_id in (None, t.runner_id)
            and where.thread_id in (None, t.thread_id)
            and where.status in (None, t.status)
            and (where.since is None or t.started_at >= where.since)
            and (where.until is None or t.started_at < where.until)
        )

    newest_first = sorted(m.traces, key=lambda t: (t.started_at, t.id), reverse=True)
    return [t.id for t in newest_first if keep(t)]


def _filters(m: Month) -> Iterable[TraceFilter]:
    busy = max(m.threads[:45], key=lambda th: sum(t.thread_id == th.id for t in m.traces))
    yield TraceFilter()
    yield TraceFilter(agent_id=m.agents[0])
    yield TraceFilter(thread_id=busy.id)
    yield TraceFilter(runner_id=m.runners[1])
    yield TraceFilter(status="error")
    yield TraceFilter(status="ok", agent_id=m.agents[2])
    yield TraceFilter(since=NOW - timedelta(days=9), until=NOW - timedelta(days=2))
    yield TraceFilter(since=NOW - timedelta(days=9, minutes=3), agent_id=m.agents[1])
    yield TraceFilter(until=NOW - timedelta(days=20))


@pytest.mark.parametrize("limit", [1, 7, 50, 1000])
def test_the_trace_list_pages_newest_first_without_gaps(
    backend: Backend, month: Month, limit: int
) -> None:
    started = [t.started_at for t in month.traces if t.org_id == month.org]
    assert len(started) > len(set(started)), "the month has turns that started together"
    for where in _filters(month):
        want = _listed(month, month.org, where)
        pages = _pages(backend, month.org, where, limit)
        assert [i for page in pages for i in page] == want, where
        assert all(len(page) == limit for page in pages[:-1])
        assert len(pages[-1]) <= limit
        assert want or pages == [[]]
    # the other organization's traces are its own
    assert _pages(backend, month.other, TraceFilter(), 1000) == [
        _listed(month, month.other, TraceFilter())
    ]


def test_a_listed_trace_reads_back(backend: Backend) -> None:
    # turns of their own, kept for years: the month's were kept until April 2026, and
    # the sweep of any app the test process runs on this database (tests/web's shared
    # apps) prunes, by the real clock, the evaluations of traces kept that long
    m = Month(
        org=backend.fresh_org(),
        other=backend.fresh_org(),
        agents=[uuid.uuid4()],
        runners=[uuid.uuid4()],
    )
    th = backend.run(backend.storage.threads.add, a_thread(m.org, m.agents[0]))
    rng = random.Random(5)
    for i in range(12):
        at = NOW - timedelta(hours=12 - i)
        a_turn(backend, m, th, at, rng, keep_until=datetime(2100, 1, 1, tzinfo=UTC))
    t = next(t for t in m.traces if t.tool_errors)
    found = backend.run(backend.storage.traces.get_trace, m.org, t.id)
    assert found is not None
    summary, spans, evaluations = found
    assert summary == t
    assert [s.name for s in spans] == ["invoke_agent agent"]
    assert [e.name for e in evaluations] == ["tool_error"]
    assert backend.run(backend.storage.traces.get_trace, m.other, t.id) is None


# --- retention ---------------------------------------------------------------------


def test_prune_drops_the_traces_kept_long_enough(backend: Backend) -> None:
    """Turns of long ago (2025: no other test keeps traces that old, and the month's
    are kept until 2026), kept until one day apart."""
    rng = random.Random(5)
    m = Month(org=backend.fresh_org(), other="", agents=[uuid.uuid4()], runners=[uuid.uuid4()])
    start = datetime(2025, 1, 1, tzinfo=UTC)
    th = backend.run(
        backend.storage.threads.add,
        a_thread(m.org, m.agents[0], created_at=start, updated_at=start),
    )
    for day in range(6):
        a_turn(backend, m, th, start + timedelta(days=day, hours=1), rng)
    cut = m.traces[2].started_at + timedelta(days=30)  # the third's keep_until: kept
    traces = Traces(backend.storage.traces, Fixed(cut))
    if backend.name == "postgres":
        # not yet summed by analytics' fold: kept, whatever their time
        assert backend.run(traces.prune) == 0
    backend.run(backend.storage.analytics.roll_up)  # as the sweep does, before pruning
    who = Principal(org_id=m.org, method="api_key")
    counted = Analytics(backend.storage.analytics, Fixed(cut), None)

    def replies() -> int:
        until = start + timedelta(days=7)
        got = backend.run(lambda: counted.report(who, "custom", since=start, until=until))
        return got.totals.replies

    assert replies() == 6
    assert backend.run(traces.prune) == 2
    assert replies() == 6  # analytics' counts outlive the pruned traces
    left = backend.run(lambda: traces.list_traces(who, TraceFilter(), cursor=None, limit=100))
    assert [t.id for t in left.traces] == [t.id for t in reversed(m.traces[2:])]
    for gone in m.traces[:2]:
        assert backend.run(backend.storage.traces.get_trace, m.org, gone.id) is None
    for kept in m.traces[2:]:
        found = backend.run(backend.storage.traces.get_trace, m.org, kept.id)
        assert found is not None
        assert found[0] == kept
        assert len(found[1]) == 1
    assert backend.run(traces.prune) == 0
    # the month (kept until 2026) is untouched by a later sweep of 2025
    assert (
        backend.run(Traces(backend.storage.traces, Fixed(datetime(2025, 12, 31, tzinfo=UTC))).prune)
        == 4
    )


def test_turns_sent_with_one_trace_id_add_up(backend: Backend) -> None:
    """A client that sends one ``traceparent`` with several turns: one trace, whose
    totals are the turns' added up, its time the span of both, the same on both
    adapters (the duration rounded half a millisecond up)."""
    m = Month(org=backend.fresh_org(), other="", agents=[uuid.uuid4()], runners=[uuid.uuid4()])
    start = datetime(2025, 6, 1, tzinfo=UTC)
    th = backend.run(
        backend.storage.threads.add,
        a_thread(m.org, m.agents[0], created_at=start, updated_at=start),
    )
    rng = random.Random(3)
    trace_id = "ab" * 16
    first = start + timedelta(hours=1)
    # the second turn begins 2.5 ms later; each lasts 3 s: 3002.5 ms in all
    for at in (first, first + timedelta(microseconds=2500)):
        a_turn(backend, m, th, at, rng, trace_id)
    one, two = m.traces
    found = backend.run(backend.storage.traces.get_trace, m.org, trace_id)
    assert found is not None
    summary, spans, _ = found
    assert (summary.started_at, summary.ended_at) == (first, two.ended_at)
    assert summary.duration_ms == 3003
    for name in ("input_tokens", "output_tokens", "model_calls", "tool_calls", "input_messages"):
        assert getattr(summary, name) == getattr(one, name) + getattr(two, name), name
    costs = (one.cost_usd, two.cost_usd)
    if None in costs:
        assert summary.cost_usd is None
    else:
        assert summary.cost_usd == pytest.approx(sum(c or 0.0 for c in costs), abs=1e-9)
    assert summary.status == ("error" if "error" in (one.status, two.status) else "ok")
    assert len(spans) == 2
    traces = Traces(backend.storage.traces, Fixed(NOW))
    who = Principal(org_id=m.org, method="api_key")
    listed = backend.run(lambda: traces.list_traces(who, TraceFilter(), cursor=None, limit=10))
    assert [t.id for t in listed.traces] == [trace_id, trace_id]  # a row per turn


# --- records no turn writes: a runner run's (add_trace) ----------------------------


def a_runner_run(
    org: str,
    at: datetime,
    rng: random.Random,
    *,
    trace_id: str | None = None,
    runner_id: uuid.UUID | None = None,
    agent_id: uuid.UUID | None = None,
    keep_until: datetime | None = None,
    evaluated: bool = False,
) -> TraceRecord:
    """A runner run's record, as a runner engine would store it: the run's own span
    (10 s from ``at``) and a span per step: two agent steps (at ``at`` and 4 s
    later: their turns store their own records), a condition at 8 s, a webhook at
    9 s. No model call of its own (its ``cost_usd`` left None). ``agent_id``: an
    agent's scheduled task (no runner)."""

    def span(
        name: str, kind: SpanKindName, after_s: float, length_s: float, parent: str | None
    ) -> StoredSpan:
        return StoredSpan(
            span_id=f"{rng.getrandbits(64):016x}",
            parent_span_id=parent,
            name=name,
            kind=kind,
            status="ok",
            started_at=at + timedelta(seconds=after_s),
            duration_ms=length_s * 1000,
            attributes={"agentsvc.runner.step": name},
        )

    run = span("runner Nightly digest", "chain", 0, 10, None)
    steps = [
        span("summarize", "runner_step", 0, 3, run.span_id),
        span("review", "runner_step", 4, 3, run.span_id),
        span("changed?", "condition", 8, 0.5, run.span_id),
        span("notify", "webhook", 9, 1, run.span_id),
    ]
    summary = TraceSummary(
        id=trace_id or f"{rng.getrandbits(128):032x}",
        org_id=org,
        kind="runner_run",
        name="Nightly digest",
        status="ok",
        run_status="completed",
        started_at=at,
        ended_at=at + timedelta(seconds=10),
        duration_ms=10_000,
        agent_id=agent_id,
        run_id=uuid.uuid4(),
        runner_id=runner_id,
    )
    evaluations = [
        TraceEvaluation(span_id=steps[3].span_id, name="slow_webhook", source="heuristic")
    ]
    return TraceRecord(
        summary=summary,
        root_span_id=run.span_id,
        spans=[run, *steps],
        evaluations=evaluations if evaluated else [],
        keep_until=keep_until or at + timedelta(days=30),
    )


def _runner_month(backend: Backend) -> Month:
    return Month(org=backend.fresh_org(), other="", agents=[uuid.uuid4()], runners=[uuid.uuid4()])


def _listed_ids(backend: Backend, org: str, where: TraceFilter) -> list[tuple[str, str]]:
    traces = Traces(backend.storage.traces, Fixed(NOW))
    who = Principal(org_id=org, method="api_key")
    page = backend.run(lambda: traces.list_traces(who, where, cursor=None, limit=100))
    assert page.next_cursor is None
    return [(t.id, t.kind) for t in page.traces]


def test_a_record_no_turn_writes_reads_back(backend: Backend) -> None:
    """A runner run's record alone: read back as stored, listed under its runner,
    and once only (its root span is its key in the trace)."""
    rng = random.Random(41)
    m = _runner_month(backend)
    at = datetime(2026, 1, 20, 8, 0, 0, 123_456, tzinfo=UTC)  # kept until 2026-02-19
    record = a_runner_run(m.org, at, rng, runner_id=m.runners[0])
    backend.run(backend.storage.traces.add_trace, record)
    found = backend.run(backend.storage.traces.get_trace, m.org, record.summary.id)
    assert found == (record.summary, record.spans, [])
    assert (
        backend.run(backend.storage.traces.get_trace, backend.fresh_org(), record.summary.id)
        is None
    )
    mine = [(record.summary.id, "runner_run")]
    assert _listed_ids(backend, m.org, TraceFilter(runner_id=m.runners[0])) == mine
    assert _listed_ids(backend, m.org, TraceFilter()) == mine
    assert _listed_ids(backend, m.org, TraceFilter(runner_id=uuid.uuid4())) == []
    assert _listed_ids(backend, m.org, TraceFilter(agent_id=m.agents[0])) == []
    # with evaluations (the statement's other form), and a record stored twice
    evaluated = a_runner_run(m.org, at, rng, runner_id=m.runners[0], evaluated=True)
    backend.run(backend.storage.traces.add_trace, evaluated)
    found = backend.run(backend.storage.traces.get_trace, m.org, evaluated.summary.id)
    assert found == (evaluated.summary, evaluated.spans, evaluated.evaluations)
    with pytest.raises(Conflict):
        backend.run(backend.storage.traces.add_trace, evaluated)
    found = backend.run(backend.storage.traces.get_trace, m.org, evaluated.summary.id)
    assert found == (evaluated.summary, evaluated.spans, evaluated.evaluations)


@pytest.mark.parametrize("runner_first", [True, False])
def test_a_runner_run_and_its_steps_turns_are_one_trace(
    backend: Backend, runner_first: bool
) -> None:
    """A runner run's record and its two agent steps' turns under one trace id,
    stored in either order (the engine may store the run's record last): one trace
    named by the run (its kind, name, ids: the first turn starts with it, and a
    record that is not a turn comes first on a tie), the turns' totals added, the
    spans of all three in the order they started; a row per record in the list."""
    rng = random.Random(43)
    m = _runner_month(backend)
    at = datetime(2026, 1, 21, 8, tzinfo=UTC)  # kept until 2026-02-20
    th = backend.run(
        backend.storage.threads.add, a_thread(m.org, m.agents[0], created_at=at, updated_at=at)
    )
    trace_id = f"{rng.getrandbits(128):032x}"
    record = a_runner_run(m.org, at, rng, trace_id=trace_id, runner_id=m.runners[0], evaluated=True)
    if runner_first:
        backend.run(backend.storage.traces.add_trace, record)
    for after in (0, 4):  # the agent steps' turns, 3 s each
        a_turn(backend, m, th, at + timedelta(seconds=after), rng, trace_id)
    if not runner_first:
        backend.run(backend.storage.traces.add_trace, record)
    one, two = m.traces
    found = backend.run(backend.storage.traces.get_trace, m.org, trace_id)
    assert found is not None
    summary, spans, evaluations = found
    run = record.summary
    for name in ("kind", "name", "runner_id", "run_id", "agent_id", "thread_id", "run_status"):
        assert getattr(summary, name) == getattr(run, name), name
    assert (summary.started_at, summary.ended_at, summary.duration_ms) == (
        at,
        at + timedelta(seconds=10),
        10_000,
    )
    for name in ("input_tokens", "output_tokens", "model_calls", "tool_calls", "input_messages"):
        assert getattr(summary, name) == getattr(one, name) + getattr(two, name), name
    # the run's record has no model call: it adds no cost, known or not
    costs = (one.cost_usd, two.cost_usd)
    if None in costs:
        assert summary.cost_usd is None
    else:
        assert summary.cost_usd == pytest.approx(sum(c or 0.0 for c in costs), abs=1e-9)
    assert summary.key_source == "platform"
    assert summary.status == ("error" if "error" in (one.status, two.status) else "ok")
    assert summary.error == (one.error or two.error)
    assert [s.name for s in spans] == [
        "runner Nightly digest",
        "summarize",
        "invoke_agent agent",
        "review",
        "invoke_agent agent",
        "changed?",
        "notify",
    ]
    # evaluations in the order they were stored: the run's and the turns'
    turn_evals = ["tool_error" for t in (one, two) if t.tool_errors]
    assert [e.name for e in evaluations] == (
        ["slow_webhook", *turn_evals] if runner_first else [*turn_evals, "slow_webhook"]
    )
    # the list: a row per record; under the runner, the run's and the turns naming it
    assert sorted(_listed_ids(backend, m.org, TraceFilter())) == [
        (trace_id, "agent_turn"),
        (trace_id, "agent_turn"),
        (trace_id, "runner_run"),
    ]
    steps_named = [(trace_id, "agent_turn") for t in (one, two) if t.runner_id == m.runners[0]]
    assert sorted(_listed_ids(backend, m.org, TraceFilter(runner_id=m.runners[0]))) == [
        *steps_named,
        (trace_id, "runner_run"),
    ]


def test_prune_drops_a_runner_runs_record_by_its_own_time(backend: Backend) -> None:
    """Each record of a trace is kept for its own time: the run's records go (one
    alone, one with a step's turn), the turn stays, and its trace is then the turn's.
    Kept until early January 2026: no other test keeps records until then."""
    rng = random.Random(47)
    m = _runner_month(backend)
    at = datetime(2025, 12, 5, 8, tzinfo=UTC)  # the turn: kept until 2026-01-04 08:00
    th = backend.run(
        backend.storage.threads.add, a_thread(m.org, m.agents[0], created_at=at, updated_at=at)
    )
    shared = f"{rng.getrandbits(128):032x}"
    gone = datetime(2026, 1, 2, tzinfo=UTC)
    with_turn = a_runner_run(
        m.org, at, rng, trace_id=shared, runner_id=m.runners[0], keep_until=gone, evaluated=True
    )
    alone = a_runner_run(m.org, at, rng, runner_id=m.runners[0], keep_until=gone, evaluated=True)
    for record in (with_turn, alone):
        backend.run(backend.storage.traces.add_trace, record)
    a_turn(backend, m, th, at + timedelta(seconds=1), rng, shared)
    (turn,) = m.traces
    backend.run(backend.storage.analytics.roll_up)  # as the sweep does, before pruning
    # what other tests kept until before 2026 (the sweep would have taken it)
    backend.run(Traces(backend.storage.traces, Fixed(datetime(2026, 1, 1, tzinfo=UTC))).prune)
    traces = Traces(backend.storage.traces, Fixed(datetime(2026, 1, 4, tzinfo=UTC)))
    assert backend.run(traces.prune) == 2
    assert backend.run(backend.storage.traces.get_trace, m.org, alone.summary.id) is None
    found = backend.run(backend.storage.traces.get_trace, m.org, shared)
    assert found is not None
    summary, spans, evaluations = found
    assert summary == turn
    assert [s.name for s in spans] == ["invoke_agent agent"]
    assert [e.name for e in evaluations] == (["tool_error"] if turn.tool_errors else [])
    assert _listed_ids(backend, m.org, TraceFilter()) == [(shared, "agent_turn")]
    assert _listed_ids(backend, m.org, TraceFilter(runner_id=m.runners[0])) == (
        [(shared, "agent_turn")] if turn.runner_id == m.runners[0] else []
    )
    assert backend.run(traces.prune) == 0


def test_analytics_counts_no_runner_run_as_a_reply(backend: Backend) -> None:
    """Runner runs' records beside turns, in the last two hours: a runner's run
    under a turn's trace id, and an agent's scheduled task's run (it names the
    agent), failed, with messages and tool calls. Analytics reports the turns
    alone, from the rows stored since the last fold and from the sums after it."""
    now = datetime.now(UTC)
    rng = random.Random(53)
    m = _runner_month(backend)
    backend.run(backend.storage.analytics.roll_up)  # the mark: about now
    start = now - timedelta(minutes=100)
    th = backend.run(
        backend.storage.threads.add,
        a_thread(m.org, m.agents[0], created_at=start, updated_at=start),
    )
    m.threads.append(th)
    shared = f"{rng.getrandbits(128):032x}"
    backend.run(
        backend.storage.traces.add_trace,
        a_runner_run(m.org, start, rng, trace_id=shared, runner_id=m.runners[0]),
    )
    for k in range(4):
        a_turn(backend, m, th, start + timedelta(minutes=15 * k), rng, shared if k == 0 else None)
    task = a_runner_run(m.org, start + timedelta(minutes=20), rng, agent_id=m.agents[0])
    failed = msgspec.structs.replace(
        task.summary,
        status="error",
        run_status="failed",
        error="RUNNER_FAILED",
        input_messages=1,
        tool_calls=2,
        tool_errors=1,
    )
    backend.run(backend.storage.traces.add_trace, msgspec.structs.replace(task, summary=failed))
    since = bucket_start(now, "hour") - timedelta(hours=23)
    live = Analytics(backend.storage.analytics, Fixed(now), None)
    who = Principal(org_id=m.org, method="api_key")

    def got(agent: uuid.UUID | None) -> AnalyticsReport:
        return backend.run(lambda: live.report(who, "24h", agent_id=agent))

    want = expected(m, m.org, since, now, "hour", None)
    assert want.totals["replies"] == 4
    for _ in range(3):  # from the rows; from the sums; folding again changes nothing
        check(got(None), want)
        check(got(m.agents[0]), expected(m, m.org, since, now, "hour", m.agents[0]))
        backend.run(backend.storage.analytics.roll_up)
