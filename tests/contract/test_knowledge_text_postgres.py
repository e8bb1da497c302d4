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
from tests.contract.test_knowledge_contract import a_chunk, a_document
from tests.pg import fresh_database

pytestmark = pytest.mark.postgres

ORG = "org-fts"


@pytest.fixture(scope="module")
def corpus(pg_admin_url: str) -> Iterator[tuple[str, uuid.UUID]]:
    """400 chunks in the organization's document: ``alpha`` in all, ``beta`` in every
    other one, ``yak`` in 25 of those, ``zebra`` in 3; an agent's document has
    ``zebra`` too. Answers the database and that agent."""
    with fresh_database(pg_admin_url) as url:

        async def build() -> uuid.UUID:
            await migrate(url)
            storage = PostgresStorage(url, min_size=1, max_size=2)
            await storage.open()
            try:
                await storage.organizations.ensure(Organization(id=ORG, created_at=now()))
                agent = agent_in(ORG)
                await storage.agents.add(agent)
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
                for scope, owner, chunks in (
                    ("org", None, texts),
                    ("agent", agent.id, ["zebra alpha", "zebra alpha beta"]),
                ):
                    content = uuid.uuid4().bytes
                    doc = a_document(ORG, content, scope, owner)  # type: ignore[arg-type]
                    doc = await storage.knowledge.add(doc, content)
                    k = storage.knowledge
                    assert await k.claim(ORG, doc.id, doc.generation, now()) is not None
                    chunks_ = [a_chunk(n, t) for n, t in enumerate(chunks)]
                    assert await k.finish(ORG, doc.id, doc.generation, chunks_, None, None, now())
            finally:
                await storage.close()
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute("ANALYZE knowledge_chunks")
            return agent.id

        agent = asyncio.run(build())
        yield url, agent


def search(url: str, query: str, limit: int, agent: uuid.UUID | None = None) -> list[str]:
    async def go() -> list[str]:
        storage = PostgresStorage(url, min_size=1, max_size=1)
        await storage.open()
        try:
            hits = await storage.knowledge.text_search(
                SearchScope(org_id=ORG, agent_id=agent), query, limit
            )
            return [h.text for h in hits]
        finally:
            await storage.close()

    return asyncio.run(go())


def test_the_statistics_call_alpha_and_beta_common(corpus: tuple[str, uuid.UUID]) -> None:
    """What the other tests stand on: the column's statistics after ANALYZE."""
    url, _ = corpus
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.e FROM pg_stats p,"
            " unnest(p.most_common_elems::text::text[], p.most_common_elem_freqs) AS s(e, f)"
            " WHERE p.tablename = 'knowledge_chunks' AND p.attname = 'search' AND s.f > 0.05"
        ).fetchall()
    common = {r[0] for r in rows}
    assert {"alpha", "beta", "yak"} <= common  # yak: 25 of 402 chunks
    assert "zebra" not in common


def test_rare_words_choose_the_candidates(corpus: tuple[str, uuid.UUID]) -> None:
    url, _ = corpus
    hits = search(url, "zebra alpha", 3)
    assert sorted(hits) == sorted(
        ["alpha filler7 zebra", "alpha filler77 zebra", "alpha filler177 zebra"]
    )


def test_common_words_fill_in_when_rare_ones_are_too_few(corpus: tuple[str, uuid.UUID]) -> None:
    url, _ = corpus
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
    corpus: tuple[str, uuid.UUID],
) -> None:
    url, _ = corpus
    hits = search(url, "beta yak", 8)
    assert len(hits) == 8
    assert all("beta" in h and "yak" in h for h in hits)
    # fewer chunks than asked have both: those with either come in after them
    hits = search(url, "beta yak", 300)
    assert len(hits) == 200
    assert all("beta" in h for h in hits)
    assert set(hits[:25]) == {h for h in hits if "yak" in h}


def test_the_scope_holds_on_every_path(corpus: tuple[str, uuid.UUID]) -> None:
    url, agent = corpus
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
