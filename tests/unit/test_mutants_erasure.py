"""Erasure (``agentsvc_core.use_cases.erasure``) in the details the first mutation
run (`make mutation SELECTION=erasure`) found untested: what each refusal says and
names, a busy thread's line in the sweep's log, the default wait for a stopped
reply, a user's grants kept apart from another organization's, visitor sessions
counted, a long history exported whole (in as few reads as it needs, and ended when
it shrinks meanwhile) and a thread deleted while its user is exported."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from agentsvc_core.entities import Message
from agentsvc_core.entities.published_chat import VisitorThread
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import SealedRecord
from agentsvc_core.use_cases.erasure import HISTORY_PAGE, Erasure
from agentsvc_core.use_cases.threads import ThreadDraft
from tests.contract.test_conversations_contract import a_message
from tests.unit.test_erasure import ALICE, BOB, KEY, T0, World, world


def _erasure(w: World, **over: Any) -> Erasure:
    """The world's erasure with its defaults (no holders, the default waits) and
    ``over`` in place of its ports."""
    ports: dict[str, Any] = {
        "thread_repo": w.storage.threads,
        "conversations": w.storage.conversations,
        "secrets": w.storage.secrets,
        "publishing": w.storage.publishing,
        "replies": w.stopper,
        "clock": w.clock,
    }
    return Erasure(w.threads, w.storage.erasure, **(ports | over))


async def test_the_refusals_say_why() -> None:
    w = await world(stops=False)
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    shared = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent, kind="multiplayer"))
    await w.threads.add_participant(ALICE, shared.id, "bob", None, "member")
    with pytest.raises(PermissionDenied) as denied:
        await w.erasure.delete_thread(BOB, shared.id)
    assert denied.value.detail == "only the thread's owner or an admin deletes it"
    with pytest.raises(Conflict) as busy:
        await w.erasure.delete_thread(ALICE, mine.id)
    assert busy.value.detail == (
        "the thread's reply did not stop in time; nothing was deleted: try again"
    )
    with pytest.raises(PermissionDenied) as member:
        await w.erasure.erase_user(ALICE, "alice")
    assert member.value.detail == "a user's data is erased and exported by an admin"
    with pytest.raises(InvalidInput) as bad:
        await w.erasure.export_user(KEY, "x" * 1000)
    assert bad.value.field == "user_id"


async def test_a_thread_gone_before_storage_erased_it_is_not_found() -> None:
    """Visible when asked, gone when storage came to erase it (deleted meanwhile)."""
    w = await world()
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    erase = w.storage.erasure.erase_thread

    async def gone_meanwhile(org_id: str, thread_id: UUID, busy_after: object) -> bool:
        await erase(org_id, thread_id, busy_after)  # type: ignore[arg-type]
        return False

    w.storage.erasure.erase_thread = gone_meanwhile  # type: ignore[method-assign]
    with pytest.raises(NotFound) as gone:
        await w.erasure.delete_thread(ALICE, mine.id)
    assert gone.value.detail == "thread not found"


async def test_a_busy_thread_is_logged_by_the_sweep_with_its_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = await world(stops=False)
    busy = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    await w.storage.erasure.set_retention_days("acme", 1)
    w.clock.at = T0 + timedelta(days=2)
    with caplog.at_level(logging.INFO, logger="agentsvc.erasure"):
        assert await w.erasure.sweep() == 0
    assert [r.getMessage() for r in caplog.records if r.name == "agentsvc.erasure"] == [
        f"thread {busy.id} is busy: a later sweep deletes it"
    ]


async def test_a_deletion_waits_ten_seconds_for_the_stopped_reply_by_default() -> None:
    """docs/privacy.md: a reply that does not end within 10 seconds refuses it."""
    w = await world()
    erasure = _erasure(w)
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    await erasure.delete_thread(ALICE, mine.id)
    assert w.stopper.asked == [("acme", mine.id, 10.0)]


async def _grant(w: World, org: str, key: str) -> None:
    sealed = SealedRecord(value="sealed-token", expires_at=T0 + timedelta(days=1))
    await w.storage.secrets.put(org, "oauth_token", key, sealed)


async def test_a_users_grants_in_another_organization_are_not_theirs_here() -> None:
    """User ids are the organization's: another organization's "alice" keeps her
    grant, and it is neither exported nor counted here."""
    w = await world()
    await _grant(w, "acme", "managed:google:user:alice")
    await _grant(w, "other", "managed:github:user:alice")
    doc = await w.erasure.export_user(KEY, "alice")
    assert [g.provider for g in doc.oauth_grants] == ["google"]
    done = await w.erasure.erase_user(KEY, "alice")
    assert done.user_id == "alice"
    assert done.oauth_grants == 1
    left = [k for _, kind, k, _ in await w.storage.secrets.every("other") if kind == "oauth_token"]
    assert left == ["managed:github:user:alice"]


async def test_every_visitor_session_of_the_user_is_counted() -> None:
    w = await world()
    for _ in range(2):
        visited = await w.threads.create(KEY, ThreadDraft(agent_id=w.agent))
        await w.storage.publishing.add_visitor_thread(
            VisitorThread(
                org_id="acme",
                thread_id=visited.id,
                agent_id=w.agent,
                visitor_id="alice",
                identified=True,
                created_at=visited.created_at,
            )
        )
    await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    done = await w.erasure.erase_user(KEY, "alice")
    assert (done.threads, done.visitor_sessions) == (3, 2)


class _Counted:
    """The conversations store, counting history reads; ``shrink`` has the totals
    say that many messages more than the pages hold (deleted while read)."""

    def __init__(self, inner: object, shrink: int = 0) -> None:
        self._inner = inner
        self.reads = 0
        self.shrink = shrink

    async def history(
        self, org_id: str, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        self.reads += 1
        page, total = await self._inner.history(  # type: ignore[attr-defined]
            org_id, thread_id, offset=offset, limit=limit
        )
        return page, total + self.shrink


async def _exported(w: World, messages: int, shrink: int = 0) -> tuple[list[Message], int]:
    thread = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    for i in range(messages):
        await w.storage.conversations.add_message(a_message(thread, content=f"m{i}"))
    counted = _Counted(w.storage.conversations, shrink)
    doc = await _erasure(w, conversations=counted).export_user(KEY, "alice")
    [only] = doc.threads
    return only.messages, counted.reads


@pytest.mark.parametrize(
    ("messages", "reads"),
    [(HISTORY_PAGE - 1, 1), (HISTORY_PAGE, 1), (HISTORY_PAGE + 1, 2), (2 * HISTORY_PAGE + 5, 3)],
)
async def test_a_history_is_exported_whole_in_pages(messages: int, reads: int) -> None:
    w = await world()
    got, made = await _exported(w, messages)
    assert [m.content for m in got] == [f"m{i}" for i in range(messages)]
    assert made == reads


async def test_a_history_that_shrinks_while_it_is_read_still_ends() -> None:
    w = await world()
    got, made = await _exported(w, 3, shrink=2)
    assert [m.content for m in got] == ["m0", "m1", "m2"]
    assert made == 2  # the second page came back empty


async def test_a_thread_deleted_while_its_user_is_exported_is_left_out() -> None:
    w = await world()
    first = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    second = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    get = w.storage.threads.get

    async def first_gone(org_id: str, thread_id: UUID) -> object:
        if thread_id == first.id:
            raise NotFound("thread not found")
        return await get(org_id, thread_id)

    doc = await _erasure(w, thread_repo=_Repo(first_gone)).export_user(KEY, "alice")
    assert [t.thread.id for t in doc.threads] == [second.id]


class _Repo:
    def __init__(self, get: object) -> None:
        self.get = get
