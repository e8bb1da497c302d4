"""Runners' definitions (use_cases/runners/definitions.py, steps.py, triggers.py):
what an admin may write, each refusal naming its field, a webhook step's headers
sealed and kept only for the same address, budgets and skills within their
bounds, triggers and their tokens. Over the memory storage and the test's clock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_core.entities import Principal
from agentsvc_core.entities.runner import Budget, Step
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied
from agentsvc_core.rules import MAX_CONTENT, MAX_DESCRIPTION, MAX_NAME
from agentsvc_core.use_cases.runners.definitions import (
    BudgetChanges,
    RunnerChanges,
    RunnerDraft,
)
from agentsvc_core.use_cases.runners.steps import MAX_STEPS, StepDraft, step_headers_context
from agentsvc_core.use_cases.runners.triggers import (
    MAX_INPUT_BYTES,
    MAX_TRIGGERS,
    TriggerChanges,
    TriggerDraft,
    token_hash,
)
from tests.unit.runner_world import RunnerWorld, runner_world
from tests.unit.skill_helpers import bound, stored_skills
from tests.unit.turn_world import BOX, ORG, WHO

MEMBER = Principal(org_id=ORG, method="jwt", user_id="u-1", role="member")
URL = "https://hooks.example.com/step"


def webhook(sid: str = "w", **over: Any) -> StepDraft:
    fields: dict[str, Any] = {"url": URL, **over}
    return StepDraft(id=sid, kind="webhook", **fields)


def agent(rw: RunnerWorld, sid: str = "a", **over: Any) -> StepDraft:
    fields: dict[str, Any] = {"agent_id": rw.turn.agent.id, **over}
    return StepDraft(id=sid, kind="agent", **fields)


def condition(sid: str = "c", **over: Any) -> StepDraft:
    fields: dict[str, Any] = {"expression": "`true`", **over}
    return StepDraft(id=sid, kind="condition", **fields)


async def refused(rw: RunnerWorld, *steps: StepDraft) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.create(WHO, RunnerDraft(name="r", steps=list(steps)))
    return caught.value


# --- the runner ------------------------------------------------------------------------


async def test_a_runner_is_created_read_changed_and_deleted_by_an_admin() -> None:
    rw = await runner_world()
    first, second = await stored_skills(rw.turn.storage.skills, ORG, 2)
    draft = RunnerDraft(
        name="triage",
        description="sorts tickets",
        input_schema={"type": "object", "properties": {"t": {"type": "string"}}},
        steps=[agent(rw, prompt="about {{ input.t }}", model="local"), condition()],
        skills=bound(second, first),
    )
    made = await rw.runners.create(WHO, draft)
    now = rw.turn.clock.now()
    assert (made.org_id, made.name, made.description, made.budget) == (
        ORG,
        "triage",
        "sorts tickets",
        Budget(),
    )
    assert made.skills == tuple(bound(second, first))  # in order
    assert (made.created_at, made.updated_at) == (now, now)
    assert [s.id for s in made.steps] == ["a", "c"]
    assert await rw.runners.get(MEMBER, made.id) == made
    assert await rw.runners.list_all(MEMBER) == [made]
    rw.turn.clock.advance(5)
    changed = await rw.runners.update(
        WHO, made.id, RunnerChanges(name="renamed", description="", input_schema={"type": "object"})
    )
    assert (changed.name, changed.description, changed.input_schema) == (
        "renamed",
        "",
        {"type": "object"},
    )
    assert (changed.steps, changed.created_at, changed.updated_at) == (
        made.steps,
        now,
        now + timedelta(seconds=5),
    )
    assert await rw.runners.get(WHO, made.id) == changed
    kept = await rw.runners.update(WHO, made.id, RunnerChanges())
    assert (kept.name, kept.steps) == ("renamed", made.steps)
    await rw.runners.delete(WHO, made.id)
    with pytest.raises(NotFound):
        await rw.runners.get(WHO, made.id)


async def test_a_members_changes_are_refused() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    for change in (
        rw.runners.create(MEMBER, RunnerDraft(name="r")),
        rw.runners.update(MEMBER, made.id, RunnerChanges(name="x")),
        rw.runners.delete(MEMBER, made.id),
        rw.runners.set_steps(MEMBER, made.id, []),
        rw.runners.add_step(MEMBER, made.id, condition()),
        rw.runners.set_budget(MEMBER, made.id, BudgetChanges()),
        rw.runners.set_skills(MEMBER, made.id, []),
        rw.runners.add_trigger(MEMBER, made.id, TriggerDraft(kind="webhook")),
    ):
        with pytest.raises(PermissionDenied):
            await change
    assert await rw.runners.get(WHO, made.id) == made


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        (RunnerDraft(name=""), "name"),
        (RunnerDraft(name="n" * (MAX_NAME + 1)), "name"),
        (RunnerDraft(name="r", description="d" * (MAX_DESCRIPTION + 1)), "description"),
        (RunnerDraft(name="r", input_schema={"type": "array"}), "input_schema"),
        (RunnerDraft(name="r", skills=bound(*(uuid.uuid4() for _ in range(101)))), "skills"),
    ],
)
async def test_a_runner_draft_is_checked(draft: RunnerDraft, field: str) -> None:
    rw = await runner_world()
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.create(WHO, draft)
    assert caught.value.field == field
    assert await rw.runners.list_all(WHO) == []


async def test_changes_are_checked_as_a_new_runner_is() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    for changes, field in (
        (RunnerChanges(name=""), "name"),
        (RunnerChanges(description="d" * (MAX_DESCRIPTION + 1)), "description"),
        (RunnerChanges(input_schema={"type": "string"}), "input_schema"),
        (RunnerChanges(steps=[condition(), condition()]), "steps"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await rw.runners.update(WHO, made.id, changes)
        assert caught.value.field == field
    assert await rw.runners.get(WHO, made.id) == made


# --- steps -------------------------------------------------------------------------------


async def test_each_kind_keeps_only_its_own_fields() -> None:
    rw = await runner_world()
    everything: dict[str, Any] = {
        "agent_id": rw.turn.agent.id,
        "prompt": "p",
        "model": "local",
        "url": URL,
        "method": "PUT",
        "timeout_ms": 500,
        "expression": "`true`",
        "if_true": "stop",
        "if_false": "stop",
        "input_mapping": {"x": "input.x"},
        "name": "named",
    }
    made = await rw.runners.create(
        WHO,
        RunnerDraft(
            name="r",
            steps=[
                StepDraft(id="a", kind="agent", **everything),
                StepDraft(id="w", kind="webhook", **everything),
                StepDraft(id="c", kind="condition", **everything),
            ],
        ),
    )
    a, w, c = made.steps
    common: dict[str, Any] = {"name": "named", "input_mapping": {"x": "input.x"}, "timeout_ms": 500}
    assert a == Step(
        id="a", kind="agent", agent_id=rw.turn.agent.id, prompt="p", model="local", **common
    )
    assert w == Step(id="w", kind="webhook", url=URL, method="PUT", **common)
    assert c == Step(
        id="c", kind="condition", expression="`true`", if_true="stop", if_false="stop", **common
    )


@pytest.mark.parametrize(
    ("step", "field", "problem"),
    [
        (condition("Upper"), "steps", "a step id is 1-63"),
        (condition("-dash"), "steps", "a step id is 1-63"),
        (condition("x" * 64), "steps", "a step id is 1-63"),
        (condition("next"), "steps", "'next' is not a step id"),
        (condition("stop"), "steps", "'stop' is not a step id"),
        (condition(name="n" * (MAX_NAME + 1)), "steps[c].name", "at most"),
        (condition(input_mapping={"": "input"}), "steps[c].input_mapping", "must not be empty"),
        (condition(input_mapping={"k": "input.["}), "steps[c].input_mapping.k", "not a JMESPath"),
        (condition(input_mapping={"k": " "}), "steps[c].input_mapping.k", "must not be empty"),
        (condition(expression=None), "steps[c].expression", "has an expression"),
        (condition(expression="a ||"), "steps[c].expression", "not a JMESPath"),
        (condition(if_true="nowhere"), "steps[c].if_true", "'nowhere'"),
        (condition(if_false="c"), "steps[c].if_false", "'c'"),
        (webhook(url=None), "steps[w].url", "has a url"),
        (webhook(url=""), "steps[w].url", "must not be empty"),
        (webhook(url="https://a b"), "steps[w].url", "spaces"),
        (webhook(url="ftp://x/"), "steps[w].url", "refused: ftp"),
        (webhook(method="GET"), "steps[w].method", "one of POST, PUT, PATCH"),
        (webhook(timeout_ms=99), "steps[w].timeout_ms", "between 100 and 120000"),
        (webhook(timeout_ms=120_001), "steps[w].timeout_ms", "between 100 and 120000"),
        (webhook(headers={"Idempotency-Key": "x"}), "steps[w].headers", "set by the service"),
    ],
)
async def test_a_step_is_checked_naming_its_field(
    step: StepDraft, field: str, problem: str
) -> None:
    rw = await runner_world()
    rw.runners._checks._urls = Scheme()
    error = await refused(rw, step)
    assert error.field == field
    assert problem in error.problem


class Scheme:
    def refusal(self, url: str) -> str | None:
        return None if url.startswith("https://") else f"refused: {url.split(':', maxsplit=1)[0]}"


@pytest.mark.parametrize(
    ("over", "field", "problem"),
    [
        ({"agent_id": None}, "steps[a].agent_id", "names its agent"),
        ({"prompt": "{{ a || }}"}, "steps[a].prompt", "not a JMESPath"),
        ({"prompt": "x" * (MAX_CONTENT + 1)}, "steps[a].prompt", "at most"),
        ({"model": "bad model"}, "steps[a].model", ""),
    ],
)
async def test_an_agent_step_is_checked(over: dict[str, Any], field: str, problem: str) -> None:
    rw = await runner_world()
    error = await refused(rw, agent(rw, **over))
    assert error.field == field
    assert problem in error.problem


async def test_an_agent_step_names_an_agent_of_the_organization() -> None:
    rw = await runner_world()
    with pytest.raises(NotFound):
        await rw.runners.create(
            WHO,
            RunnerDraft(name="r", steps=[StepDraft(id="a", kind="agent", agent_id=uuid.uuid4())]),
        )


async def test_a_condition_goes_to_a_later_step_only() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO,
        RunnerDraft(
            name="r",
            steps=[condition(if_true="z", if_false="next"), condition("y"), condition("z")],
        ),
    )
    assert made.steps[0].if_true == "z"
    error = await refused(rw, condition("y"), condition(if_true="y"))
    assert error.field == "steps[c].if_true"


async def test_steps_are_bounded_and_unique() -> None:
    rw = await runner_world()
    fine = [condition(f"s{i}") for i in range(MAX_STEPS)]
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=fine))
    assert len(made.steps) == MAX_STEPS
    error = await refused(rw, *fine, condition("one-more"))
    assert (error.field, error.problem) == ("steps", f"at most {MAX_STEPS} steps")
    error = await refused(rw, condition("a"), condition("a"))
    assert (error.field, error.problem) == ("steps", "step ids must be unique")
    many = condition(input_mapping={f"k{i}": "input" for i in range(101)})
    assert (await refused(rw, many)).field == "steps[c].input_mapping"
    exactly = condition(input_mapping={f"k{i}": "input" for i in range(100)})
    await rw.runners.create(WHO, RunnerDraft(name="r", steps=[exactly]))


async def test_add_step_appends_and_set_steps_replaces() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition("a")]))
    rw.turn.clock.advance(1)
    added = await rw.runners.add_step(WHO, made.id, condition("b"))
    assert [s.id for s in added.steps] == ["a", "b"]
    assert added.updated_at == rw.turn.clock.now()
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.add_step(WHO, made.id, condition("a"))
    assert (caught.value.field, caught.value.problem) == ("id", "the runner has a step 'a'")
    full = await rw.runners.set_steps(WHO, made.id, [condition(f"s{i}") for i in range(MAX_STEPS)])
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.add_step(WHO, made.id, condition("z"))
    assert caught.value.field == "steps"
    replaced = await rw.runners.set_steps(WHO, made.id, [condition("z")])
    assert [s.id for s in replaced.steps] == ["z"]
    assert len(full.steps) == MAX_STEPS
    # an added condition may go to no earlier step
    await rw.runners.set_steps(WHO, made.id, [condition("a")])
    with pytest.raises(InvalidInput):
        await rw.runners.add_step(WHO, made.id, condition("b", if_true="a"))


# --- a webhook step's headers ---------------------------------------------------------------


async def test_headers_are_sealed_for_the_step_and_kept_for_the_same_address_only() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO, RunnerDraft(name="r", steps=[webhook(headers={"X-Key": "secret"}), condition()])
    )
    sealed = made.steps[0].headers
    assert sealed is not None
    assert "secret" not in sealed
    where = step_headers_context(ORG, made.id, "w")
    assert where == f"{ORG}:runner_step:{made.id}:w"
    assert msgspec.json.decode(BOX.open(sealed, where)) == {"X-Key": "secret"}
    assert made.steps[1].headers is None
    # no headers given: the same address keeps them
    kept = await rw.runners.set_steps(WHO, made.id, [webhook(), condition()])
    assert kept.steps[0].headers == sealed
    # another step id, or another address: not kept
    other = await rw.runners.set_steps(WHO, made.id, [webhook("v")])
    assert other.steps[0].headers is None
    again = await rw.runners.set_steps(WHO, made.id, [webhook(headers={"X-Key": "s"})])
    moved = await rw.runners.set_steps(WHO, made.id, [webhook(url=URL + "/2")])
    assert again.steps[0].headers is not None
    assert moved.steps[0].headers is None
    # {} removes them
    again = await rw.runners.set_steps(WHO, made.id, [webhook(headers={"X-Key": "s"})])
    removed = await rw.runners.set_steps(WHO, made.id, [webhook(headers={})])
    assert removed.steps[0].headers is None


async def test_a_condition_step_of_the_same_id_keeps_no_headers() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[webhook(headers={"A": "1"})]))
    changed = await rw.runners.set_steps(WHO, made.id, [condition("w")])
    assert changed.steps[0].headers is None


async def test_rotate_secrets_reseals_only_what_an_old_key_sealed() -> None:
    rw = await runner_world()
    made = await rw.runners.create(
        WHO, RunnerDraft(name="r", steps=[webhook(headers={"A": "1"}), webhook("v")])
    )
    assert await rw.runners.rotate_secrets() == 0  # all sealed with the newest key
    newer = AesGcmBox([("k2", b"\x0a" * 32), ("k1", b"\x09" * 32)])
    rw.runners._box = newer
    assert await rw.runners.rotate_secrets(ORG) == 1
    after = await rw.runners.get(WHO, made.id)
    sealed = after.steps[0].headers
    assert sealed is not None
    assert newer.is_current(sealed)
    assert msgspec.json.decode(newer.open(sealed, step_headers_context(ORG, made.id, "w"))) == {
        "A": "1"
    }
    assert after.updated_at == made.updated_at
    assert after.steps[1] == made.steps[1]
    assert await rw.runners.rotate_secrets(ORG) == 0


# --- budget and skills -----------------------------------------------------------------------


async def test_a_budget_changes_only_the_fields_given_and_none_removes_a_limit() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    one = await rw.runners.set_budget(
        WHO, made.id, BudgetChanges(max_tokens_per_run=10, daily_cost_usd=1.5, on_exceed="fail")
    )
    assert one.budget == Budget(max_tokens_per_run=10, daily_cost_usd=1.5, on_exceed="fail")
    two = await rw.runners.set_budget(
        WHO, made.id, BudgetChanges(max_tokens_per_run=None, soft_limit_pct=100)
    )
    assert two.budget == Budget(daily_cost_usd=1.5, on_exceed="fail", soft_limit_pct=100)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_cost_usd_per_run": -0.01}, "max_cost_usd_per_run"),
        ({"max_cost_usd_per_run": 1_000_000.01}, "max_cost_usd_per_run"),
        ({"daily_cost_usd": -1.0}, "daily_cost_usd"),
        ({"max_tokens_per_run": -1}, "max_tokens_per_run"),
        ({"daily_tokens": 10**12 + 1}, "daily_tokens"),
        ({"soft_limit_pct": 0}, "soft_limit_pct"),
        ({"soft_limit_pct": 101}, "soft_limit_pct"),
    ],
)
async def test_a_budget_is_bounded(changes: dict[str, Any], field: str) -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.set_budget(WHO, made.id, BudgetChanges(**changes))
    assert caught.value.field == field


async def test_a_budget_at_its_bounds_is_kept() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    edge = BudgetChanges(
        max_cost_usd_per_run=0.0,
        daily_cost_usd=1_000_000.0,
        max_tokens_per_run=0,
        daily_tokens=10**12,
        soft_limit_pct=1,
    )
    got = await rw.runners.set_budget(WHO, made.id, edge)
    assert got.budget == Budget(
        max_cost_usd_per_run=0.0,
        daily_cost_usd=1_000_000.0,
        max_tokens_per_run=0,
        daily_tokens=10**12,
        soft_limit_pct=1,
    )


async def test_skills_are_replaced_checked_and_bounded() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r"))
    ids = await stored_skills(rw.turn.storage.skills, ORG, 100)
    got = await rw.runners.set_skills(WHO, made.id, bound(*ids))
    assert got.skills == tuple(bound(*ids))
    assert (await rw.runners.get(WHO, made.id)).skills == tuple(bound(*ids))
    pinned = [SkillBinding(skill_id=ids[1], pinned_version=1, enabled=False)]
    assert (await rw.runners.set_skills(WHO, made.id, pinned)).skills == tuple(pinned)
    with pytest.raises(InvalidInput, match="given twice"):
        await rw.runners.set_skills(WHO, made.id, bound(ids[1], ids[0], ids[1]))
    with pytest.raises(InvalidInput, match="at most 100"):
        await rw.runners.set_skills(WHO, made.id, bound(*ids, ids[0]))
    with pytest.raises(NotFound):
        await rw.runners.set_skills(WHO, made.id, bound(uuid.uuid4()))
    with pytest.raises(InvalidInput, match="has no version 2"):
        await rw.runners.set_skills(WHO, made.id, [SkillBinding(skill_id=ids[0], pinned_version=2)])
    assert (await rw.runners.get(WHO, made.id)).skills == tuple(pinned)  # refusals change nothing


# --- triggers ----------------------------------------------------------------------------------


async def test_a_webhook_triggers_token_is_shown_once_and_opens_it_until_rotated() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    trigger, token = await rw.runners.add_trigger(
        WHO, made.id, TriggerDraft(kind="webhook", name="hook", input={"a": 1})
    )
    assert token is not None
    assert token.startswith("rt_")
    assert len(token) == 3 + 32  # 24 random bytes, URL-safe base64
    assert (trigger.token_hash, trigger.token_hint) == (token_hash(token), token[-4:])
    assert (trigger.next_fire_at, trigger.input, trigger.runner_id) == (None, {"a": 1}, made.id)
    assert await rw.runners.by_token(token, ("webhook",)) == trigger
    assert await rw.runners.triggers(MEMBER, made.id) == [trigger]
    rw.turn.clock.advance(1)
    rotated, new = await rw.runners.rotate_token(WHO, made.id, trigger.id)
    assert new != token
    assert (rotated.token_hash, rotated.updated_at) == (token_hash(new), rw.turn.clock.now())
    for wrong in (token, "rt_" + "x" * 32, new[3:], "rt_" + "x" * 198, new):
        kinds = ("button",) if wrong == new else ("webhook",)
        if wrong == new:
            with pytest.raises(NotFound):
                await rw.runners.by_token(wrong, kinds)
            continue
        with pytest.raises(NotFound):
            await rw.runners.by_token(wrong, kinds)
    assert await rw.runners.by_token(new, ("webhook", "button")) == rotated


async def test_a_button_opens_its_own_runner_only() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    other = await rw.runners.create(WHO, RunnerDraft(name="o", steps=[condition()]))
    _, token = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="button"))
    assert token is not None
    assert await rw.runners.button(made.id, token) == made
    with pytest.raises(NotFound):
        await rw.runners.button(other.id, token)


async def test_only_tokens_of_webhook_and_button_triggers_rotate() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    trigger, token = await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    assert (token, trigger.token_hash, trigger.token_hint) == (None, None, None)
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.rotate_token(WHO, made.id, trigger.id)
    assert caught.value.field == "kind"


async def test_a_trigger_of_another_runner_is_not_found_through_this_one() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    other = await rw.runners.create(WHO, RunnerDraft(name="o", steps=[condition()]))
    trigger, _ = await rw.runners.add_trigger(WHO, other.id, TriggerDraft(kind="webhook"))
    for call in (
        rw.runners.update_trigger(WHO, made.id, trigger.id, TriggerChanges(name="x")),
        rw.runners.rotate_token(WHO, made.id, trigger.id),
        rw.runners.delete_trigger(WHO, made.id, trigger.id),
    ):
        with pytest.raises(NotFound):
            await call
    await rw.runners.delete_trigger(WHO, other.id, trigger.id)
    assert await rw.runners.triggers(WHO, other.id) == []


async def test_triggers_are_checked_and_bounded() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    for draft, field in (
        (TriggerDraft(kind="webhook", prompt="p"), "prompt"),
        (TriggerDraft(kind="webhook", thread_id=uuid.uuid4()), "prompt"),
        (TriggerDraft(kind="webhook", cron="0 9 * * *"), "cron"),
        (TriggerDraft(kind="cron"), "cron"),
        (TriggerDraft(kind="cron", cron="0 9 * * *", timezone="Mars/Olympus"), "timezone"),
        (TriggerDraft(kind="cron", cron="not cron"), "cron"),
        (TriggerDraft(kind="cron", cron="*/59 * * * * *"), "cron"),  # 59 s, then 1 s
        (TriggerDraft(kind="cron", cron="* * * * * *"), "cron"),  # every second
        (TriggerDraft(kind="cron", cron="0 9 * * *", end_at=datetime(2030, 1, 1)), "end_at"),
        (TriggerDraft(kind="webhook", name="n" * (MAX_NAME + 1)), "name"),
        (TriggerDraft(kind="webhook", input={"x": "y" * MAX_INPUT_BYTES}), "input"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await rw.runners.add_trigger(WHO, made.id, draft)
        assert caught.value.field == field, draft
    # every minute: exactly the least interval (60 s) is allowed
    every_minute = await rw.runners.add_trigger(
        WHO, made.id, TriggerDraft(kind="cron", cron="* * * * *")
    )
    assert every_minute[0].next_fire_at is not None
    for _ in range(MAX_TRIGGERS - 1):
        await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    with pytest.raises(InvalidInput) as caught:
        await rw.runners.add_trigger(WHO, made.id, TriggerDraft(kind="manual"))
    assert caught.value.field == "triggers"


async def test_a_cron_trigger_ends_at_its_end_and_stops_when_disabled() -> None:
    rw = await runner_world()
    made = await rw.runners.create(WHO, RunnerDraft(name="r", steps=[condition()]))
    now = rw.turn.clock.now()
    tick = (now + timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    trigger, _ = await rw.runners.add_trigger(
        WHO, made.id, TriggerDraft(kind="cron", cron="0 * * * *", end_at=tick)
    )
    assert trigger.next_fire_at == tick  # at its end: still fires
    ended, _ = await rw.runners.add_trigger(
        WHO,
        made.id,
        TriggerDraft(kind="cron", cron="0 * * * *", end_at=tick - timedelta(microseconds=1)),
    )
    assert ended.next_fire_at is None
    off = await rw.runners.update_trigger(WHO, made.id, trigger.id, TriggerChanges(enabled=False))
    assert off.next_fire_at is None
    on = await rw.runners.update_trigger(
        WHO, made.id, trigger.id, TriggerChanges(enabled=True, end_at=None)
    )
    assert on.next_fire_at == tick
    with pytest.raises(InvalidInput):
        await rw.runners.update_trigger(WHO, made.id, trigger.id, TriggerChanges(prompt="p"))
    assert (await rw.turn.storage.runners.get_trigger(ORG, trigger.id)) == on
    assert on.end_at is None
    assert tick.tzinfo is UTC
