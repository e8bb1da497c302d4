"""Who sees and changes which knowledge documents (docs/knowledge.md): every member
reads the organization's and agents' documents and only admins change them; a
thread's documents belong to the thread, and are listed only when that thread is
asked for, by whoever may see it. Over the memory storage and the test's clock,
with every document present while each question is asked (tests/unit/knowledge_world.py)."""

from __future__ import annotations

import pytest

from agentsvc_core.entities import Principal
from agentsvc_core.errors import NotFound, PermissionDenied
from tests.unit.knowledge_world import ADMIN_CAROL, ALICE, BOB, KEY, ids, library
from tests.unit.knowledge_world import upload as _upload


async def test_scopes_follow_where_a_document_was_added() -> None:
    lib = await library()
    assert (lib.org.scope, lib.org.agent_id, lib.org.thread_id) == ("org", None, None)
    assert (lib.of_agent.scope, lib.of_agent.agent_id) == ("agent", lib.agent)
    assert (lib.alices.scope, lib.alices.agent_id) == ("thread", lib.agent)  # the thread's agent
    assert lib.alices.thread_id == lib.alice_thread
    assert len(lib.jobs.queued) == 5  # each upload queued its indexing


@pytest.mark.parametrize("who", [ALICE, BOB, ADMIN_CAROL], ids=["alice", "bob", "admin-jwt"])
async def test_a_user_lists_no_threads_documents_unless_it_asks_for_its_thread(
    who: Principal,
) -> None:
    """A JWT user, admin or not, acts for itself: the unfiltered list is the
    organization's and agents' documents, not even its own threads'."""
    lib = await library()
    shared = {lib.org.id, lib.of_agent.id}
    assert ids(await lib.knowledge.list_documents(who)) == shared
    assert await lib.knowledge.list_documents(who, scope="thread") == []
    assert ids(await lib.knowledge.list_documents(who, agent_id=lib.agent)) == {lib.of_agent.id}


async def test_a_user_lists_its_own_threads_documents_by_asking_for_it() -> None:
    lib = await library()
    mine = await lib.knowledge.list_documents(ALICE, thread_id=lib.alice_thread)
    assert ids(mine) == {lib.alices.id}
    for who, thread in ((ALICE, lib.bob_thread), (BOB, lib.alice_thread)):
        with pytest.raises(PermissionDenied):
            await lib.knowledge.list_documents(who, thread_id=thread)


async def test_an_api_key_lists_every_document_of_the_organization() -> None:
    lib = await library()
    every = {d.id for d in (lib.org, lib.of_agent, lib.alices, lib.bobs, lib.keys)}
    assert ids(await lib.knowledge.list_documents(KEY)) == every
    assert ids(await lib.knowledge.list_documents(KEY, scope="thread")) == every - {
        lib.org.id,
        lib.of_agent.id,
    }
    other = Principal(org_id="other", method="api_key")
    assert await lib.knowledge.list_documents(other) == []


async def test_a_user_reads_shared_documents_and_its_own_threads_not_anothers() -> None:
    lib = await library()
    for doc in (lib.org, lib.of_agent, lib.alices):
        assert (await lib.knowledge.get(ALICE, doc.id)).id == doc.id
    for doc in (lib.bobs, lib.keys):  # as if it did not exist
        with pytest.raises(NotFound, match=r"^document not found$"):
            await lib.knowledge.get(ALICE, doc.id)
    assert (await lib.knowledge.get(KEY, lib.bobs.id)).id == lib.bobs.id


async def test_only_admins_change_shared_documents_and_users_their_own_threads() -> None:
    lib = await library()
    k = lib.knowledge
    for doc in (lib.org, lib.of_agent):
        with pytest.raises(PermissionDenied):
            await k.delete(ALICE, doc.id)
        with pytest.raises(PermissionDenied):
            await k.reindex(ALICE, doc.id)
    with pytest.raises(PermissionDenied):
        await _upload(k, ALICE, "org.txt")
    with pytest.raises(PermissionDenied):
        await _upload(k, ALICE, "agent.txt", agent_id=lib.agent)
    # another's thread: no upload, and its documents are not found
    with pytest.raises(PermissionDenied):
        await _upload(k, ALICE, "in-bobs.txt", thread_id=lib.bob_thread)
    with pytest.raises(NotFound):
        await k.delete(ALICE, lib.bobs.id)
    # its own thread's: reindexed (a new generation, queued again) and removed
    again = await k.reindex(ALICE, lib.alices.id)
    assert (again.generation, again.status) == (lib.alices.generation + 1, "queued")
    await k.delete(ALICE, lib.alices.id)
    assert ids(await k.list_documents(KEY)) == {
        lib.org.id,
        lib.of_agent.id,
        lib.bobs.id,
        lib.keys.id,
    }
    # an admin JWT changes the shared ones
    await k.delete(ADMIN_CAROL, lib.org.id)
    assert ids(await k.list_documents(ALICE)) == {lib.of_agent.id}
