"""Full-text search on PostgreSQL once the column has statistics: candidates come
from the query's rare words, and the common words fill in when those are too few
(adapters/postgres/knowledge.py). A database of its own, so that the statistics
are this corpus's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from agentsvc_adapters.postgres import PostgresStorage, migrate
from agentsvc_core.entities.knowledge import SearchScope
from agentsvc_core.entities.organization import Organization
from tests.contract.conftest import now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.contract.test_knowledge_contract import a_chunk, a_document
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

ORG = "org-fts"
OTHER = "org-fts-other"


@pytest.fixture(scope="module")
def corpus(pg_admin_url: str) -> Iterator[tuple[str, uuid.UUID, uuid.UUID]]:
    """400 chunks in the organization's document: ``alpha`` in all, ``beta`` in every
    other one, ``yak`` in 25 of those, ``zebra`` in 3; an agent's document and a
    thread's have ``zebra`` too, as has another organization's. Answers the
    database, that agent and that thread."""
    with fresh_database(pg_admin_url) as url:

        async def build() -> tuple[uuid.UUID, uuid.UUID]:
            await migrate(url)
            storage = PostgresStorage(url, min_size=1, max_size=2)
            await storage.open()
            try:
                for org in (ORG, OTHER):
                    await storage.organizations.ensure(Organization(id=org, created_at=now()))
                agent = agent_in(ORG)
                await storage.agents.add(agent)
                thread = await storage.threads.add(a_thread(ORG, agent.id))
                texts = []
                for i in range(400):
                    words = ["alpha", f"filler{i}"]
                    if i % 2 == 0:
                        words.append("beta")
                    if i % 16 == 0:
                        words.append("yak")
                    if i in (7, 77, 177):
                        words.append("zebra")
                    texts.append(" ".join(words))
                for org, scope, owner, chunks in (
                    (ORG, "org", {}, texts),
                    (ORG, "agent", {"agent_id": agent.id}, ["zebra alpha", "zebra alpha beta"]),
                    (ORG, "thread", {"thread_id": thread.id}, ["zebra of the thread"]),
                    (OTHER, "org", {}, ["zebra alpha elsewhere", "alpha beta yak elsewhere"]),
                ):
                    content = uuid.uuid4().bytes
                    doc = a_document(org, content, scope, **owner)  # type: ignore[arg-type]
                    doc = await storage.knowledge.add(doc, content)
                    k = storage.knowledge
                    assert await k.claim(org, doc.id, doc.generation, now()) is not None
                    chunks_ = [a_chunk(n, t) for n, t in enumerate(chunks)]
                    assert await k.finish(org, doc.id, doc.generation, chunks_, None, None, now())
            finally:
                await storage.close()
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("ANALYZE knowledge_chunks")
            return agent.id, thread.id

        agent, thread = asyncio.run(build())
        yield url, agent, thread


def search(
    url: str,
    query: str,
    limit: int,
    agent: uuid.UUID | None = None,
    thread: uuid.UUID | None = None,
) -> list[str]:
    async def go() -> list[str]:
        storage = PostgresStorage(url, min_size=1, max_size=1)
        await storage.open()
        try:
            hits = await storage.knowledge.text_search(
                SearchScope(org_id=ORG, agent_id=agent, thread_id=thread), query, limit
            )
            return [h.text for h in hits]
        finally:
            await storage.close()

    return asyncio.run(go())


def test_the_statistics_call_alpha_and_beta_common(
    corpus: tuple[str, uuid.UUID, uuid.UUID],
) -> None:
    """What the other tests stand on: the column's statistics after ANALYZE."""
    url, _, _ = corpus
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.e FROM pg_stats p,"
            " unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS s(e, f)"
            " WHERE p.tablename = 'knowledge_chunks' AND p.attname = 'search' AND s.f > 0.05"
        ).fetchall()
    common = {r[0] for r in rows}
    assert {"alpha", "beta", "yak"} <= common  # yak: 25 of 402 chunks
    assert "zebra" not in common


def test_rare_words_choose_the_candidates(corpus: tuple[str, uuid.UUID, uuid.UUID]) -> None:
    url, _, _ = corpus
    # ranking every match would put "alpha filler0 beta yak" (three of the words)
    # before the zebra chunks (two): the rare word decides which chunks are ranked
    assert sorted(search(url, "zebra alpha beta yak", 3)) == sorted(
        ["alpha filler7 zebra", "alpha filler77 zebra", "alpha filler177 zebra"]
    )
    hits = search(url, "zebra alpha", 3)
    assert sorted(hits) == sorted(
        ["alpha filler7 zebra", "alpha filler77 zebra", "alpha filler177 zebra"]
    )


def test_common_words_fill_in_when_rare_ones_are_too_few(
    corpus: tuple[str, uuid.UUID, uuid.UUID],
) -> None:
    url, _, _ = corpus
    hits = search(url, "zebra alpha", 6)
    assert len(hits) == 6
    assert {h for h in hits if "zebra" in h} == {
        "alpha filler7 zebra",
        "alpha filler77 zebra",
        "alpha filler177 zebra",
    }
    assert all("zebra" in h for h in hits[:3])  # the rare word ranks first
    # a rare word no chunk has: the common ones answer (every one of them first)
    hits = search(url, "unheardof alpha beta", 5)
    assert len(hits) == 5
    assert all("alpha" in h and "beta" in h for h in hits)


def test_a_query_of_common_words_finds_chunks_with_all_of_them(
    corpus: tuple[str, uuid.UUID, uuid.UUID],
) -> None:
    url, _, _ = corpus
    hits = search(url, "beta yak", 8)
    assert len(hits) == 8
    assert all("beta" in h and "yak" in h for h in hits)
    # fewer chunks than asked have both: those with either come in after them
    hits = search(url, "beta yak", 300)
    assert len(hits) == 200
    assert all("beta" in h for h in hits)
    assert set(hits[:25]) == {h for h in hits if "yak" in h}


def test_the_scope_holds_on_every_path(corpus: tuple[str, uuid.UUID, uuid.UUID]) -> None:
    url, agent, thread = corpus
    assert len(search(url, "zebra", 10)) == 3
    assert set(search(url, "zebra", 10, agent)) == {
        "alpha filler7 zebra",
        "alpha filler77 zebra",
        "alpha filler177 zebra",
        "zebra alpha",
        "zebra alpha beta",
    }
    assert len(search(url, "unheardof alpha", 1000)) == 400  # common words: in scope only
    assert len(search(url, "unheardof alpha", 1000, agent)) == 402
    # the thread's document in the thread's scope; another organization's never
    assert "zebra of the thread" not in search(url, "zebra", 10, agent)
    assert "zebra of the thread" in search(url, "zebra", 10, agent, thread)
    for query in ("zebra", "elsewhere", "alpha beta yak", "unheardof alpha"):
        assert not [h for h in search(url, query, 1000, agent, thread) if "elsewhere" in h]
