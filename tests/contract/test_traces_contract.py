"""The trace list and the retention sweep (``TraceStore``) on both adapters: pages
of a generated month (tests/contract/month.py) under every filter, newest first,
with no duplicate or gap; and ``prune_traces``.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from agentsvc_core.entities import Principal, TraceSummary
from agentsvc_core.ports import TraceFilter
from agentsvc_core.use_cases.logs import Analytics, Logs
from tests.contract.conftest import Backend
from tests.contract.month import NOW, Fixed, Month, a_turn, generate
from tests.contract.test_conversations_contract import a_thread


@pytest.fixture(scope="module")
def month(backend: Backend) -> Month:
    return generate(backend)


# --- the trace list ----------------------------------------------------------------


def _pages(backend: Backend, org: str, where: TraceFilter, limit: int) -> list[list[str]]:
    logs = Logs(backend.storage.traces, Fixed(NOW))
    who = Principal(org_id=org, method="api_key")
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = backend.run(lambda c=cursor: logs.list_traces(who, where, cursor=c, limit=limit))
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


def test_a_listed_trace_reads_back(backend: Backend, month: Month) -> None:
    t = next(t for t in month.traces if t.org_id == month.org and t.tool_errors)
    found = backend.run(backend.storage.traces.get_trace, month.org, t.id)
    assert found is not None
    summary, spans, evaluations = found
    assert summary == t
    assert [s.name for s in spans] == ["invoke_agent agent"]
    assert [e.name for e in evaluations] == ["tool_error"]
    assert backend.run(backend.storage.traces.get_trace, month.other, t.id) is None


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
    logs = Logs(backend.storage.traces, Fixed(cut))
    if backend.name == "postgres":
        # not yet summed by analytics' fold: kept, whatever their time
        assert backend.run(logs.prune) == 0
    backend.run(backend.storage.analytics.roll_up)  # as the sweep does, before pruning
    who = Principal(org_id=m.org, method="api_key")
    counted = Analytics(backend.storage.analytics, Fixed(cut), None)

    def replies() -> int:
        window = {"since": start, "until": start + timedelta(days=7)}
        got = backend.run(lambda: counted.report(who, "custom", **window))
        return got.totals.replies

    assert replies() == 6
    assert backend.run(logs.prune) == 2
    assert replies() == 6  # analytics' counts outlive the pruned traces
    left = backend.run(lambda: logs.list_traces(who, TraceFilter(), cursor=None, limit=100))
    assert [t.id for t in left.traces] == [t.id for t in reversed(m.traces[2:])]
    for gone in m.traces[:2]:
        assert backend.run(backend.storage.traces.get_trace, m.org, gone.id) is None
    for kept in m.traces[2:]:
        found = backend.run(backend.storage.traces.get_trace, m.org, kept.id)
        assert found is not None
        assert found[0] == kept
        assert len(found[1]) == 1
    assert backend.run(logs.prune) == 0
    # the month (kept until 2026) is untouched by a later sweep of 2025
    assert (
        backend.run(Logs(backend.storage.traces, Fixed(datetime(2025, 12, 31, tzinfo=UTC))).prune)
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
    logs = Logs(backend.storage.traces, Fixed(NOW))
    who = Principal(org_id=m.org, method="api_key")
    listed = backend.run(lambda: logs.list_traces(who, TraceFilter(), cursor=None, limit=10))
    assert [t.id for t in listed.traces] == [trace_id, trace_id]  # a row per turn
