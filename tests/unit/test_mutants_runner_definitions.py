"""Tests written from the mutants that survived in runners' definitions
(use_cases/runners/definitions.py, steps.py, triggers.py): the words of each
refusal, the bounds at their edge, what the key rotation re-seals and how often
it tries, and what a token opens."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_core.entities import Organization, Principal
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.use_cases.runners.definitions import (
    BudgetChanges,
    RunnerChanges,
    RunnerDraft,
    Runners,
)
from agentsvc_core.use_cases.runners.steps import StepDraft, step_headers_context
from agentsvc_core.use_cases.runners.triggers import (
    MAX_INPUT_BYTES,
    TriggerChanges,
    TriggerDraft,
    check_cron,
    check_input,
    next_tick,
    token_hash,
)
from tests.unit.runner_world import AnyUrl, RunnerWorld, runner_world
from tests.unit.skill_helpers import bound
from tests.unit.turn_world import BOX, ORG, WHO

MEMBER = Principal(org_id=ORG, method="jwt", user_id="u", role="member")
URL = "https://hooks.example.com/x"
T = datetime(2026, 11, 1, 12, tzinfo=UTC)


def hook(sid: str = "w", **over: Any) -> StepDraft:
    fields: dict[str, Any] = {"url": URL, **over}
    return StepDraft(id=sid, kind="webhook", **fields)


def cond(sid: str = "c", **over: Any) -> StepDraft:
    fields: dict[str, Any] = {"expression": "`true`", **over}
    return StepDraft(id=sid, kind="condition", **fields)


async def refusal(rw: RunnerWorld, *steps: StepDraft) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.create(WHO, RunnerDraft(name="r", steps=list(steps)))
    return caught.value.field, caught.value.problem


# --- the words of each refusal --------------------------------------------------------


async def test_a_members_change_is_refused_saying_whose_it_is() -> None:
    rw = await runner_world()
    with pytest.raises(PermissionDenied) as caught:
        await rw.runners.create(MEMBER, RunnerDraft(name="r"))
    assert caught.value.detail == "runners are managed by the organization's admins"


async def test_a_steps_refusals_say_what_is_wrong() -> None:
    rw = await runner_world()
    assert await refusal(rw, cond(expression=None)) == (
        "steps[c].expression",
        "a condition step has an expression",
    )
    assert await refusal(rw, cond("A")) == (
        "steps",
        "a step id is 1-63 lowercase letters, digits, '_' or '-'",
    )
    many = cond(input_mapping={f"k{i}": "input" for i in range(101)})
    assert await refusal(rw, many) == ("steps[c].input_mapping", "at most 100 fields")
    assert await refusal(rw, StepDraft(id="a", kind="agent")) == (
        "steps[a].agent_id",
        "an agent step names its agent",
    )
    assert await refusal(rw, hook(url=None)) == ("steps[w].url", "a webhook step has a url")
    assert await refusal(rw, hook(method="GET")) == ("steps[w].method", "one of POST, PUT, PATCH")


async def test_text_bounds_of_a_step_are_at_their_edge() -> None:
    rw = await runner_world()
    long_name = cond(input_mapping={"k" * 201: "input"})
    assert await refusal(rw, long_name) == (
        "steps[c].input_mapping",
        "must be at most 200 characters",
    )
    await rw.runners.create(
        WHO, RunnerDraft(name="r", steps=[cond(input_mapping={"k" * 200: "input"})])
    )
    url = "https://h.example/" + "x" * (4096 - len("https://h.example/"))
    assert len(url) == 4096
    await rw.runners.create(WHO, RunnerDraft(name="r", steps=[hook(url=url)]))
    assert await refusal(rw, hook(url=url + "x")) == (
        "steps[w].url",
        "must be at most 4096 characters",
    )


@pytest.mark.parametrize(
    ("method", "timeout_ms"), [("PATCH", 100), ("PUT", 120_000), ("POST", 5000)]
)
async def test_a_webhook_steps_methods_and_time_limits_at_their_edges_are_taken(
    method: str, timeout_ms: int
) -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO, RunnerDraft(name="r", steps=[hook(method=method, timeout_ms=timeout_ms)])
    )
    assert (made.steps[0].method, made.steps[0].timeout_ms) == (method, timeout_ms)


async def test_a_condition_may_go_to_the_very_next_step_by_its_id() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO, RunnerDraft(name="r", steps=[cond(if_true="x", if_false="x"), cond("x")])
    )
    assert (made.steps[0].if_true, made.steps[0].if_false) == ("x", "x")


async def test_only_a_condition_keeps_its_branches() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO,
        RunnerDraft(
            name="r",
            steps=[
                hook(if_true="stop", if_false="next"),
                cond(if_true="stop", if_false="next"),
            ],
        ),
    )
    assert (made.steps[0].if_true, made.steps[0].if_false) == ("next", "stop")
    assert (made.steps[1].if_true, made.steps[1].if_false) == ("stop", "next")


async def test_a_budgets_refusals_say_their_bounds() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    for changes, problem in (
        (BudgetChanges(daily_cost_usd=-1.0), "between 0 and 1000000 (USD)"),
        (BudgetChanges(daily_tokens=-1), "between 0 and 10^12"),
        (BudgetChanges(soft_limit_pct=0), "between 1 and 100"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await rw.runners.set_budget(WHO, made.id, changes)
        assert caught.value.problem == problem
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.set_skills(WHO, made.id, bound(*(uuid.uuid4() for _ in range(101))))
    assert caught.value.problem == "at most 100"


async def test_a_triggers_refusals_say_what_is_wrong() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[cond()]))
    for draft, field, problem in (
        (
            TriggerDraft(kind="webhook", prompt="p"),
            "prompt",
            "only an agent's scheduled task has a prompt",
        ),
        (
            TriggerDraft(kind="webhook", cron="0 9 * * *"),
            "cron",
            "only a cron trigger has a schedule",
        ),
        (TriggerDraft(kind="cron"), "cron", "a cron trigger has a cron expression"),
        (
            TriggerDraft(kind="cron", cron="0 9 * * *", end_at=datetime(2030, 1, 1)),
            "end_at",
            "must carry a time zone (ISO 8601 with an offset or Z)",
        ),
        (
            TriggerDraft(kind="cron", cron="0 9 * * *", timezone="Mars/Base"),
            "timezone",
            "'Mars/Base' is not an IANA time zone",
        ),
        (TriggerDraft(kind="cron", cron=""), "cron", "must not be empty"),
        (
            TriggerDraft(kind="cron", cron="0 " * 100 + "0"),
            "cron",
            "must be at most 200 characters",
        ),
        (
            TriggerDraft(kind="cron", cron="*/30 * * * * *"),
            "cron",
            "fires every 30 s; the least interval allowed is 60 s (AGENTSVC_CRON_MIN_INTERVAL_S)",
        ),
    ):
        with pytest.raises(InvalidInput) as caught:
            await rw.runners.add_trigger(WHO, made.id, draft)
        assert (caught.value.field, caught.value.problem) == (field, problem), draft
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="cron", cron="61 * * * *"))
    assert caught.value.problem.startswith("not a cron expression: ")
    assert caught.value.problem != "not a cron expression: "


def test_the_input_bound_is_at_its_edge() -> None:
    exactly = {"x": "y" * (MAX_INPUT_BYTES - len('{"x":""}'))}
    check_input("input", exactly)
    with pytest.raises(InvalidInput) as caught:
        check_input("input", {"x": exactly["x"] + "y"})
    assert (caught.value.field, caught.value.problem) == (
        "input",
        f"at most {MAX_INPUT_BYTES} bytes of JSON",
    )


def test_the_least_interval_is_read_in_the_schedules_own_zone() -> None:
    # 02:30 daily in Paris: on the spring change there is no 02:30, the tick is at
    # 03:00, and the next one (wall clock) 23.5 hours later
    before = datetime(2026, 3, 27, 12, tzinfo=UTC)
    check_cron("30 2 * * *", "UTC", 86_400, before)
    with pytest.raises(InvalidInput) as caught:
        check_cron("30 2 * * *", "Europe/Paris", 86_400, before)
    assert caught.value.problem.startswith("fires every 84600 s")
    tick = next_tick("0 9 * * *", "Europe/Paris", before)
    assert tick == datetime(2026, 3, 28, 8, tzinfo=UTC)
    assert tick.tzinfo is UTC


async def test_the_least_interval_is_a_minute_unless_configured() -> None:
    rw = await runner_world()
    runners = Runners(rw.turn.storage.runners, rw.turn.storage.agents, BOX, AnyUrl(), rw.turn.clock)
    made = await runners.create(WHO, RunnerDraft(name="r"))
    trigger, _ = await runners.add_trigger(
        WHO, made.id, TriggerDraft(kind="cron", cron="* * * * *")
    )
    assert trigger.next_fire_at is not None


# --- triggers --------------------------------------------------------------------------


async def test_a_runners_triggers_are_its_own() -> None:
    rw = await runner_world()
    one = await rw.runners.create(WHO, RunnerDraft(name="one"))
    two = await rw.runners.create(WHO, RunnerDraft(name="two"))
    mine, _ = await rw.runners.add_trigger(WHO, one.id, TriggerDraft(kind="manual"))
    await rw.runners.add_trigger(WHO, two.id, TriggerDraft(kind="manual"))
    assert await rw.runners.triggers(WHO, one.id) == [mine]


async def test_a_trigger_is_stamped_when_made_and_changed() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    trigger, _ = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    now = rw.turn.clock.now()
    assert (trigger.created_at, trigger.updated_at) == (now, now)
    rw.turn.clock.advance(7)
    changed = await rw.runners.update_trigger(WHO, made.id, trigger.id, TriggerChanges(name="n"))
    assert (changed.created_at, changed.updated_at) == (now, rw.turn.clock.now())
    for changes in (TriggerChanges(thread_id=uuid.uuid4()), TriggerChanges(prompt="p")):
        with pytest.raises(InvalidInput) as caught:
            await rw.runners.update_trigger(WHO, made.id, trigger.id, changes)
        assert (caught.value.field, caught.value.problem) == (
            "prompt",
            "only an agent's scheduled task has a prompt",
        )


async def test_a_buttons_token_rotates_and_its_hint_is_its_last_four_characters() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[cond()]))
    trigger, _ = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="button"))
    rotated, token = await rw.runners.rotate_token(WHO, made.id, trigger.id)
    assert (rotated.token_hash, rotated.token_hint) == (token_hash(token), token[-4:])
    assert len(rotated.token_hint or "") == 4
    stored = await rw.turn.storage.runners.get_trigger(ORG, trigger.id)
    assert stored == rotated
    manual, _ = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.rotate_token(WHO, made.id, manual.id)
    assert caught.value.problem == "only webhook and button triggers have a token"


async def test_what_a_token_does_not_open_is_not_found_saying_nothing_more() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[cond()]))
    other = await rw.runners.create(WHO, RunnerDraft(name="o", steps=[cond()]))
    trigger, token = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="button"))
    assert token is not None
    for call in (
        rw.runners.button(other.id, token),
        rw.runners.by_token("xx_unknown", ("button",)),
        rw.runners.by_token("rt_unknown", ("button",)),
        rw.runners.by_token(token, ("webhook",)),
    ):
        with pytest.raises(NotFound) as caught:
            await call
        assert caught.value.detail == "no such trigger"
    with pytest.raises(NotFound) as caught:
        await rw.runners.update_trigger(WHO, other.id, trigger.id, TriggerChanges(name="x"))
    assert caught.value.detail == "trigger not found"


@pytest.mark.parametrize(
    ("token", "opens"),
    [("rt_" + "a" * 197, True), ("rt_" + "a" * 198, False), ("xx_" + "a" * 20, False)],
)
async def test_a_token_is_looked_up_only_with_its_prefix_and_within_200_characters(
    token: str, opens: bool
) -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[cond()]))
    trigger, _ = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="webhook"))
    stored = msgspec.structs.replace(trigger, token_hash=token_hash(token))
    await rw.turn.storage.runners.replace_trigger(stored)
    if opens:
        assert await rw.runners.by_token(token, ("webhook",)) == stored
        return
    with pytest.raises(NotFound):
        await rw.runners.by_token(token, ("webhook",))


# --- headers sealed by a change, and the key rotation -----------------------------------------


async def test_headers_given_in_a_change_are_sealed_for_the_runners_step() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO,
        RunnerDraft(name="r", steps=[StepDraft(id="a", kind="agent", agent_id=rw.turn.agent.id)]),
    )
    changed = await rw.runners.update(
        WHO,
        made.id,
        RunnerChanges(
            steps=[
                StepDraft(id="a", kind="agent", agent_id=rw.turn.agent.id),
                hook(headers={"A": "1"}),
            ]
        ),
    )
    added = await rw.runners.add_step(WHO, made.id, hook("v", headers={"B": "2"}))
    for step, want in ((changed.steps[1], {"A": "1"}), (added.steps[2], {"B": "2"})):
        assert step.headers is not None
        where = step_headers_context(ORG, made.id, step.id)
        assert msgspec.json.decode(BOX.open(step.headers, where)) == want


async def _sealed_by_k1(rw: RunnerWorld, org: str, **headers: str) -> Any:
    who = Principal(org_id=org, method="api_key")
    if org != ORG:
        await rw.turn.storage.organizations.ensure(Organization(id=org, created_at=T))
    steps = [hook(f"s{i}", headers={k: v}) for i, (k, v) in enumerate(headers.items())]
    return await rw.runners.create(who, RunnerDraft(name="r", steps=steps))


NEWER = AesGcmBox([("k2", b"\x0a" * 32), ("k1", b"\x09" * 32)])


async def test_the_rotation_reseals_each_sealed_step_of_the_organization_named() -> None:
    rw = await runner_world()
    mine = await _sealed_by_k1(rw, ORG, A="1", B="2")
    theirs = await _sealed_by_k1(rw, "org-theirs", C="3")
    also = await _sealed_by_k1(rw, ORG, D="4")
    rw.runners._box = NEWER
    assert await rw.runners.rotate_secrets(ORG) == 3  # two steps of one runner, one of another
    assert all(
        NEWER.is_current(s.headers or "") for s in (await rw.runners.get(WHO, mine.id)).steps
    )
    assert NEWER.is_current((await rw.runners.get(WHO, also.id)).steps[0].headers or "")
    their = await rw.turn.storage.runners.get("org-theirs", theirs.id)
    assert not NEWER.is_current(their.steps[0].headers or "")
    assert await rw.runners.rotate_secrets() == 1


async def test_the_rotation_reads_a_runner_changed_meanwhile_again_five_times_at_most() -> None:
    rw = await runner_world()
    made = await _sealed_by_k1(rw, ORG, A="1")
    rw.runners._box = NEWER
    store = rw.turn.storage.runners
    write = store.reseal_steps
    tries: list[Any] = []

    async def busy(runner: Any, steps: Any) -> bool:
        tries.append(runner)
        return len(tries) > 2 and await write(runner, steps)  # changed meanwhile, twice

    store.reseal_steps = busy  # type: ignore[method-assign]
    assert await rw.runners.rotate_secrets(ORG) == 1
    assert [r.id for r in tries] == [made.id] * 3
    tries.clear()
    rw.runners._box = AesGcmBox([("k3", b"\x0b" * 32), ("k2", b"\x0a" * 32), ("k1", b"\x09" * 32)])

    async def never(runner: Any, steps: Any) -> bool:
        tries.append(runner)
        return False

    store.reseal_steps = never  # type: ignore[method-assign]
    assert await rw.runners.rotate_secrets(ORG) == 0
    assert len(tries) == 5


async def test_the_cap_on_triggers_says_itself() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    for _ in range(50):
        await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    assert caught.value.problem == "a runner has at most 50 triggers"
