"""The plans use case (``agentsvc_core.use_cases.plans``) over the memory storage and
a clock the test moves: what a plan, its todos and their edges look like after
each change, the bounds of docs/api.md#plans, who may change a plan, and which
``updated_at`` a change moves. Written to kill the mutants `make mutation` found
alive (docs/development.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.entities.plan import Blocked, Edge, Plan, Todo
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases.plans import (
    DependencyCycle,
    PlanChanges,
    TodoChanges,
    TodoDraft,
)
from tests.unit.test_plans import ALICE, BOB, KEY, World
from tests.unit.turn_world import T0, Clock


def world() -> tuple[World, Clock]:
    clock = Clock()
    return World(clock), clock


async def plan_of(w: World, *contents: str, who: Principal = KEY) -> Plan:
    return await w.plans.create(
        who, await w.thread(who), "p", [TodoDraft(content=c) for c in contents]
    )


def _todo(plan: Plan, content: str) -> Todo:
    return next(t for t in plan.todos if t.content == content)


def _summary(plan: Plan) -> list[tuple[str, int]]:
    return [(t.content, t.position) for t in plan.todos]


def _refused(caught: pytest.ExceptionInfo[InvalidInput], field: str, problem: str) -> None:
    assert (caught.value.field, caught.value.problem) == (field, problem)


# --- plans -----------------------------------------------------------------------


async def test_a_new_plan_is_an_empty_draft_stamped_with_the_clock() -> None:
    w, _ = world()
    thread = await w.thread()
    plan = await w.plans.create(KEY, thread, "Move house")
    assert (plan.org_id, plan.thread_id, plan.title) == (KEY.org_id, thread, "Move house")
    assert (plan.status, plan.todos) == ("draft", ())
    assert plan.created_at == plan.updated_at == T0
    assert await w.plans.get(KEY, plan.id) == plan
    assert await w.plans.get_in(KEY.org_id, plan.id) == plan


async def test_a_plan_created_with_todos_holds_them_in_order_with_their_fields() -> None:
    w, clock = world()
    clock.advance(60)
    plan = await w.plans.create(
        KEY,
        await w.thread(),
        "p",
        [
            TodoDraft(content="Write", active_form="Writing", status="in_progress"),
            TodoDraft(content="Test", depends_on=(0,)),
        ],
    )
    write, test = plan.todos
    assert (write.content, write.active_form, write.status, write.position) == (
        "Write",
        "Writing",
        "in_progress",
        0,
    )
    assert (test.content, test.active_form, test.status, test.position) == (
        "Test",
        None,
        "pending",
        1,
    )
    assert test.blocked_by == (write.id,)
    assert write.blocks == (test.id,)
    at = T0 + timedelta(seconds=60)
    assert {(t.created_at, t.updated_at) for t in plan.todos} == {(at, at)}
    assert plan.created_at == plan.updated_at == at
    assert await w.plans.get(KEY, plan.id) == plan


async def test_a_plan_title_is_bounded_and_not_blank() -> None:
    w, _ = world()
    thread = await w.thread()
    assert (await w.plans.create(KEY, thread, "t" * 1000)).title == "t" * 1000
    for bad, problem in (
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("t" * 1001, "must be at most 1000 characters"),
        ("a\x00b", "must not contain NUL characters"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.create(KEY, thread, bad)
        _refused(caught, "title", problem)
    assert len(await w.plans.list_for_thread(KEY, thread)) == 1


async def test_a_refused_todo_leaves_no_new_plan_behind() -> None:
    w, _ = world()
    thread = await w.thread()
    with pytest.raises(InvalidInput) as caught:
        await w.plans.create(KEY, thread, "p", [TodoDraft(content="")])
    _refused(caught, "content", "must not be empty")
    with pytest.raises(InvalidInput) as caught:
        await w.plans.create(KEY, thread, "p", [TodoDraft(content="a", depends_on=(1,))])
    _refused(caught, "depends_on", "an index must name a todo of the same request")
    assert await w.plans.list_for_thread(KEY, thread) == []
    assert await w.plans.latest_in(KEY.org_id, thread) is None


async def test_a_thread_lists_its_plans_oldest_first_and_the_latest_is_the_last() -> None:
    w, clock = world()
    thread = await w.thread()
    other = await w.thread()
    made = []
    for title in ("one", "two", "three"):
        made.append(await w.plans.create(KEY, thread, title))
        clock.advance(1)
    await w.plans.create(KEY, other, "elsewhere")
    assert [p.title for p in await w.plans.list_for_thread(KEY, thread)] == [
        "one",
        "two",
        "three",
    ]
    assert await w.plans.latest_in(KEY.org_id, thread) == made[-1]
    assert await w.plans.latest_in("another-org", thread) is None


async def test_an_update_changes_what_it_names_and_stamps_the_plan() -> None:
    w, clock = world()
    plan = await plan_of(w, "a")
    clock.advance(5)
    renamed = await w.plans.update(KEY, plan.id, PlanChanges(title="Renamed"))
    assert (renamed.title, renamed.status) == ("Renamed", "draft")
    assert renamed.updated_at == T0 + timedelta(seconds=5)
    assert renamed.created_at == T0
    assert renamed.todos == plan.todos
    clock.advance(5)
    approved = await w.plans.update(KEY, plan.id, PlanChanges(status="approved"))
    assert (approved.title, approved.status) == ("Renamed", "approved")
    assert approved.updated_at == T0 + timedelta(seconds=10)
    clock.advance(5)
    both = await w.plans.update(KEY, plan.id, PlanChanges(title="Both", status="completed"))
    assert (both.title, both.status) == ("Both", "completed")
    assert await w.plans.get(KEY, plan.id) == both


async def test_an_empty_update_answers_the_plan_unchanged() -> None:
    w, clock = world()
    plan = await plan_of(w, "a")
    clock.advance(5)
    assert await w.plans.update(KEY, plan.id, PlanChanges()) == plan
    assert (await w.plans.get(KEY, plan.id)).updated_at == T0


async def test_an_updated_title_is_bounded_and_not_blank() -> None:
    w, _ = world()
    plan = await plan_of(w)
    assert (await w.plans.update(KEY, plan.id, PlanChanges(title="t" * 1000))).title == ("t" * 1000)
    for bad, problem in (
        ("  ", "must not be empty"),
        ("t" * 1001, "must be at most 1000 characters"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.update(KEY, plan.id, PlanChanges(title=bad, status="cancelled"))
        _refused(caught, "title", problem)
    assert (await w.plans.get(KEY, plan.id)).status == "draft"


async def test_a_deleted_plan_is_gone() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    await w.plans.delete(KEY, plan.id)
    with pytest.raises(NotFound):
        await w.plans.get(KEY, plan.id)
    assert await w.plans.list_for_thread(KEY, plan.thread_id) == []


# --- who may change a plan ---------------------------------------------------------


def _every_change(w: World, plan: Plan) -> list[tuple[str, Any]]:
    """One call of each change and read, by its name (built fresh for each caller)."""
    a, b = (t.id for t in plan.todos)
    return [
        ("get", lambda who: w.plans.get(who, plan.id)),
        ("list", lambda who: w.plans.list_for_thread(who, plan.thread_id)),
        ("update", lambda who: w.plans.update(who, plan.id, PlanChanges(title="x"))),
        ("add", lambda who: w.plans.add_todos(who, plan.id, [TodoDraft(content="c")])),
        (
            "update_todo",
            lambda who: w.plans.update_todo(who, plan.id, a, TodoChanges(content="a2")),
        ),
        ("add_dep", lambda who: w.plans.add_dependency(who, plan.id, b, a)),
        ("deps", lambda who: w.plans.dependencies(who, plan.id, b)),
        ("ready", lambda who: w.plans.readiness(who, plan.id, with_blocked=True)),
        ("remove_dep", lambda who: w.plans.remove_dependency(who, plan.id, b, a)),
        ("delete_todo", lambda who: w.plans.delete_todo(who, plan.id, a)),
        ("delete", lambda who: w.plans.delete(who, plan.id)),
    ]


async def test_a_member_changes_the_plans_of_its_own_thread_and_no_other() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", who=ALICE)
    before = await w.plans.get(ALICE, plan.id)
    for name, call in _every_change(w, plan):
        with pytest.raises(NotFound) as caught:
            await call(BOB)
        expected = "thread not found" if name == "list" else "plan not found"
        assert caught.value.detail == expected, name
    with pytest.raises(NotFound) as thread_caught:
        await w.plans.create(BOB, plan.thread_id, "mine now")
    assert thread_caught.value.detail == "thread not found"
    assert await w.plans.get(ALICE, plan.id) == before
    for name, call in _every_change(w, plan):
        await call(ALICE)  # each succeeds, in this order, for the thread's user
        if name == "add_dep":
            assert (await w.plans.dependencies(ALICE, plan.id, plan.todos[1].id)) == [
                Edge(plan.todos[1].id, plan.todos[0].id)
            ]
    with pytest.raises(NotFound):
        await w.plans.get(ALICE, plan.id)


async def test_the_organizations_key_changes_a_members_plan() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", who=ALICE)
    for _, call in _every_change(w, plan):
        await call(KEY)
    with pytest.raises(NotFound):
        await w.plans.get(KEY, plan.id)


async def test_another_organization_sees_no_plan() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b")
    outsider = Principal(org_id="elsewhere", method="api_key")
    for name, call in _every_change(w, plan):
        with pytest.raises(NotFound):
            await call(outsider)
        assert await w.plans.get(KEY, plan.id) == plan, name


# --- adding todos ------------------------------------------------------------------


async def test_added_todos_go_at_the_end_with_their_fields_and_edges() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    a, b = plan.todos
    clock.advance(30)
    at = T0 + timedelta(seconds=30)
    plan = await w.plans.add_todos(
        KEY,
        plan.id,
        [
            TodoDraft(content="c", active_form="Doing c", status="skipped", parent_id=a.id),
            TodoDraft(content="d", depends_on=(b.id, 0)),
        ],
    )
    assert _summary(plan) == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]
    c, d = plan.todos[2:]
    assert (c.active_form, c.status, c.parent_id) == ("Doing c", "skipped", a.id)
    assert (d.active_form, d.status, d.parent_id) == (None, "pending", None)
    assert d.blocked_by == (b.id, c.id)
    assert (c.created_at, c.updated_at, d.created_at, d.updated_at) == (at, at, at, at)
    assert plan.todos[:2] == (a, _blocking(b, d.id))
    assert plan.updated_at == at
    assert plan.created_at == T0
    assert await w.plans.get(KEY, plan.id) == plan


def _blocking(todo: Todo, *ids: uuid.UUID) -> Todo:
    """``todo`` as it reads once ``ids`` depend on it."""
    return msgspec.structs.replace(todo, blocks=ids)


async def test_adding_todos_needs_at_least_one_and_at_most_a_hundred() -> None:
    w, _ = world()
    plan = await plan_of(w)
    with pytest.raises(InvalidInput) as caught:
        await w.plans.add_todos(KEY, plan.id, [])
    _refused(caught, "todos", "must hold at least one todo")
    with pytest.raises(InvalidInput) as caught:
        await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="x")] * 101)
    _refused(caught, "todos", "at most 100 todos at a time")
    plan = await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="x")] * 100)
    assert [t.position for t in plan.todos] == list(range(100))


async def test_a_plan_holds_at_most_five_hundred_todos() -> None:
    w, _ = world()
    plan = await plan_of(w)
    for _ in range(4):
        await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="x")] * 100)
    await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="x")] * 99)
    plan = await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="last")])
    assert len(plan.todos) == 500
    assert plan.todos[-1].position == 499
    with pytest.raises(InvalidInput) as caught:
        await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="one more")])
    _refused(caught, "todos", "a plan holds at most 500 todos")


async def test_a_todos_text_is_bounded_and_its_content_not_blank() -> None:
    w, _ = world()
    plan = await plan_of(w)
    plan = await w.plans.add_todos(
        KEY, plan.id, [TodoDraft(content="c" * 2000, active_form="f" * 2000)]
    )
    assert (plan.todos[0].content, plan.todos[0].active_form) == ("c" * 2000, "f" * 2000)
    for draft, field, problem in (
        (TodoDraft(content=" "), "content", "must not be empty"),
        (TodoDraft(content="c" * 2001), "content", "must be at most 2000 characters"),
        (
            TodoDraft(content="c", active_form="f" * 2001),
            "active_form",
            "must be at most 2000 characters",
        ),
        (
            TodoDraft(content="c", active_form="\x00"),
            "active_form",
            "must not contain NUL characters",
        ),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.add_todos(KEY, plan.id, [draft])
        _refused(caught, field, problem)
    # an empty active form is not blank content: it is allowed
    plan = await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="c", active_form="")])
    assert plan.todos[-1].active_form == ""


async def test_a_new_todos_parent_is_a_todo_of_the_plan() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    other = await plan_of(w, "elsewhere")
    for parent in (uuid.uuid4(), other.todos[0].id):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="b", parent_id=parent)])
        _refused(caught, "parent_id", "must be a todo of this plan")
    assert len((await w.plans.get(KEY, plan.id)).todos) == 1


async def test_a_new_todos_dependencies_are_bounded_in_number_and_index() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    (a,) = plan.todos
    plan = await w.plans.add_todos(
        KEY, plan.id, [TodoDraft(content="b"), TodoDraft(content="c", depends_on=(0,) * 100)]
    )
    assert _todo(plan, "c").blocked_by == (_todo(plan, "b").id,)
    with pytest.raises(InvalidInput) as caught:
        await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="d", depends_on=(a.id,) * 101)])
    _refused(caught, "depends_on", "at most 100 dependencies")
    for index in (-1, 2):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.add_todos(
                KEY,
                plan.id,
                [TodoDraft(content="d"), TodoDraft(content="e", depends_on=(index,))],
            )
        _refused(caught, "depends_on", "an index must name a todo of the same request")
    assert len((await w.plans.get(KEY, plan.id)).todos) == 3
    plan = await w.plans.add_todos(
        KEY, plan.id, [TodoDraft(content="d", depends_on=(1,)), TodoDraft(content="e")]
    )
    assert _todo(plan, "d").blocked_by == (_todo(plan, "e").id,)


async def test_a_new_todo_may_not_depend_on_itself_or_another_plans_todo() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    other = await plan_of(w, "elsewhere")
    with pytest.raises(InvalidInput) as caught:
        await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="b", depends_on=(0,))])
    _refused(caught, "depends_on", "a todo cannot depend on itself")
    for dep in (other.todos[0].id, uuid.uuid4()):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.add_todos(KEY, plan.id, [TodoDraft(content="b", depends_on=(dep,))])
        _refused(caught, "depends_on", "must be a todo of this plan")
    assert await w.plans.get(KEY, plan.id) == await w.plans.get_in(KEY.org_id, plan.id)
    assert len((await w.plans.get(KEY, plan.id)).todos) == 1


# --- changing a todo ----------------------------------------------------------------


async def test_a_todo_update_changes_only_what_it_names() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b", "c")
    a, b, c = plan.todos
    clock.advance(10)
    at = T0 + timedelta(seconds=10)
    plan = await w.plans.update_todo(
        KEY,
        plan.id,
        b.id,
        TodoChanges(content="b2", active_form="Doing b", status="in_progress", parent_id=a.id),
    )
    changed = _todo(plan, "b2")
    assert (changed.active_form, changed.status, changed.parent_id, changed.position) == (
        "Doing b",
        "in_progress",
        a.id,
        1,
    )
    assert (changed.created_at, changed.updated_at) == (T0, at)
    # the others are as they were: not even their updated_at moved
    assert (plan.todos[0], plan.todos[2]) == (a, c)
    assert plan.updated_at == at
    clock.advance(10)
    plan = await w.plans.update_todo(KEY, plan.id, b.id, TodoChanges(status="done"))
    again = _todo(plan, "b2")
    assert (again.active_form, again.status, again.parent_id) == ("Doing b", "done", a.id)
    # None clears the active form and the parent
    plan = await w.plans.update_todo(
        KEY, plan.id, b.id, TodoChanges(active_form=None, parent_id=None)
    )
    cleared = _todo(plan, "b2")
    assert (cleared.content, cleared.active_form, cleared.parent_id) == ("b2", None, None)
    assert await w.plans.get(KEY, plan.id) == plan


async def test_a_todo_update_of_nothing_moves_no_todo() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    clock.advance(10)
    after = await w.plans.update_todo(KEY, plan.id, plan.todos[0].id, TodoChanges())
    assert after.todos == plan.todos
    assert after.updated_at == T0 + timedelta(seconds=10)  # the plan is touched


async def test_an_updated_todos_text_is_bounded_and_its_content_not_blank() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    a = plan.todos[0].id
    for changes, field, problem in (
        (TodoChanges(content=" "), "content", "must not be empty"),
        (TodoChanges(content="c" * 2001), "content", "must be at most 2000 characters"),
        (TodoChanges(active_form="f" * 2001), "active_form", "must be at most 2000 characters"),
        (TodoChanges(active_form="\x00"), "active_form", "must not contain NUL characters"),
        (TodoChanges(position=-1), "position", "must be 0 or more"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.update_todo(KEY, plan.id, a, changes)
        _refused(caught, field, problem)
    assert await w.plans.get(KEY, plan.id) == plan
    plan = await w.plans.update_todo(
        KEY, plan.id, a, TodoChanges(content="c" * 2000, active_form="f" * 2000)
    )
    assert (plan.todos[0].content, plan.todos[0].active_form) == ("c" * 2000, "f" * 2000)


async def test_a_todo_moves_to_its_position_and_the_others_shift() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b", "c", "d")
    a, b, c, d = plan.todos
    clock.advance(10)
    at = T0 + timedelta(seconds=10)
    plan = await w.plans.update_todo(KEY, plan.id, c.id, TodoChanges(position=0))
    assert _summary(plan) == [("c", 0), ("a", 1), ("b", 2), ("d", 3)]
    # what moved is stamped, what stayed where it was is not
    assert [t.updated_at for t in plan.todos] == [at, at, at, T0]
    plan = await w.plans.update_todo(KEY, plan.id, a.id, TodoChanges(position=3))
    assert _summary(plan) == [("c", 0), ("b", 1), ("d", 2), ("a", 3)]
    plan = await w.plans.update_todo(KEY, plan.id, b.id, TodoChanges(position=2))
    assert _summary(plan) == [("c", 0), ("d", 1), ("b", 2), ("a", 3)]
    # without a position it stays where it is
    plan = await w.plans.update_todo(KEY, plan.id, d.id, TodoChanges(content="d2"))
    assert _summary(plan) == [("c", 0), ("d2", 1), ("b", 2), ("a", 3)]
    assert await w.plans.get(KEY, plan.id) == plan


async def test_an_update_of_an_unknown_todo_is_not_found() -> None:
    w, _ = world()
    plan = await plan_of(w, "a")
    other = await plan_of(w, "elsewhere")
    for todo in (uuid.uuid4(), other.todos[0].id):
        with pytest.raises(NotFound) as caught:
            await w.plans.update_todo(KEY, plan.id, todo, TodoChanges(content="x"))
        assert caught.value.detail == "todo not found"
        with pytest.raises(NotFound) as caught:
            await w.plans.delete_todo(KEY, plan.id, todo)
        assert caught.value.detail == "todo not found"
        for call in (
            w.plans.add_dependency(KEY, plan.id, todo, plan.todos[0].id),
            w.plans.remove_dependency(KEY, plan.id, todo, plan.todos[0].id),
            w.plans.dependencies(KEY, plan.id, todo),
        ):
            with pytest.raises(NotFound) as caught:
                await call
            assert caught.value.detail == "todo not found"
    assert await w.plans.get(KEY, plan.id) == plan


async def test_a_parent_is_a_todo_of_the_plan_and_not_a_descendant() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", "c")
    a, b, c = (t.id for t in plan.todos)
    other = await plan_of(w, "elsewhere")
    for parent in (uuid.uuid4(), other.todos[0].id):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.update_todo(KEY, plan.id, a, TodoChanges(parent_id=parent))
        _refused(caught, "parent_id", "must be a todo of this plan")
    with pytest.raises(InvalidInput) as caught:
        await w.plans.update_todo(KEY, plan.id, a, TodoChanges(parent_id=a))
    _refused(caught, "parent_id", "must not be the todo or one of its children")
    await w.plans.update_todo(KEY, plan.id, b, TodoChanges(parent_id=a))
    with pytest.raises(InvalidInput) as caught:
        await w.plans.update_todo(KEY, plan.id, a, TodoChanges(parent_id=b))
    _refused(caught, "parent_id", "must not be the todo or one of its children")
    # a sibling's, an ancestor's or an unrelated todo is fine
    plan = await w.plans.update_todo(KEY, plan.id, c, TodoChanges(parent_id=b))
    plan = await w.plans.update_todo(KEY, plan.id, c, TodoChanges(parent_id=a))
    assert [t.parent_id for t in plan.todos] == [None, a, a]
    plan = await w.plans.update_todo(KEY, plan.id, b, TodoChanges(parent_id=c))
    assert [t.parent_id for t in plan.todos] == [None, c, a]


async def test_a_todo_update_adds_and_removes_dependencies() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b", "c")
    a, b, c = (t.id for t in plan.todos)
    plan = await w.plans.update_todo(KEY, plan.id, c, TodoChanges(add_depends_on=(a, b)))
    assert _todo(plan, "c").blocked_by == (a, b)
    plan = await w.plans.update_todo(
        KEY, plan.id, c, TodoChanges(remove_depends_on=(a,), add_depends_on=(a,))
    )
    assert _todo(plan, "c").blocked_by == (a, b)  # removed, then added again
    clock.advance(10)
    plan = await w.plans.update_todo(KEY, plan.id, c, TodoChanges(remove_depends_on=(b, c)))
    assert _todo(plan, "c").blocked_by == (a,)
    assert _todo(plan, "b").blocks == ()
    assert plan.updated_at == T0 + timedelta(seconds=10)
    with pytest.raises(DependencyCycle) as caught:
        await w.plans.update_todo(KEY, plan.id, a, TodoChanges(add_depends_on=(c,)))
    assert caught.value.path == [a, c, a]
    with pytest.raises(InvalidInput) as refused:
        await w.plans.update_todo(KEY, plan.id, a, TodoChanges(add_depends_on=(a,)))
    _refused(refused, "depends_on", "a todo cannot depend on itself")
    assert await w.plans.get(KEY, plan.id) == plan


async def test_a_todo_update_changes_at_most_a_hundred_edges() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", "c")
    a, b, c = (t.id for t in plan.todos)
    plan = await w.plans.update_todo(
        KEY, plan.id, c, TodoChanges(add_depends_on=(a,) * 60, remove_depends_on=(b,) * 40)
    )
    assert _todo(plan, "c").blocked_by == (a,)
    for changes in (
        TodoChanges(add_depends_on=(b,) * 50, remove_depends_on=(a,) * 51),
        TodoChanges(add_depends_on=(b,) * 101),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.plans.update_todo(KEY, plan.id, c, changes)
        _refused(caught, "depends_on", "at most 100 changes at a time")
    assert await w.plans.get(KEY, plan.id) == plan


# --- deleting a todo ----------------------------------------------------------------


async def test_a_deleted_todo_takes_its_edges_and_hands_its_children_its_parent() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b", "c", "d", "e")
    a, b, c, d, e = (t.id for t in plan.todos)
    await w.plans.update_todo(KEY, plan.id, b, TodoChanges(parent_id=a))
    await w.plans.update_todo(KEY, plan.id, c, TodoChanges(parent_id=b))
    await w.plans.update_todo(KEY, plan.id, e, TodoChanges(parent_id=a))
    await w.plans.add_dependency(KEY, plan.id, d, b)
    await w.plans.add_dependency(KEY, plan.id, b, a)
    clock.advance(10)
    at = T0 + timedelta(seconds=10)
    plan = await w.plans.delete_todo(KEY, plan.id, b)
    assert _summary(plan) == [("a", 0), ("c", 1), ("d", 2), ("e", 3)]
    assert [t.parent_id for t in plan.todos] == [None, a, None, a]
    assert [(t.blocked_by, t.blocks) for t in plan.todos] == [((), ())] * 4
    # a stays where it was (untouched), the others moved or took a new parent
    assert [t.updated_at for t in plan.todos] == [T0, at, at, at]
    assert plan.updated_at == at
    assert await w.plans.get(KEY, plan.id) == plan


async def test_deleting_the_last_todo_moves_no_other() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    clock.advance(10)
    after = await w.plans.delete_todo(KEY, plan.id, plan.todos[1].id)
    assert after.todos == plan.todos[:1]
    assert after.updated_at == T0 + timedelta(seconds=10)


# --- dependencies ---------------------------------------------------------------------


async def test_a_new_edge_is_created_once_and_stamps_the_plan() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    a, b = (t.id for t in plan.todos)
    clock.advance(10)
    assert await w.plans.add_dependency(KEY, plan.id, b, a) == (Edge(b, a), True)
    stamped = await w.plans.get(KEY, plan.id)
    assert stamped.updated_at == T0 + timedelta(seconds=10)
    assert _todo(stamped, "b").blocked_by == (a,)
    clock.advance(10)
    assert await w.plans.add_dependency(KEY, plan.id, b, a) == (Edge(b, a), False)
    assert await w.plans.get(KEY, plan.id) == stamped  # nothing changed, not even the time


async def test_a_cycle_refused_by_add_dependency_changes_nothing() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    a, b = (t.id for t in plan.todos)
    await w.plans.add_dependency(KEY, plan.id, b, a)
    before = await w.plans.get(KEY, plan.id)
    clock.advance(10)
    with pytest.raises(DependencyCycle) as caught:
        await w.plans.add_dependency(KEY, plan.id, a, b)
    assert caught.value.path == [a, b, a]
    assert caught.value.detail == (
        f"this dependency would close a cycle (each todo depends on the next): {a} -> {b} -> {a}"
    )
    assert await w.plans.get(KEY, plan.id) == before


async def test_a_todos_dependencies_list_its_own_edges_then_those_on_it() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", "c", "d")
    a, b, c, d = (t.id for t in plan.todos)
    await w.plans.add_dependency(KEY, plan.id, b, a)
    await w.plans.add_dependency(KEY, plan.id, d, b)
    await w.plans.add_dependency(KEY, plan.id, b, c)
    await w.plans.add_dependency(KEY, plan.id, c, a)
    assert await w.plans.dependencies(KEY, plan.id, b) == [
        Edge(b, a),
        Edge(b, c),
        Edge(d, b),
    ]
    assert await w.plans.dependencies(KEY, plan.id, a) == [Edge(b, a), Edge(c, a)]
    assert await w.plans.dependencies(KEY, plan.id, d) == [Edge(d, b)]


async def test_removing_an_edge_stamps_the_plan_and_a_missing_one_is_not_found() -> None:
    w, clock = world()
    plan = await plan_of(w, "a", "b")
    a, b = (t.id for t in plan.todos)
    await w.plans.add_dependency(KEY, plan.id, b, a)
    clock.advance(10)
    await w.plans.remove_dependency(KEY, plan.id, b, a)
    removed = await w.plans.get(KEY, plan.id)
    assert _todo(removed, "b").blocked_by == ()
    assert removed.updated_at == T0 + timedelta(seconds=10)
    clock.advance(10)
    for todo, dep in ((b, a), (a, b)):
        with pytest.raises(NotFound) as caught:
            await w.plans.remove_dependency(KEY, plan.id, todo, dep)
        assert caught.value.detail == "no such dependency"
    assert await w.plans.get(KEY, plan.id) == removed


async def test_readiness_gives_the_blocked_only_when_asked() -> None:
    w, _ = world()
    plan = await plan_of(w, "a", "b", "c")
    a, b, c = (t.id for t in plan.todos)
    await w.plans.add_dependency(KEY, plan.id, b, a)
    await w.plans.add_dependency(KEY, plan.id, c, a)
    await w.plans.add_dependency(KEY, plan.id, c, b)
    without = await w.plans.readiness(KEY, plan.id, with_blocked=False)
    assert [t.id for t in without.ready] == [a]
    assert without.blocked is None
    with_blocked = await w.plans.readiness(KEY, plan.id, with_blocked=True)
    assert with_blocked.ready == without.ready
    assert with_blocked.blocked == (
        Blocked(todo_id=b, waiting_on=(a,)),
        Blocked(todo_id=c, waiting_on=(a, b)),
    )
    await w.plans.update_todo(KEY, plan.id, a, TodoChanges(status="skipped"))
    now = await w.plans.readiness(KEY, plan.id, with_blocked=True)
    assert [t.id for t in now.ready] == [b]
    assert now.blocked == (Blocked(todo_id=c, waiting_on=(b,)),)
