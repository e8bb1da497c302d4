"""A thread's history as a tree (use_cases/branches.py): the pure functions, and
edit, regenerate, switch and fork through the turn and the use case, over the
memory storage: what the model is sent, what is stored, what the history shows."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
import pytest

from agentsvc_core.entities import Message, Principal, ToolCall
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, ThreadBusy
from agentsvc_core.use_cases.branches import (
    Branches,
    branch_of,
    chained,
    latest_leaf,
    parents,
    pending_on,
    settled,
    shown,
    start_of,
)
from agentsvc_core.use_cases.threads import Threads
from agentsvc_core.use_cases.turn.conversation import SendInput
from agentsvc_core.use_cases.turn.events import Done, Token
from tests.unit.turn_world import HANG, ORG, Script, read_all, says, world

WHO = Principal(org_id=ORG, method="api_key")
T = datetime(2026, 1, 1, tzinfo=UTC)
THREAD = uuid.uuid4()


def m(name: str, role: str = "user", parent: Message | None = None, **extra: Any) -> Message:
    return Message(
        id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        org_id=ORG,
        thread_id=THREAD,
        role=role,  # type: ignore[arg-type]
        content=name,
        created_at=T,
        parent_id=None if parent is None else parent.id,
        **extra,
    )


def names(messages: Sequence[Message]) -> list[str]:
    return [x.content for x in messages]


# a line u1 a1 u2 a2, then u2 edited (u2b after a1) and answered (a2b), then a2b
# answered again (a2c after u2b)
U1, A1 = m("u1"), m("a1", "assistant")
U2, A2 = m("u2"), m("a2", "assistant")
U2B = m("u2b", parent=A1)
A2B = m("a2b", "assistant", parent=U2B)
A2C = m("a2c", "assistant", parent=U2B)
TREE = [U1, A1, U2, A2, U2B, A2B, A2C]


def test_a_message_without_a_parent_follows_the_one_stored_before_it() -> None:
    up = parents(TREE)
    assert up[U1.id] is None
    assert up[A1.id] == U1.id
    assert up[A2.id] == U2.id
    assert up[U2B.id] == A1.id
    assert up[A2C.id] == U2B.id


def test_a_branch_is_the_path_from_the_first_message_to_its_leaf() -> None:
    assert names(branch_of(TREE, A2.id)) == ["u1", "a1", "u2", "a2"]
    assert names(branch_of(TREE, A2B.id)) == ["u1", "a1", "u2b", "a2b"]
    assert names(branch_of(TREE, A2C.id)) == ["u1", "a1", "u2b", "a2c"]
    assert names(branch_of(TREE, U1.id)) == ["u1"]
    # a thread with one line: all of it, as stored
    assert branch_of(TREE[:4], None) == TREE[:4]
    with pytest.raises(NotFound):
        branch_of(TREE, uuid.uuid4())


def test_switching_to_a_message_lands_on_its_newest_leaf() -> None:
    assert latest_leaf(TREE, U2.id) == A2.id
    assert latest_leaf(TREE, U2B.id) == A2C.id  # its newer child
    assert latest_leaf(TREE, U1.id) == A2C.id  # the newest child at each step
    assert latest_leaf(TREE, A2B.id) == A2B.id
    with pytest.raises(NotFound):
        latest_leaf(TREE, uuid.uuid4())


def test_chained_messages_name_the_one_before() -> None:
    out = chained([U2, A2], A1.id)
    assert [x.parent_id for x in out] == [A1.id, U2.id]
    assert chained([], A1.id) == []


def test_the_history_shows_each_messages_parent_and_versions() -> None:
    items = shown(TREE, branch_of(TREE, A2B.id))
    got = [(names([s.message])[0], s.parent_id, s.sibling_index, s.sibling_count) for s in items]
    assert got == [
        ("u1", None, 1, 1),
        ("a1", U1.id, 1, 1),
        ("u2b", A1.id, 2, 2),  # the edit: second version of the message after a1
        ("a2b", U2B.id, 1, 2),  # the first of two answers to u2b
    ]
    assert items[2].prev_sibling_id == U2.id
    assert items[2].next_sibling_id is None
    assert items[3].next_sibling_id == A2C.id
    assert items[3].prev_sibling_id is None


def test_hidden_steps_are_skipped_in_the_shown_parents() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={})
    step = m("step", "assistant", tool_calls=(call,))  # only calls a tool: hidden
    step = msgspec.structs.replace(step, content="")
    result = m("result", "tool", tool_call_id="c1")
    answer = m("answer", "assistant")
    line = [U1, step, result, answer]
    items = shown(line, branch_of(line, None))
    assert [(s.message.content, s.parent_id) for s in items] == [("u1", None), ("answer", U1.id)]


def test_where_a_send_goes() -> None:
    plain = start_of(TREE[:4], None)
    assert (list(plain.branch), plain.parent, plain.branched) == (TREE[:4], None, False)
    on_head = start_of(TREE, A2B.id)
    assert names(on_head.branch) == ["u1", "a1", "u2b", "a2b"]
    assert (on_head.parent, on_head.branched) == (A2B.id, True)
    edit = start_of(TREE, A2B.id, edit_of=U2.id)
    assert (names(edit.branch), edit.parent, edit.branched) == (["u1", "a1"], A1.id, True)
    first = start_of(TREE, None, edit_of=U1.id)
    assert (list(first.branch), first.parent) == ([], None)
    again = start_of(TREE, A2B.id, regenerate=True)
    assert (names(again.branch), again.parent) == (["u1", "a1", "u2b"], U2B.id)


def test_what_cannot_branch() -> None:
    with pytest.raises(InvalidInput) as wrong:
        start_of(TREE, None, edit_of=A1.id)
    assert wrong.value.field == "message_id"
    with pytest.raises(NotFound):
        start_of(TREE, None, edit_of=uuid.uuid4())
    with pytest.raises(Conflict) as nothing:
        start_of([], None, regenerate=True)
    assert nothing.value.code == "NO_MESSAGE"
    for kind in ({"edit_of": U2.id}, {"regenerate": True}):
        with pytest.raises(Conflict) as many:
            start_of(TREE, None, multiplayer=True, **kind)
        assert many.value.code == "THREAD_NOT_BRANCHABLE"
    # a plain send to a multiplayer thread goes on as ever
    assert not start_of(TREE[:4], None, multiplayer=True).branched


def test_pending_client_calls_count_only_on_the_branch_that_made_them() -> None:
    call = ToolCall(id="c1", name="pick", arguments={})
    asked = m("asked", "assistant", tool_calls=(call,))
    assert pending_on([U1, asked], (call,)) == (call,)
    assert pending_on([U1, A1], (call,)) == ()
    assert pending_on([], (call,)) == ()
    assert pending_on([U1, asked], ()) == ()


# --- through the turn ---------------------------------------------------------------


def branches_of(w: Any) -> Branches:
    threads = Threads(w.storage.threads, w.storage.agents, w.storage.conversations, w.clock)
    return Branches(threads, w.storage.threads, w.store, w.clock)


def user_texts(request: Any) -> list[str]:
    return [x.content for x in request.messages if x.role == "user"]


async def five_turns(w: Any) -> list[UUID]:
    """Five user messages, each answered: their ids."""
    for i in range(1, 6):
        events = await read_all(
            await w.conversation.post(WHO, w.thread.id, SendInput(content=f"q{i}"))
        )
        assert isinstance(events[-1], Done)
    return [x.id for x in await w.messages() if x.role == "user"]


async def test_an_edit_answers_on_a_new_branch_and_the_model_sees_only_it() -> None:
    model = Script(says("answer"))
    w = await world(model)
    users = await five_turns(w)
    events = await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="q2 again", edit_of=users[1]))
    )
    assert isinstance(events[-1], Done)
    assert events[-1].ok
    assert user_texts(model.requests[-1]) == ["q1", "q2 again"]
    branches = branches_of(w)
    current, total = await branches.history(WHO, w.thread.id, offset=0, limit=50, branch=None)
    assert [s.message.content for s in current] == ["q1", "answer", "q2 again", "answer"]
    assert total == 4
    assert (current[2].sibling_index, current[2].sibling_count) == (2, 2)
    old_leaf = current[2].prev_sibling_id
    assert old_leaf == users[1]
    old, old_total = await branches.history(
        WHO, w.thread.id, offset=0, limit=50, branch=(await w.messages())[9].id
    )
    assert [s.message.content for s in old][::2] == ["q1", "q2", "q3", "q4", "q5"]
    assert old_total == 10
    # a send goes on from the new branch
    await read_all(await w.conversation.post(WHO, w.thread.id, SendInput(content="q3 new")))
    assert user_texts(model.requests[-1]) == ["q1", "q2 again", "q3 new"]
    thread = await w.storage.threads.get(ORG, w.thread.id)
    stored = await w.messages()
    assert thread.head_id == stored[-1].id
    assert stored[-1].parent_id == stored[-2].id  # messages name their parents now


async def test_a_regenerate_answers_the_last_user_message_again() -> None:
    model = Script(says("first"), says("second"))
    w = await world(model)
    await read_all(await w.conversation.post(WHO, w.thread.id, SendInput(content="hello")))
    events = await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="", regenerate=True))
    )
    assert "".join(e.delta for e in events if isinstance(e, Token)) == "second"
    assert user_texts(model.requests[-1]) == ["hello"]
    assert [x.role for x in model.requests[-1].messages] == ["user"]
    stored = await w.messages()
    assert [(x.role, x.content) for x in stored] == [
        ("user", "hello"),
        ("assistant", "first"),
        ("assistant", "second"),
    ]
    assert stored[2].parent_id == stored[0].id
    branches = branches_of(w)
    current, _ = await branches.history(WHO, w.thread.id, offset=0, limit=50, branch=None)
    assert [(s.message.content, s.sibling_index, s.sibling_count) for s in current] == [
        ("hello", 1, 1),
        ("second", 2, 2),
    ]


async def test_a_switch_makes_another_branch_current_for_the_next_send() -> None:
    model = Script(says("answer"))
    w = await world(model)
    users = await five_turns(w)
    await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="q2b", edit_of=users[1]))
    )
    branches = branches_of(w)
    thread = await branches.switch(WHO, w.thread.id, users[1])  # the old q2: its leaf
    old_leaf = [x for x in await w.messages() if x.role == "assistant"][4]
    assert thread.head_id == old_leaf.id
    await read_all(await w.conversation.post(WHO, w.thread.id, SendInput(content="q6")))
    assert user_texts(model.requests[-1]) == ["q1", "q2", "q3", "q4", "q5", "q6"]


async def test_a_fork_copies_a_branch_into_a_new_thread_as_one_line() -> None:
    model = Script(says("answer"))
    w = await world(model)
    users = await five_turns(w)
    branches = branches_of(w)
    forked = await branches.fork(WHO, w.thread.id, users[2])  # up to q3
    assert forked.id != w.thread.id
    assert forked.agent_id == w.thread.agent_id
    assert forked.head_id is None
    copied = await w.store.thread_messages(ORG, forked.id)
    assert [x.content for x in copied] == ["q1", "answer", "q2", "answer", "q3"]
    assert all(x.parent_id is None and x.run_id is None for x in copied)
    assert not {x.id for x in copied} & {x.id for x in await w.messages()}
    await read_all(await w.conversation.post(WHO, forked.id, SendInput(content="q4 there")))
    assert user_texts(model.requests[-1]) == ["q1", "q2", "q3", "q4 there"]


async def test_a_switch_while_a_reply_runs_is_thread_busy() -> None:
    w = await world(Script([*says("x")[:1], HANG]))
    first = await w.conversation.post(WHO, w.thread.id, SendInput(content="hi"))
    branches = branches_of(w)
    await w.model.waiting.wait()
    with pytest.raises(ThreadBusy):
        await branches.switch(WHO, w.thread.id, (await w.messages())[0].id)
    await w.conversation.stop(WHO, w.thread.id)
    await read_all(first)


def test_a_first_message_stored_after_others_has_no_parent() -> None:
    # an edit of the first message: chained names the thread, read as no parent
    again = chained([m("u1 again"), m("a again", "assistant")], None)
    assert again[0].parent_id == THREAD
    tree = [*TREE, *again]
    up = parents(tree)
    assert up[again[0].id] is None
    assert up[again[1].id] == again[0].id
    assert names(branch_of(tree, again[1].id)) == ["u1 again", "a again"]
    items = shown(tree, branch_of(tree, again[1].id))
    assert (items[0].sibling_index, items[0].sibling_count) == (2, 2)


def test_calls_still_wait_after_the_results_of_their_steps_other_calls() -> None:
    c1, c2 = (
        ToolCall(id="c1", name="srv", arguments={}),
        ToolCall(id="c2", name="pick", arguments={}),
    )
    step = m("step", "assistant", tool_calls=(c1, c2))
    result = m("r1", "tool", tool_call_id="c1")
    assert pending_on([U1, step, result], (c2,)) == (c2,)
    assert pending_on([U1, step], (c2,)) == (c2,)
    assert pending_on([result], (c2,)) == ()


def test_a_fork_leaves_out_a_last_step_whose_calls_wait() -> None:
    c1, c2 = (
        ToolCall(id="c1", name="srv", arguments={}),
        ToolCall(id="c2", name="pick", arguments={}),
    )
    step = m("step", "assistant", tool_calls=(c1, c2))
    r1, r2 = m("r1", "tool", tool_call_id="c1"), m("r2", "tool", tool_call_id="c2")
    assert settled([U1, step, r1]) == [U1]
    assert settled([U1, step]) == [U1]
    assert settled([U1, step, r1, r2]) == [U1, step, r1, r2]  # answered: the model goes on
    assert settled([U1, A1]) == [U1, A1]
    assert settled([]) == []


async def test_an_edit_of_the_first_message_starts_a_branch_of_its_own() -> None:
    model = Script(says("answer"))
    w = await world(model)
    users = await five_turns(w)
    await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="q1b", edit_of=users[0]))
    )
    assert user_texts(model.requests[-1]) == ["q1b"]
    await read_all(await w.conversation.post(WHO, w.thread.id, SendInput(content="next")))
    assert user_texts(model.requests[-1]) == ["q1b", "next"]
    current, _ = await branches_of(w).history(WHO, w.thread.id, offset=0, limit=50, branch=None)
    assert [s.message.content for s in current] == ["q1b", "answer", "next", "answer"]
    assert (current[0].sibling_index, current[0].sibling_count, current[0].parent_id) == (
        2,
        2,
        None,
    )


# --- what the mutants showed untested -------------------------------------------------


def test_the_refusals_say_why() -> None:
    with pytest.raises(NotFound) as gone:
        branch_of(TREE, uuid.uuid4())
    assert gone.value.detail == "message not found in this thread"
    with pytest.raises(NotFound) as leaf:
        latest_leaf(TREE, uuid.uuid4())
    assert leaf.value.detail == "message not found in this thread"
    with pytest.raises(NotFound) as edit:
        start_of(TREE, None, edit_of=uuid.uuid4())
    assert edit.value.detail == "message not found in this thread"
    with pytest.raises(Conflict) as nothing:
        start_of([A1], None, regenerate=True)  # a branch without a user message
    assert nothing.value.detail == "the thread has no user message to answer again"
    with pytest.raises(InvalidInput) as wrong:
        start_of(TREE, None, edit_of=A1.id)
    assert wrong.value.problem == "only a user message can be edited"
    with pytest.raises(Conflict) as many:
        start_of(TREE, None, edit_of=U1.id, multiplayer=True)
    assert "one line" in many.value.detail


def test_a_head_with_an_empty_branch_and_a_plain_send() -> None:
    start = start_of([U1], U1.id)
    assert (names(start.branch), start.parent, start.branched) == (["u1"], U1.id, True)


def test_the_versions_in_the_middle_name_both_neighbours() -> None:
    u2c = m("u2c", parent=A1)
    tree = [*TREE, u2c]
    items = shown(tree, branch_of(tree, U2B.id))
    middle = items[2]
    assert (middle.sibling_index, middle.sibling_count) == (2, 3)
    assert (middle.prev_sibling_id, middle.next_sibling_id) == (U2.id, u2c.id)
    first = shown(tree, branch_of(tree, U2.id))[2]
    assert (first.prev_sibling_id, first.next_sibling_id) == (None, U2B.id)


def test_pending_calls_of_a_step_made_before_the_last() -> None:
    call = ToolCall(id="c1", name="pick", arguments={})
    asked = m("asked", "assistant", tool_calls=(call,))
    assert pending_on([asked, U1], (call,)) == ()  # not the branch's last step


async def test_the_history_of_one_line_pages_with_each_parent() -> None:
    w = await world(Script(says("answer")))
    await five_turns(w)
    b = branches_of(w)
    page, total = await b.history(WHO, w.thread.id, offset=3, limit=3, branch=None)
    assert total == 10
    every = await w.messages()
    assert [s.message.id for s in page] == [x.id for x in every[3:6]]
    assert [s.parent_id for s in page] == [x.id for x in every[2:5]]
    assert all((s.sibling_index, s.sibling_count) == (1, 1) for s in page)
    assert all(s.prev_sibling_id is None and s.next_sibling_id is None for s in page)
    first, _ = await b.history(WHO, w.thread.id, offset=0, limit=2, branch=None)
    assert [s.parent_id for s in first] == [None, every[0].id]
    last, _ = await b.history(WHO, w.thread.id, offset=10, limit=5, branch=None)
    assert last == []
    # a branch named on a thread of one line: the branch up to that message
    up_to, n = await b.history(WHO, w.thread.id, offset=0, limit=50, branch=every[3].id)
    assert ([s.message.id for s in up_to], n) == ([x.id for x in every[:4]], 4)
    for bad in (-1, 1_000_000_001):
        with pytest.raises(InvalidInput) as refused:
            await b.history(WHO, w.thread.id, offset=bad, limit=5, branch=None)
        assert refused.value.field == "offset"
    edge, _ = await b.history(WHO, w.thread.id, offset=1_000_000_000, limit=5, branch=None)
    assert edge == []


async def test_the_history_of_a_branched_thread_pages_too() -> None:
    w = await world(Script(says("answer")))
    users = await five_turns(w)
    await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="q5b", edit_of=users[4]))
    )
    page, total = await branches_of(w).history(WHO, w.thread.id, offset=7, limit=2, branch=None)
    assert total == 10
    assert [s.message.content for s in page] == ["answer", "q5b"]


async def test_a_switch_moves_the_head_and_touches_the_thread() -> None:
    w = await world(Script(says("answer")))
    users = await five_turns(w)
    await read_all(
        await w.conversation.post(WHO, w.thread.id, SendInput(content="q2b", edit_of=users[1]))
    )
    w.clock.advance(60)
    thread = await branches_of(w).switch(WHO, w.thread.id, users[1])
    assert thread.updated_at == w.clock.now()
    assert (await w.storage.threads.get(ORG, w.thread.id)).head_id == thread.head_id


async def test_a_multiplayer_thread_does_not_switch() -> None:
    w = await world(Script(says("answer")), thread={"kind": "multiplayer"})
    with pytest.raises(Conflict) as refused:
        await branches_of(w).switch(WHO, w.thread.id, uuid.uuid4())
    assert refused.value.code == "THREAD_NOT_BRANCHABLE"


async def test_a_fork_carries_the_threads_settings_and_a_title() -> None:
    w = await world(
        Script(says("answer")),
        thread={"title": "Trip", "metadata": {"k": "v"}, "system_prompt_overlay": "Be brief."},
    )
    await five_turns(w)
    forked = await branches_of(w).fork(WHO, w.thread.id, None)
    assert forked.title == "Trip (fork)"
    assert forked.metadata == {"k": "v"}
    assert forked.system_prompt_overlay == "Be brief."
    assert forked.kind == "single"
    assert len(await w.store.thread_messages(ORG, forked.id)) == 10
    untitled = await world(Script(says("answer")))
    await five_turns(untitled)
    assert (await branches_of(untitled).fork(WHO, untitled.thread.id, None)).title is None
