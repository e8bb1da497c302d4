"""Runners: the memory and PostgreSQL adapters agree on the RunnerStore contract
(agentsvc_core/ports/runners.py): every field round-trips, lists are newest first,
another organization's ids are not found, what names a missing runner or agent is
not found, an idempotency key or a cron tick makes one run, runs are saved by
compare-and-set, and a runner or an agent takes what it owns when it goes.
The scheduler's and the sweep's calls: test_runners_scheduler_contract.py.

The rows made here stay out of the way of those calls, which see every
organization: triggers are not due before 2050, runs neither queued nor running
unless their test deletes them (the scheduler's tests work in 2001).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_core.entities.runner import (
    Budget,
    Runner,
    RunnerRun,
    Step,
    StepRun,
    Suggestion,
    Trigger,
)
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in

# text columns refuse NUL (the core's rules refuse it before storage); JSON
# documents keep it (escaped), so their strings may hold one
text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=40)
json_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
maybe_text = st.none() | text
int64 = st.integers(-(2**63), 2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
when = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
# after any tick the scheduler tests use (they work in 2001)
later = st.datetimes(
    min_value=datetime(2050, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | floats | json_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(json_text, json_values, max_size=4)
ids = st.uuids()
maybe_ids = st.none() | ids

steps = st.builds(
    Step,
    id=text,
    kind=st.sampled_from(["agent", "webhook", "condition"]),
    name=text,
    input_mapping=st.dictionaries(json_text, json_text, max_size=3),
    agent_id=maybe_ids,
    prompt=maybe_text,
    model=maybe_text,
    url=maybe_text,
    method=st.sampled_from(["POST", "GET", "PATCH"]),
    headers=maybe_text,
    timeout_ms=int64,
    expression=maybe_text,
    if_true=text,
    if_false=text,
)
budgets = st.builds(
    Budget,
    max_cost_usd_per_run=st.none() | floats,
    max_tokens_per_run=st.none() | int64,
    daily_cost_usd=st.none() | floats,
    daily_tokens=st.none() | int64,
    soft_limit_pct=st.integers(0, 100),
    on_exceed=st.sampled_from(["pause", "fail"]),
)
step_runs = st.builds(
    StepRun,
    step_id=text,
    status=st.sampled_from(["pending", "running", "succeeded", "failed", "skipped"]),
    attempt=st.integers(0, 10),
    started_at=st.none() | when,
    ended_at=st.none() | when,
    output=json_values,
    error=maybe_text,
    tokens=int64,
    cost_usd=floats,
    model=maybe_text,
    thread_id=maybe_ids,
)


# --- entities -----------------------------------------------------------------


def runner_in(org: str, **over: Any) -> Runner:
    t = now()
    base = Runner(
        id=uuid.uuid4(),
        org_id=org,
        name="nightly report",
        description="",
        input_schema={"type": "object"},
        steps=(Step(id="s1", kind="agent", agent_id=uuid.uuid4(), prompt="hi"),),
        skills=(),
        budget=Budget(),
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def trigger_in(
    org: str, *, runner_id: uuid.UUID | None = None, agent_id: uuid.UUID | None = None, **over: Any
) -> Trigger:
    t = now()
    base = Trigger(
        id=uuid.uuid4(),
        org_id=org,
        runner_id=runner_id,
        agent_id=agent_id,
        kind="manual",
        name="t",
        enabled=True,
        input={},
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def cron_in(org: str, *, tick: datetime, **owner: Any) -> Trigger:
    return trigger_in(org, kind="cron", cron="* * * * *", next_fire_at=tick, **owner)


def run_in(
    org: str, *, runner_id: uuid.UUID | None = None, agent_id: uuid.UUID | None = None, **over: Any
) -> RunnerRun:
    t = now()
    base = RunnerRun(
        id=uuid.uuid4(),
        org_id=org,
        runner_id=runner_id,
        agent_id=agent_id,
        trigger_id=None,
        trigger_kind="manual",
        status="queued",
        input={},
        pipeline=(),
        steps=(),
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def suggestion_in(org: str, **over: Any) -> Suggestion:
    t = now()
    base = Suggestion(
        id=uuid.uuid4(),
        org_id=org,
        runner_id=None,
        agent_id=None,
        title="Shorter prompt",
        detail="",
        dismissed=False,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def with_runner(backend: Backend, org: str | None = None) -> tuple[str, Runner]:
    org = org or backend.fresh_org()
    runner = runner_in(org)
    backend.run(backend.storage.runners.add, runner)
    return org, runner


def with_agent(backend: Backend, org: str) -> uuid.UUID:
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return agent.id


# --- round trips --------------------------------------------------------------


# Entities of every field, of a placeholder organization and id (each example
# takes fresh ones); triggers not due before 2050, runs neither queued nor running.
PLACE = "placeholder"
kinds = st.sampled_from(["manual", "api", "cron", "webhook", "button"])
runners = st.builds(
    Runner,
    id=ids,
    org_id=st.just(PLACE),
    name=text,
    description=text,
    input_schema=json_objects,
    steps=st.lists(steps, max_size=3).map(tuple),
    skills=st.lists(ids, max_size=3).map(lambda got: tuple(SkillBinding(skill_id=i) for i in got)),
    budget=budgets,
    created_at=when,
    updated_at=when,
)
triggers = st.builds(
    Trigger,
    id=ids,
    org_id=st.just(PLACE),
    runner_id=st.none(),
    agent_id=st.none(),
    kind=kinds,
    name=text,
    enabled=st.booleans(),
    input=json_objects,
    cron=maybe_text,
    timezone=text,
    overlap=st.sampled_from(["skip", "queue"]),
    catchup=st.sampled_from(["none", "once"]),
    end_at=st.none() | when,
    next_fire_at=st.none() | later,
    last_fired_at=st.none() | when,
    token_hash=st.none() | st.binary(min_size=32, max_size=32),
    token_hint=maybe_text,
    prompt=maybe_text,
    thread_id=maybe_ids,
    created_at=when,
    updated_at=when,
)
runs = st.builds(
    RunnerRun,
    id=ids,
    org_id=st.just(PLACE),
    runner_id=st.none(),
    agent_id=st.none(),
    trigger_id=maybe_ids,
    trigger_kind=kinds,
    status=st.sampled_from(["paused", "succeeded", "failed", "cancelled"]),
    paused_reason=st.none() | st.just("budget"),
    input=json_objects,
    output=json_values,
    error=maybe_text,
    tokens=int64,
    cost_usd=floats,
    pipeline=st.lists(steps, max_size=3).map(tuple),
    steps=st.lists(step_runs, max_size=3).map(tuple),
    cursor=st.integers(0, 1000),
    thread_id=maybe_ids,
    budget_extra_usd=floats,
    budget_extra_tokens=int64,
    budget_warning=maybe_text,
    scheduled_for=st.none() | when,
    idempotency_key=maybe_text,
    trace_id=maybe_text,
    version=st.integers(0, 2**62),
    created_at=when,
    started_at=st.none() | when,
    ended_at=st.none() | when,
    updated_at=when,
)
suggestions = st.builds(
    Suggestion,
    id=ids,
    org_id=st.just(PLACE),
    runner_id=st.none(),
    agent_id=st.none(),
    title=text,
    detail=text,
    dismissed=st.booleans(),
    created_at=when,
    updated_at=when,
)
round_trips = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def _owner(backend: Backend, org: str, runner: Runner, which: str) -> dict[str, Any]:
    """The owner fields of a trigger, run or suggestion: the runner's, a new
    agent's, or (``none``) neither."""
    if which == "agent":
        return {"agent_id": with_agent(backend, org)}
    return {"runner_id": runner.id} if which == "runner" else {}


@round_trips
@given(runner=runners, other=runners)
def test_a_runner_round_trips_every_field(backend: Backend, runner: Runner, other: Runner) -> None:
    org = backend.fresh_org()
    runner = msgspec.structs.replace(runner, id=uuid.uuid4(), org_id=org)
    store = backend.storage.runners
    backend.run(store.add, runner)
    got = backend.run(store.get, org, runner.id)
    assert got == runner
    # documents come back as they were written, keys in their order
    assert list(got.input_schema) == list(runner.input_schema)
    assert [list(s.input_mapping) for s in got.steps] == [
        list(s.input_mapping) for s in runner.steps
    ]
    changed = msgspec.structs.replace(other, id=runner.id, org_id=org)
    backend.run(store.replace, changed)
    assert backend.run(store.get, org, runner.id) == changed


@round_trips
@given(trigger=triggers, other=triggers, owner=st.sampled_from(["runner", "agent"]))
def test_a_trigger_round_trips_every_field(
    backend: Backend, trigger: Trigger, other: Trigger, owner: str
) -> None:
    org, runner = with_runner(backend)
    mine = _owner(backend, org, runner, owner)
    store = backend.storage.runners
    trigger = msgspec.structs.replace(trigger, id=uuid.uuid4(), org_id=org, **mine)
    if trigger.token_hash is not None:  # a digest: unique, as real tokens' are
        trigger = msgspec.structs.replace(trigger, token_hash=os.urandom(32))
    backend.run(store.add_trigger, trigger)
    assert backend.run(store.get_trigger, org, trigger.id) == trigger
    assert backend.run(lambda: store.triggers(org, **mine)) == [trigger]
    if trigger.token_hash is not None:
        assert backend.run(store.by_token, trigger.token_hash) == trigger
    changed = msgspec.structs.replace(
        other, id=trigger.id, org_id=org, token_hash=trigger.token_hash, **mine
    )
    backend.run(store.replace_trigger, changed)
    assert backend.run(store.get_trigger, org, trigger.id) == changed


@round_trips
@given(run=runs, other=runs, owner=st.sampled_from(["runner", "agent"]))
def test_a_run_round_trips_every_field(
    backend: Backend, run: RunnerRun, other: RunnerRun, owner: str
) -> None:
    org, runner = with_runner(backend)
    mine = _owner(backend, org, runner, owner)
    store = backend.storage.runners
    run = msgspec.structs.replace(run, id=uuid.uuid4(), org_id=org, **mine)
    assert backend.run(store.add_run, run) == (run, True)
    got = backend.run(store.get_run, org, run.id)
    assert got == run
    assert list(got.input) == list(run.input)
    assert backend.run(lambda: store.runs(org, **mine)) == [run]
    # a save stores every field, over the version it was read at
    changed = msgspec.structs.replace(other, id=run.id, org_id=org, version=run.version, **mine)
    saved = backend.run(store.save_run, changed)
    assert saved == msgspec.structs.replace(changed, version=run.version + 1)
    assert backend.run(store.get_run, org, run.id) == saved


@round_trips
@given(suggestion=suggestions, owner=st.sampled_from(["runner", "agent", "none"]))
def test_a_suggestion_round_trips_every_field(
    backend: Backend, suggestion: Suggestion, owner: str
) -> None:
    org, runner = with_runner(backend)
    mine = _owner(backend, org, runner, owner)
    store = backend.storage.runners
    suggestion = msgspec.structs.replace(suggestion, id=uuid.uuid4(), org_id=org, **mine)
    backend.run(store.add_suggestions, [suggestion])
    assert backend.run(lambda: store.suggestions(org, **mine)) == [suggestion]


def test_the_unicode_of_every_text_and_document_is_kept(backend: Backend) -> None:
    org, _ = with_runner(backend)
    store = backend.storage.runners
    words = "Zürich — 東京 — 🚀 — \u202ertl"
    nested = {"ä": [{"ß": None, "k": [1, 2.5, True, "🚀\x00nul"]}], "": {"": {}}}
    runner = runner_in(
        org,
        name=words,
        description=words * 100,
        input_schema={"type": "object", "properties": {"名前": {"type": "string"}}},
        steps=(
            Step(
                id="ask",
                kind="agent",
                name=words,
                agent_id=uuid.uuid4(),
                prompt="Sum up {{ input.text }} " + words,
                model="claude-sonnet-4-5",
                input_mapping={"text": "$.input.text", "名": "input.name"},
            ),
            Step(
                id="post",
                kind="webhook",
                url="https://hooks.example/ünï",
                method="PUT",
                headers="v1:sealed:abc==",
                timeout_ms=2_500,
            ),
            Step(
                id="check",
                kind="condition",
                expression="steps.ask.status == 'succeeded'",
                if_true="post",
                if_false="stop",
            ),
        ),
        skills=(SkillBinding(skill_id=uuid.uuid4(), pinned_version=3, enabled=False),),
        budget=Budget(
            max_cost_usd_per_run=0.1 + 0.2,
            max_tokens_per_run=10_000,
            daily_cost_usd=5.0,
            daily_tokens=1_000_000,
            soft_limit_pct=90,
            on_exceed="fail",
        ),
    )
    backend.run(store.add, runner)
    assert backend.run(store.get, org, runner.id) == runner
    run = run_in(
        org,
        runner_id=runner.id,
        input=nested,
        output=[nested, words],
        pipeline=runner.steps,
        steps=(StepRun(step_id="ask", status="succeeded", output=nested, cost_usd=0.1 + 0.2),),
        error=words,
    )
    backend.run(store.add_run, run)
    assert backend.run(store.get_run, org, run.id) == run


# --- runners and their lists --------------------------------------------------


def test_runners_list_newest_first_and_stay_in_their_organization(backend: Backend) -> None:
    org, other = backend.fresh_org(), backend.fresh_org()
    store = backend.storage.runners
    t = now()
    old = runner_in(org, created_at=t - timedelta(hours=1))
    new = runner_in(org, created_at=t)
    same_a, same_b = sorted([runner_in(org, created_at=t), runner_in(org, created_at=t)], key=id_of)
    theirs = runner_in(other)
    for r in (old, same_b, new, same_a, theirs):
        backend.run(store.add, r)
    listed = backend.run(store.list_all, org)
    assert listed[-1] == old
    assert listed[:3] == sorted([new, same_a, same_b], key=id_of, reverse=True)
    assert backend.run(store.list_all, other) == [theirs]
    for call in (
        lambda: store.get(other, old.id),
        lambda: store.replace(msgspec.structs.replace(old, org_id=other)),
        lambda: store.delete(other, old.id),
        lambda: store.get(org, uuid.uuid4()),
    ):
        with pytest.raises(NotFound):
            backend.run(call)
    assert backend.run(store.get, org, old.id) == old


def id_of(x: Any) -> uuid.UUID:
    i: uuid.UUID = x.id
    return i


def test_triggers_are_the_owners_oldest_first(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, other_runner = with_runner(backend, org)
    agent = with_agent(backend, org)
    store = backend.storage.runners
    t = now()
    second = trigger_in(org, runner_id=runner.id, created_at=t)
    first = trigger_in(org, runner_id=runner.id, created_at=t - timedelta(minutes=1))
    elsewhere = trigger_in(org, runner_id=other_runner.id)
    task = cron_in(org, tick=t + timedelta(days=365 * 100), agent_id=agent)
    for x in (second, first, elsewhere, task):
        backend.run(store.add_trigger, x)
    assert backend.run(lambda: store.triggers(org, runner_id=runner.id)) == [first, second]
    assert backend.run(lambda: store.triggers(org, agent_id=agent)) == [task]
    foreign = backend.fresh_org()
    assert backend.run(lambda: store.triggers(foreign, runner_id=runner.id)) == []
    for call in (
        lambda: store.get_trigger(foreign, first.id),
        lambda: store.replace_trigger(msgspec.structs.replace(first, org_id=foreign)),
        lambda: store.delete_trigger(foreign, first.id),
    ):
        with pytest.raises(NotFound):
            backend.run(call)
    backend.run(store.delete_trigger, org, first.id)
    with pytest.raises(NotFound):
        backend.run(store.get_trigger, org, first.id)
    with pytest.raises(NotFound):
        backend.run(store.delete_trigger, org, first.id)
    assert backend.run(store.by_token, b"\x01" * 32) is None


def test_what_names_a_missing_runner_or_agent_is_not_found(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    gone = uuid.uuid4()
    for call in (
        lambda: store.add_trigger(trigger_in(org, runner_id=gone)),
        lambda: store.add_trigger(cron_in(org, tick=now(), agent_id=gone)),
        lambda: store.add_run(run_in(org, runner_id=gone)),
        lambda: store.add_run(run_in(org, agent_id=gone)),
        lambda: store.add_suggestions([suggestion_in(org, runner_id=gone)]),
    ):
        with pytest.raises(NotFound):
            backend.run(call)
    # suggestions are added all or none
    kept = suggestion_in(org, runner_id=runner.id)
    with pytest.raises(NotFound):
        backend.run(store.add_suggestions, [kept, suggestion_in(org, runner_id=gone)])
    assert backend.run(lambda: store.suggestions(org, runner_id=runner.id)) == []
    # a runner of another organization is missing too
    _, theirs = with_runner(backend)
    with pytest.raises(NotFound):
        backend.run(store.add_run, run_in(org, runner_id=theirs.id))
    assert backend.run(lambda: store.runs(org, runner_id=runner.id)) == []


# --- runs ---------------------------------------------------------------------


def test_runs_are_listed_newest_first_with_their_filters(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, other_runner = with_runner(backend, org)
    agent = with_agent(backend, org)
    store = backend.storage.runners
    t = now().replace(microsecond=0)
    runs = [
        run_in(org, runner_id=runner.id, created_at=t - timedelta(minutes=i), status=s)
        for i, s in enumerate(["queued", "succeeded", "failed", "succeeded"])
    ]
    # two of one moment: the id orders them
    tied = sorted(
        [run_in(org, runner_id=runner.id, created_at=t - timedelta(minutes=1)) for _ in range(2)],
        key=id_of,
    )
    # an agent's scheduled task; a runner's run naming an agent is the runner's
    task = run_in(org, agent_id=agent, trigger_kind="cron")
    named = run_in(org, runner_id=other_runner.id, agent_id=agent)
    for r in (*runs, *tied, task, named):
        backend.run(store.add_run, r)

    def listed(**kw: Any) -> list[RunnerRun]:
        return backend.run(lambda: store.runs(org, **kw))

    mine = listed(runner_id=runner.id)
    assert mine == sorted([*runs, *tied], key=lambda r: (r.created_at, r.id), reverse=True)
    assert listed(runner_id=runner.id, status="succeeded") == [runs[1], runs[3]]
    assert listed(runner_id=runner.id, since=t - timedelta(minutes=1)) == mine[:4]
    assert listed(runner_id=runner.id, limit=2) == mine[:2]
    # the keyset: strictly older than (created_at, id)
    after = mine.index(tied[1]) + 1
    assert listed(runner_id=runner.id, before=(tied[1].created_at, tied[1].id)) == mine[after:]
    assert listed(runner_id=runner.id, before=(t, uuid.UUID(int=0))) == mine[1:]
    assert listed(agent_id=agent) == [task]
    assert listed(runner_id=other_runner.id) == [named]
    assert len(listed()) == 8
    foreign = backend.fresh_org()
    assert backend.run(lambda: store.runs(foreign, runner_id=runner.id)) == []
    with pytest.raises(NotFound):
        backend.run(store.get_run, backend.fresh_org(), task.id)


def test_an_idempotency_key_makes_one_run_per_runner(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, other_runner = with_runner(backend, org)
    agent, other_agent = with_agent(backend, org), with_agent(backend, org)
    store = backend.storage.runners
    first = run_in(org, runner_id=runner.id, idempotency_key="k1")
    assert backend.run(store.add_run, first) == (first, True)
    # whatever status the first has come to
    ended = backend.run(store.save_run, msgspec.structs.replace(first, status="failed"))
    assert ended is not None
    again = run_in(org, runner_id=runner.id, idempotency_key="k1", input={"x": 1})
    assert backend.run(store.add_run, again) == (ended, False)
    with pytest.raises(NotFound):
        backend.run(store.get_run, org, again.id)
    # another key, no key, another runner, an agent's tasks (each agent's keys its
    # own), another organization: new runs
    for run in (
        run_in(org, runner_id=runner.id, idempotency_key="k2"),
        run_in(org, runner_id=runner.id),
        run_in(org, runner_id=runner.id),
        run_in(org, runner_id=other_runner.id, idempotency_key="k1"),
        run_in(org, agent_id=agent, idempotency_key="k1"),
        run_in(org, agent_id=other_agent, idempotency_key="k1"),
    ):
        assert backend.run(store.add_run, run) == (run, True)
    task_again = run_in(org, agent_id=agent, idempotency_key="k1")
    taken, stored = backend.run(store.add_run, task_again)
    assert (taken.agent_id, taken.idempotency_key, stored) == (agent, "k1", False)
    other_org, theirs = with_runner(backend)
    foreign = run_in(other_org, runner_id=theirs.id, idempotency_key="k1")
    assert backend.run(store.add_run, foreign) == (foreign, True)
    # the same id twice is not a new run
    with pytest.raises(Conflict):
        backend.run(store.add_run, msgspec.structs.replace(first, idempotency_key=None))


def test_a_tick_makes_one_run(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    trigger = cron_in(org, tick=now() + timedelta(days=365 * 100), runner_id=runner.id)
    backend.run(store.add_trigger, trigger)
    tick = now().replace(second=0, microsecond=0)
    first = run_in(
        org, runner_id=runner.id, trigger_id=trigger.id, trigger_kind="cron", scheduled_for=tick
    )
    assert backend.run(store.add_run, first) == (first, True)
    same = msgspec.structs.replace(first, id=uuid.uuid4())
    assert backend.run(store.add_run, same) == (first, False)
    following = msgspec.structs.replace(first, id=uuid.uuid4(), scheduled_for=tick + timedelta(1))
    assert backend.run(store.add_run, following) == (following, True)


def test_save_run_is_a_compare_and_set(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    run = run_in(org, runner_id=runner.id)
    backend.run(store.add_run, run)
    engine = msgspec.structs.replace(run, status="running", cursor=1, updated_at=now())
    saved = backend.run(store.save_run, engine)
    assert saved is not None
    assert saved.version == 1
    # a cancel read at version 0 comes second: nothing is stored
    cancel = msgspec.structs.replace(run, status="cancelled")
    assert backend.run(store.save_run, cancel) is None
    assert backend.run(store.get_run, org, run.id) == saved
    # read again, it goes through
    fresh = backend.run(store.get_run, org, run.id)
    done = backend.run(store.save_run, msgspec.structs.replace(fresh, status="cancelled"))
    assert done is not None
    assert (done.status, done.version, done.cursor) == ("cancelled", 2, 1)
    for missing in (
        run_in(org, runner_id=runner.id),
        msgspec.structs.replace(done, org_id=backend.fresh_org()),
    ):
        with pytest.raises(NotFound):
            backend.run(store.save_run, missing)


def test_save_run_lets_one_of_two_writers_through(backend: Backend) -> None:
    org, runner = with_runner(backend)
    store = backend.storage.runners
    run = run_in(org, runner_id=runner.id)
    backend.run(store.add_run, run)

    async def race() -> list[RunnerRun | None]:
        writes = [msgspec.structs.replace(run, error=f"writer {i}") for i in range(6)]
        return await asyncio.gather(*(store.save_run(w) for w in writes))

    results = backend.run(race)
    won = [r for r in results if r is not None]
    assert len(won) == 1
    assert backend.run(store.get_run, org, run.id) == won[0]


def test_spent_since_sums_the_runners_runs(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, other_runner = with_runner(backend, org)
    store = backend.storage.runners
    t = now()
    day = t - timedelta(hours=24)
    for created, tokens, cost, owner in (
        (day, 100, 0.25, runner.id),  # at the start: counted
        (t, 50, 1.125, runner.id),
        (day - timedelta(seconds=1), 7, 3.0, runner.id),  # before
        (t, 1000, 9.5, other_runner.id),
    ):
        backend.run(
            store.add_run,
            run_in(org, runner_id=owner, created_at=created, tokens=tokens, cost_usd=cost),
        )
    assert backend.run(store.spent_since, org, runner.id, day) == (150, 1.375)
    assert backend.run(store.spent_since, org, runner.id, t + timedelta(seconds=1)) == (0, 0.0)
    assert backend.run(store.spent_since, backend.fresh_org(), runner.id, day) == (0, 0.0)


# --- suggestions --------------------------------------------------------------


def test_suggestions_are_matched_by_owner_exactly(backend: Backend) -> None:
    org, runner = with_runner(backend)
    agent = with_agent(backend, org)
    store = backend.storage.runners
    t = now()
    of_runner = [
        suggestion_in(org, runner_id=runner.id, created_at=t - timedelta(minutes=i))
        for i in range(3)
    ]
    of_agent = suggestion_in(org, agent_id=agent)
    of_org = suggestion_in(org)
    backend.run(store.add_suggestions, [*of_runner, of_agent, of_org])
    backend.run(store.add_suggestions, [])

    def found(**kw: Any) -> list[Suggestion]:
        return backend.run(lambda: store.suggestions(org, **kw))

    assert found(runner_id=runner.id) == of_runner
    assert found(agent_id=agent) == [of_agent]
    assert found() == [of_org]  # None is "none", not "any"
    assert found(runner_id=runner.id, agent_id=agent) == []
    assert found(runner_id=runner.id, limit=2) == of_runner[:2]
    last = of_runner[1]
    assert found(runner_id=runner.id, before=(last.created_at, last.id)) == of_runner[2:]
    later_ = t + timedelta(seconds=5)
    foreign = backend.fresh_org()
    dismissed = backend.run(store.set_dismissed, org, of_runner[0].id, True, later_)
    assert dismissed == msgspec.structs.replace(of_runner[0], dismissed=True, updated_at=later_)
    assert found(runner_id=runner.id, dismissed=True) == [dismissed]
    assert found(runner_id=runner.id, dismissed=False) == of_runner[1:]
    back = backend.run(store.set_dismissed, org, of_runner[0].id, False, later_)
    assert back.dismissed is False
    for call in (
        lambda: store.set_dismissed(foreign, of_agent.id, True, later_),
        lambda: store.set_dismissed(org, uuid.uuid4(), True, later_),
    ):
        with pytest.raises(NotFound):
            backend.run(call)
    assert backend.run(lambda: store.suggestions(foreign)) == []


# --- what goes with a runner or an agent --------------------------------------


def test_a_deleted_runner_takes_its_triggers_runs_and_suggestions(backend: Backend) -> None:
    org, runner = with_runner(backend)
    _, kept = with_runner(backend, org)
    store = backend.storage.runners
    trigger = trigger_in(org, runner_id=runner.id, kind="webhook", token_hash=b"\x07" * 32)
    run = run_in(org, runner_id=runner.id, trigger_id=trigger.id)
    suggestion = suggestion_in(org, runner_id=runner.id)
    kept_run = run_in(org, runner_id=kept.id)
    backend.run(store.add_trigger, trigger)
    backend.run(store.add_run, run)
    backend.run(store.add_run, kept_run)
    backend.run(store.add_suggestions, [suggestion])
    # a deleted trigger leaves its runs
    lone = trigger_in(org, runner_id=runner.id)
    backend.run(store.add_trigger, lone)
    lone_run = run_in(org, runner_id=runner.id, trigger_id=lone.id)
    backend.run(store.add_run, lone_run)
    backend.run(store.delete_trigger, org, lone.id)
    assert backend.run(store.get_run, org, lone_run.id) == lone_run

    backend.run(store.delete, org, runner.id)
    with pytest.raises(NotFound):
        backend.run(store.get, org, runner.id)
    with pytest.raises(NotFound):
        backend.run(store.get_trigger, org, trigger.id)
    for r in (run, lone_run):
        with pytest.raises(NotFound):
            backend.run(store.get_run, org, r.id)
    assert backend.run(store.by_token, b"\x07" * 32) is None
    assert backend.run(lambda: store.suggestions(org, runner_id=runner.id)) == []
    assert backend.run(store.get_run, org, kept_run.id) == kept_run
    with pytest.raises(NotFound):
        backend.run(store.delete, org, runner.id)


def test_a_deleted_agent_takes_its_scheduled_tasks_and_their_runs(backend: Backend) -> None:
    org, runner = with_runner(backend)
    agent = with_agent(backend, org)
    kept_agent = with_agent(backend, org)
    store = backend.storage.runners
    task = cron_in(org, tick=now() + timedelta(days=365 * 100), agent_id=agent, prompt="report")
    kept_task = cron_in(org, tick=now() + timedelta(days=365 * 100), agent_id=kept_agent)
    run = run_in(org, agent_id=agent, trigger_id=task.id, trigger_kind="cron")
    kept_run = run_in(org, agent_id=kept_agent, trigger_id=kept_task.id, trigger_kind="cron")
    suggestion = suggestion_in(org, agent_id=agent)
    for t in (task, kept_task):
        backend.run(store.add_trigger, t)
    for r in (run, kept_run):
        backend.run(store.add_run, r)
    backend.run(store.add_suggestions, [suggestion])

    backend.run(backend.storage.agents.delete, org, agent)
    with pytest.raises(NotFound):
        backend.run(store.get_trigger, org, task.id)
    with pytest.raises(NotFound):
        backend.run(store.get_run, org, run.id)
    assert backend.run(lambda: store.triggers(org, agent_id=agent)) == []
    assert backend.run(lambda: store.runs(org, agent_id=agent)) == []
    assert backend.run(lambda: store.suggestions(org, agent_id=agent)) == []
    assert backend.run(store.get_trigger, org, kept_task.id) == kept_task
    assert backend.run(store.get_run, org, kept_run.id) == kept_run
    assert backend.run(store.get, org, runner.id) == runner
