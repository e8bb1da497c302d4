"""A thread's history as a tree (use_cases/branches.py), as the storages keep it:
each message's parent, the thread's head moved by a turn's writes and by a
modify, every message in the order stored, and a fork's copy."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from tests.contract.conftest import Backend, now
from tests.contract.test_conversations_contract import a_message, a_run, stored_thread


def test_parents_and_the_head_are_kept_by_both_writes_of_a_turn(backend: Backend) -> None:
    t = stored_thread(backend)
    assert t.head_id is None  # one line until an edit or a regenerate
    store = backend.storage.conversations
    first = a_message(t, content="q1")
    earlier = a_run(t, status="completed")
    backend.run(store.begin_turn, earlier, [first], now() - timedelta(seconds=45))
    assert backend.run(store.thread_messages, t.org_id, t.id)[0].parent_id is None
    run = a_run(t)
    edited = a_message(t, content="q1 again", parent_id=None)
    backend.run(
        lambda: store.begin_turn(run, [edited], now() - timedelta(seconds=45), head=edited.id)
    )
    assert backend.run(backend.storage.threads.get, t.org_id, t.id).head_id == edited.id
    answer = a_message(t, "assistant", "a", parent_id=edited.id, run_id=run.id)
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    backend.run(lambda: store.finish_turn(done, [answer], [], head=answer.id))
    thread = backend.run(backend.storage.threads.get, t.org_id, t.id)
    assert thread.head_id == answer.id
    every = backend.run(store.thread_messages, t.org_id, t.id)
    assert [(m.content, m.parent_id) for m in every] == [
        ("q1", None),
        ("q1 again", None),
        ("a", edited.id),
    ]
    # without a head, neither write touches it
    later = a_run(t)
    backend.run(store.begin_turn, later, [], now() - timedelta(seconds=45))
    backend.run(store.finish_turn, msgspec.structs.replace(later, status="completed"), [], [])
    assert backend.run(backend.storage.threads.get, t.org_id, t.id).head_id == answer.id


def test_a_modify_moves_the_head(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations
    one, two = a_message(t, content="1"), a_message(t, content="2")
    backend.run(store.begin_turn, a_run(t), [one, two], now() - timedelta(seconds=45))
    got = backend.run(
        backend.storage.threads.modify,
        t.org_id,
        t.id,
        lambda x: msgspec.structs.replace(x, head_id=one.id),
    )
    assert got.head_id == one.id
    assert backend.run(backend.storage.threads.get, t.org_id, t.id).head_id == one.id


def test_a_fork_copies_the_named_messages_in_order_as_one_line(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations
    msgs = [a_message(t, "user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(6)]
    msgs[3] = msgspec.structs.replace(msgs[3], parent_id=msgs[2].id)
    backend.run(store.begin_turn, a_run(t), msgs, now() - timedelta(seconds=45))
    other = stored_thread(backend, org_id=t.org_id, agent_id=t.agent_id)
    wanted = [msgs[3].id, msgs[0].id, msgs[1].id]  # any order: the stored one is kept
    count = backend.run(store.copy_messages, t.org_id, t.id, wanted, other.id)
    assert count == 3
    copied = backend.run(store.thread_messages, t.org_id, other.id)
    assert [m.content for m in copied] == ["m0", "m1", "m3"]
    assert all(m.parent_id is None and m.run_id is None for m in copied)
    assert all(m.thread_id == other.id for m in copied)
    assert not {m.id for m in copied} & {m.id for m in msgs}
    assert [m.created_at for m in copied] == [
        msgs[0].created_at,
        msgs[1].created_at,
        msgs[3].created_at,
    ]
    page, total = backend.run(lambda: store.history(t.org_id, other.id, offset=0, limit=10))
    assert total == 3
    assert [m.content for m in page] == ["m0", "m1", "m3"]
    # the source is untouched; ids of another thread or organization copy nothing
    assert len(backend.run(store.thread_messages, t.org_id, t.id)) == 6
    elsewhere = stored_thread(backend)
    assert backend.run(store.copy_messages, elsewhere.org_id, t.id, wanted, elsewhere.id) == 0
