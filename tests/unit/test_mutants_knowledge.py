"""Knowledge documents as their users see them (use_cases/knowledge/documents.py): what an
upload keeps and refuses, the indexing job and its limits, the sweep, and the
search's rankings, over the memory storage and the test's clock
(tests/unit/knowledge_world.py). Written for ``agentsvc_core.use_cases.knowledge.documents``,
whose mutants only the web suite reached (docs/development.md)."""

from __future__ import annotations

import hashlib
import logging
import uuid
from typing import Any, cast

import msgspec
import pytest

from agentsvc_adapters.memory.knowledge import MemoryKnowledge
from agentsvc_core.entities.knowledge import ChunkHit, SearchScope
from agentsvc_core.errors import (
    InvalidInput,
    NotFound,
    PermissionDenied,
    TooLarge,
    UnsupportedMedia,
)
from agentsvc_core.ports.documents import ParsedDocument, Section
from agentsvc_core.use_cases.knowledge.chunking import chunk, search_text
from agentsvc_core.use_cases.knowledge.documents import INDEX_JOB, KnowledgeLimits, Search, fuse
from tests.fakes.embeddings import HashingEmbedder
from tests.unit.knowledge_world import (
    ADMIN_CAROL,
    ALICE,
    BOB,
    KEY,
    FailingEmbedder,
    Parses,
    ids,
    library,
    upload,
)

ORG = SearchScope(org_id="acme")


def documents(found: Search) -> set[uuid.UUID]:
    return {r.hit.document_id for r in found.results}


# --- uploads ----------------------------------------------------------------------


async def test_an_upload_names_an_agent_or_a_thread_not_both() -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.upload(
            KEY,
            filename="x.txt",
            data=b"x",
            mime_type="text/plain",
            agent_id=lib.agent,
            thread_id=lib.key_thread,
        )
    assert (refused.value.field, refused.value.problem) == (
        "threadId",
        "give agentId or threadId, not both",
    )


async def test_an_upload_keeps_its_file_facts_and_queues_its_indexing() -> None:
    lib = await library()
    lib.clock.advance(30)
    data = b"# Guide\n\nZebras are striped."
    doc, created = await lib.knowledge.upload(
        KEY, filename="guide.md", data=data, mime_type=None, title="  The guide  "
    )
    assert created
    assert (doc.title, doc.source_ref, doc.mime_type, doc.bytes) == (
        "The guide",
        "guide.md",
        "text/markdown",
        len(data),
    )
    assert doc.content_hash == hashlib.sha256(data).hexdigest()
    assert doc.created_at == doc.updated_at == lib.clock.now()
    assert (doc.org_id, doc.scope, doc.status, doc.generation) == ("acme", "org", "queued", 1)
    assert await lib.stored(doc) == doc
    kind, payload, key = lib.jobs.queued[-1]
    assert kind == INDEX_JOB == "knowledge.index"
    assert msgspec.json.decode(payload) == {
        "org": "acme",
        "document": str(doc.id),
        "generation": 1,
    }
    assert key == f"knowledge:acme:{doc.id}:1"


async def test_a_title_defaults_to_the_file_name_and_a_nameless_file_is_upload() -> None:
    lib = await library()
    assert (lib.org.title, lib.org.source_ref) == ("org.txt", "org.txt")
    nameless, _ = await lib.knowledge.upload(
        KEY, filename="", data=b"plain words", mime_type="text/plain"
    )
    assert (nameless.title, nameless.source_ref) == ("upload", "upload")


@pytest.mark.parametrize(
    ("filename", "problem"),
    [
        ("a" * 252 + ".txt", "must be at most 255 characters"),
        ("   ", "must not be empty"),
        ("a\x00.txt", "must not contain NUL characters"),
    ],
)
async def test_a_file_name_is_1_to_255_characters(filename: str, problem: str) -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.upload(KEY, filename=filename, data=b"x", mime_type="text/plain")
    assert (refused.value.field, refused.value.problem) == ("file", problem)
    longest = "a" * 251 + ".txt"
    doc, _ = await lib.knowledge.upload(KEY, filename=longest, data=b"x", mime_type="text/plain")
    assert doc.source_ref == longest


@pytest.mark.parametrize(
    ("title", "problem"),
    [("t" * 201, "must be at most 200 characters"), (" ", "must not be empty")],
)
async def test_a_title_is_1_to_200_characters(title: str, problem: str) -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.upload(
            KEY, filename="x.txt", data=b"x", mime_type="text/plain", title=title
        )
    assert (refused.value.field, refused.value.problem) == ("title", problem)
    doc, _ = await lib.knowledge.upload(
        KEY, filename="x.txt", data=b"x", mime_type="text/plain", title="t" * 200
    )
    assert doc.title == "t" * 200


async def test_a_file_may_be_exactly_the_size_limit_not_a_byte_more() -> None:
    lib = await library(limits=KnowledgeLimits(max_bytes=20))
    doc, _ = await lib.knowledge.upload(
        KEY, filename="x.txt", data=b"y" * 20, mime_type="text/plain"
    )
    assert doc.bytes == 20
    with pytest.raises(TooLarge, match=r"^the file is larger than 20 bytes$"):
        await lib.knowledge.upload(KEY, filename="x.txt", data=b"z" * 21, mime_type="text/plain")
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.upload(KEY, filename="x.txt", data=b"", mime_type="text/plain")
    assert (refused.value.field, refused.value.problem) == ("file", "must not be empty")


async def test_the_type_is_the_mime_types_else_the_names_else_the_first_512_bytes() -> None:
    lib = await library()
    by_mime, _ = await lib.knowledge.upload(
        KEY, filename="notes", data=b"# Notes", mime_type="text/markdown"
    )
    assert by_mime.mime_type == "text/markdown"
    # a PDF header that ends within the first 512 bytes is sniffed; one later is not
    within, _ = await lib.knowledge.upload(
        KEY, filename="blob", data=b" " * 507 + b"%PDF-1.7", mime_type=None
    )
    assert within.mime_type == "application/pdf"
    with pytest.raises(
        UnsupportedMedia,
        match=r"^file: the type is not supported \(text, Markdown, HTML and PDF are\)$",
    ):
        await lib.knowledge.upload(
            KEY, filename="blob", data=b" " * 508 + b"%PDF-1.7", mime_type=None
        )


async def test_an_admin_adds_a_document_only_to_an_agent_that_exists() -> None:
    lib = await library()
    with pytest.raises(NotFound, match=r"^agent not found$"):
        await upload(lib.knowledge, ADMIN_CAROL, "lost.txt", agent_id=uuid.uuid4())
    with pytest.raises(
        PermissionDenied,
        match=r"^documents of the organization and its agents are added by admins$",
    ):
        await upload(lib.knowledge, ALICE, "mine.txt")


async def test_the_same_file_twice_in_one_scope_is_answered_as_stored_and_not_queued() -> None:
    lib = await library()
    queued = len(lib.jobs.queued)
    assert lib.knowledge.changes == {"acme": 5}  # one per upload
    again, created = await lib.knowledge.upload(
        KEY, filename="copy.txt", data=b"org.txt zebra", mime_type="text/plain"
    )
    assert (again, created) == (lib.org, False)
    assert len(lib.jobs.queued) == queued
    assert lib.knowledge.changes == {"acme": 5}
    # the same bytes in another scope are a document of their own
    other, created = await lib.knowledge.upload(
        KEY, filename="copy.txt", data=b"org.txt zebra", mime_type="text/plain", agent_id=lib.agent
    )
    assert created
    assert other.id != lib.org.id
    assert lib.knowledge.changes == {"acme": 6}


async def test_an_upload_the_queue_refuses_stays_queued_for_the_sweep() -> None:
    lib = await library()
    lib.jobs.down = True
    late = await upload(lib.knowledge, KEY, "late.txt")
    again = await lib.knowledge.reindex(KEY, lib.org.id)
    assert (await lib.stored(late)).status == again.status == "queued"
    lib.jobs.down = False
    lib.jobs.queued.clear()  # the earlier jobs were lost too
    lib.clock.advance(61)
    assert await lib.knowledge.resume() == 6
    keys = {key for _, _, key in lib.jobs.queued}
    assert f"knowledge:acme:{late.id}:1" in keys
    assert f"knowledge:acme:{lib.org.id}:2" in keys


# --- who reads and changes which -----------------------------------------------------


async def test_an_admin_user_cannot_reach_another_users_thread_documents() -> None:
    lib = await library()
    k = lib.knowledge
    for change in (k.get, k.delete, k.reindex):
        with pytest.raises(NotFound, match=r"^document not found$"):
            await change(ADMIN_CAROL, lib.alices.id)
    await k.delete(KEY, lib.bobs.id)  # a key acts for the organization
    with pytest.raises(NotFound):
        await k.get(KEY, lib.bobs.id)


async def test_a_member_is_told_that_admins_change_shared_documents() -> None:
    lib = await library()
    for change in (lib.knowledge.delete, lib.knowledge.reindex):
        with pytest.raises(
            PermissionDenied,
            match=r"^documents of the organization and its agents are changed by admins$",
        ):
            await change(ALICE, lib.of_agent.id)


async def test_deleting_counts_as_a_change_and_reindexing_does_not() -> None:
    lib = await library()
    await lib.knowledge.reindex(KEY, lib.org.id)
    assert lib.knowledge.changes == {"acme": 5}
    await lib.knowledge.delete(ALICE, lib.alices.id)
    assert lib.knowledge.changes == {"acme": 6}


async def test_a_reindex_is_a_new_generation_queued_under_its_own_key() -> None:
    lib = await library()
    first = lib.job(lib.org)
    lib.clock.advance(5)
    again = await lib.knowledge.reindex(KEY, lib.org.id)
    assert (again.generation, again.status, again.updated_at) == (2, "queued", lib.clock.now())
    assert lib.jobs.queued[-1][2] == f"knowledge:acme:{lib.org.id}:2"
    # the first generation's job finds nothing to do
    await lib.knowledge.index(first)
    stored = await lib.stored(lib.org)
    assert (stored.status, stored.generation, stored.attempts) == ("queued", 2, 0)


async def test_the_list_filters_by_status() -> None:
    lib = await library()
    await lib.knowledge.index(lib.job(lib.org))
    assert ids(await lib.knowledge.list_documents(KEY, status="ready")) == {lib.org.id}
    queued = await lib.knowledge.list_documents(KEY, status="queued")
    assert ids(queued) == {lib.of_agent.id, lib.alices.id, lib.bobs.id, lib.keys.id}


# --- the indexing job ----------------------------------------------------------------


async def test_indexing_makes_documents_ready_and_counts_as_a_change() -> None:
    lib = await library()
    lib.clock.advance(7)
    assert await lib.index_queued() == 5
    doc = await lib.stored(lib.org)
    assert (doc.status, doc.error, doc.chunk_count, doc.attempts, doc.embedding_model) == (
        "ready",
        None,
        1,
        1,
        None,
    )
    assert doc.indexed_at == doc.updated_at == lib.clock.now()
    assert lib.knowledge.changes == {"acme": 10}  # five uploads, five indexings
    assert lib.events.types() == ["knowledge.document.ready"] * 5
    ready = next(e for e in lib.events.events if e.data["document_id"] == str(lib.org.id))
    assert ready.data == {"document_id": str(lib.org.id), "status": "ready", "error": None}
    assert (ready.org_id, ready.key) == ("acme", f"{lib.org.id}:1")  # one per generation


@pytest.mark.parametrize(("stopped", "status"), [(2, "ready"), (3, "failed")])
async def test_an_indexing_started_three_times_without_ending_fails_readably(
    stopped: int, status: str
) -> None:
    lib = await library()
    for _ in range(stopped):  # a worker stopped mid-job, each time
        assert await lib.storage.knowledge.claim("acme", lib.org.id, 1, lib.clock.now())
    lib.clock.advance(12)
    await lib.knowledge.index(lib.job(lib.org))
    doc = await lib.stored(lib.org)
    assert (doc.status, doc.updated_at) == (status, lib.clock.now())
    if status == "failed":
        assert doc.error == (
            "indexing was started 3 times and never finished (the worker stopped each"
            " time: a file too large for its memory?)"
        )
        assert doc.chunk_count == 0


async def test_a_file_that_cannot_be_read_fails_with_the_parsers_words() -> None:
    lib = await library()
    bad, _ = await lib.knowledge.upload(
        KEY, filename="latin1.txt", data="café".encode("latin-1"), mime_type="text/plain"
    )
    await lib.knowledge.index(lib.job(bad))
    failed = await lib.stored(bad)
    assert failed.status == "failed"
    assert failed.error == "the file is not valid UTF-8 text (save it as UTF-8 and upload it again)"
    [event] = lib.events.events
    assert event.type == "knowledge.document.failed"
    assert event.data == {"document_id": str(bad.id), "status": "failed", "error": failed.error}
    await lib.knowledge.index(lib.job(bad))  # a failed document's job again: nothing new
    assert len(lib.events.events) == 1


async def test_a_worker_stopped_mid_job_leaves_it_for_the_sweep_a_minute_later() -> None:
    class Stopped(Exception):
        pass

    class Crashing(Parses):
        def parse(self, data: bytes, *, filename: str, mime_type: str | None) -> ParsedDocument:
            raise Stopped

    never = ParsedDocument(title=None, text="x", sections=(Section((), "x", 0),))
    lib = await library(parser=Crashing(never))
    job = lib.job(lib.org)
    lib.jobs.queued.clear()  # the first jobs were lost
    lib.clock.advance(30)
    with pytest.raises(Stopped):
        await lib.knowledge.index(job)
    assert (await lib.stored(lib.org)).status == "processing"
    lib.clock.advance(59)  # 89 s after the uploads, 59 after the claim
    assert await lib.knowledge.resume() == 4
    lib.clock.advance(2)
    assert await lib.knowledge.resume() == 1
    assert lib.jobs.queued[-1][1] == job


async def test_a_file_typed_by_its_mime_type_is_parsed_as_that_type() -> None:
    lib = await library()
    doc, _ = await lib.knowledge.upload(
        KEY, filename="notes", data=b"# Giraffes\n\nTall animals.", mime_type="text/markdown"
    )
    await lib.knowledge.index(lib.job(doc))
    assert (await lib.stored(doc)).status == "ready"
    found = await lib.knowledge.search(ORG, "giraffes")
    assert [r.hit.headings for r in found.results] == [("Giraffes",)]


async def test_a_search_gives_five_results_unless_asked_otherwise() -> None:
    lib = await library()
    for n in range(5):
        await upload(lib.knowledge, KEY, f"more{n}.txt")
    await lib.index_queued()
    assert len((await lib.knowledge.search(ORG, "zebra")).results) == 5
    assert len((await lib.knowledge.search_for(KEY, "zebra")).results) == 5
    assert len((await lib.knowledge.search(ORG, "zebra", top_k=6)).results) == 6


async def test_an_upload_the_queue_refuses_and_a_failed_query_vector_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lib = await library(embedder=FailingEmbedder())
    lib.jobs.down = True
    with caplog.at_level(logging.WARNING, logger="agentsvc.knowledge"):
        late = await upload(lib.knowledge, KEY, "late.txt")
        await lib.knowledge.search(ORG, "zebra")
    assert [r.getMessage() for r in caplog.records] == [
        f"could not queue the indexing of {late.id}: the job queue is down",
        "knowledge search without vectors: the embeddings provider answered HTTP 503",
    ]


async def test_a_document_without_text_fails() -> None:
    blank = ParsedDocument(title=None, text="  \n ", sections=(Section(("H",), "  \n ", 0),))
    lib = await library(parser=Parses(blank))
    await lib.knowledge.index(lib.job(lib.org))
    failed = await lib.stored(lib.org)
    assert (failed.status, failed.error) == ("failed", "the document has no text to index")
    assert lib.knowledge.changes == {"acme": 5}


@pytest.mark.parametrize(
    ("text", "status", "error"),
    [
        ("aaaa bbbb", "ready", None),
        (
            "aaaa bbbb cccc",
            "failed",
            "the document makes 3 chunks, more than the 2 a document may have",
        ),
    ],
)
async def test_a_document_may_make_as_many_chunks_as_the_limit_not_more(
    text: str, status: str, error: str | None
) -> None:
    # chunks of at most 8 characters: these make 2 and 3
    lib = await library(
        limits=KnowledgeLimits(max_chunks=2, target_tokens=2, max_tokens=2, overlap=0.0)
    )
    doc = await upload(lib.knowledge, KEY, "x.txt", text=text)
    await lib.knowledge.index(lib.job(doc))
    stored = await lib.stored(doc)
    assert (stored.status, stored.error) == (status, error)
    assert stored.chunk_count == (2 if status == "ready" else 0)


async def test_chunks_are_cut_with_the_configured_sizes_and_keep_their_place() -> None:
    text = (
        "Zebras graze on the open plains. They live in herds for safety. "
        "Their stripes confuse the flies that bite them."
    )
    parsed = ParsedDocument(
        title=None, text=text, sections=(Section(("Animals", "Zebras"), text, 0, 3),)
    )
    sizes = {"target_tokens": 5, "max_tokens": 9, "overlap": 0.5}
    lib = await library(parser=Parses(parsed), limits=KnowledgeLimits(**sizes))  # type: ignore[arg-type]
    await lib.knowledge.index(lib.job(lib.org))
    expected = chunk(parsed, **sizes)  # type: ignore[arg-type]
    assert len(expected) > 3
    assert expected != chunk(parsed)
    kept = cast("MemoryKnowledge", lib.storage.knowledge)._chunks[("acme", lib.org.id)]
    assert [(c.ordinal, c.text, c.headings, c.page, c.start, c.end) for c in kept] == [
        (p.ordinal, p.text, p.headings, p.page, p.start, p.end) for p in expected
    ]
    assert [c.search_text for c in kept] == [search_text(p) for p in expected]
    assert len({c.id for c in kept}) == len(kept)
    # the heading path is searched too: "Animals" is in no chunk's text
    found = await lib.knowledge.search(ORG, "animals", top_k=20)
    assert len(found.results) == len(expected)
    assert {r.hit.page for r in found.results} == {3}


async def test_an_embedder_gets_the_chunks_in_batches_of_256_and_its_model_is_kept() -> None:
    embedder = HashingEmbedder()
    lib = await library(embedder=embedder, limits=KnowledgeLimits(target_tokens=1, max_tokens=1))
    await lib.index_queued()
    embedder.calls.clear()
    doc = await upload(lib.knowledge, KEY, "ox.txt", text=" ".join(["ox"] * 300))
    await lib.knowledge.index(lib.job(doc))
    assert [len(texts) for texts in embedder.calls] == [256, 44]
    assert embedder.calls[0][0] == "ox"
    ready = await lib.stored(doc)
    assert (ready.status, ready.chunk_count, ready.embedding_model) == (
        "ready",
        300,
        "hashing-test",
    )
    found = await lib.knowledge.search(ORG, "ox", top_k=1)
    assert found.mode == "hybrid"
    assert (found.results[0].text_rank, found.results[0].vector_rank) == (1, 1)


async def test_a_failing_embedder_leaves_full_text_search_and_a_note() -> None:
    lib = await library(embedder=FailingEmbedder())
    await lib.index_queued()
    doc = await lib.stored(lib.org)
    assert (doc.status, doc.chunk_count, doc.embedding_model) == ("ready", 1, None)
    assert doc.error == (
        "indexed for full-text search only: the embedding provider failed"
        " (the embeddings provider answered HTTP 503); reindex to try again"
    )
    found = await lib.knowledge.search(ORG, "zebra")
    assert found.mode == "hybrid"  # it tried
    assert [(r.hit.document_id, r.text_rank, r.vector_rank) for r in found.results] == [
        (lib.org.id, 1, None)
    ]


async def test_storage_without_vectors_searches_full_text_and_asks_no_embedder() -> None:
    embedder = HashingEmbedder()
    lib = await library(embedder=embedder, vectors=False)
    assert not lib.knowledge.hybrid
    await lib.index_queued()
    assert (await lib.stored(lib.org)).embedding_model is None
    found = await lib.knowledge.search(ORG, "zebra")
    assert (found.mode, embedder.calls) == ("full_text", [])
    assert (await library(embedder=embedder)).knowledge.hybrid
    assert not (await library()).knowledge.hybrid


# --- the sweep -----------------------------------------------------------------------


async def test_the_sweep_queues_again_what_waited_over_a_minute_once_each() -> None:
    lib = await library()
    lib.jobs.queued.clear()  # their jobs were lost
    lib.clock.advance(60)
    assert await lib.knowledge.resume() == 0  # a minute exactly: not yet
    lib.clock.advance(1)
    assert await lib.knowledge.resume() == 5
    assert await lib.knowledge.resume() == 0  # their jobs wait now: not doubled
    every = (lib.org, lib.of_agent, lib.alices, lib.bobs, lib.keys)
    assert sorted(key or "" for _, _, key in lib.jobs.queued) == sorted(
        f"knowledge:acme:{d.id}:1" for d in every
    )
    await lib.index_queued()
    assert {(await lib.stored(d)).status for d in every} == {"ready"}


async def test_the_sweep_takes_at_most_100_at_a_time() -> None:
    lib = await library()
    for n in range(96):
        await upload(lib.knowledge, KEY, f"n{n}.txt")
    lib.jobs.queued.clear()
    lib.clock.advance(61)
    assert await lib.knowledge.resume() == 100


# --- the search ----------------------------------------------------------------------


@pytest.mark.parametrize("top_k", [0, 21])
async def test_a_search_gives_1_to_20_results(top_k: int) -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.search(ORG, "zebra", top_k=top_k)
    assert (refused.value.field, refused.value.problem) == ("topK", "must be between 1 and 20")
    for fine in (1, 20):
        await lib.knowledge.search(ORG, "zebra", top_k=fine)


@pytest.mark.parametrize(
    ("query", "problem"),
    [("", "must not be empty"), ("q" * 1001, "must be at most 1000 characters")],
)
async def test_a_query_is_1_to_1000_characters(query: str, problem: str) -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.search(ORG, query)
    assert (refused.value.field, refused.value.problem) == ("query", problem)
    await lib.index_queued()
    found = await lib.knowledge.search(ORG, "zebra " + "q" * 994)
    assert documents(found) == {lib.org.id}


async def test_full_text_results_carry_their_rank_and_the_fused_score() -> None:
    lib = await library()
    await lib.index_queued()
    scope = SearchScope(org_id="acme", agent_id=lib.agent, thread_id=lib.alice_thread)
    found = await lib.knowledge.search(scope, "zebra")
    assert found.mode == "full_text"
    assert documents(found) == {lib.org.id, lib.of_agent.id, lib.alices.id}
    assert [(r.text_rank, r.vector_rank) for r in found.results] == [
        (1, None),
        (2, None),
        (3, None),
    ]
    # 1 / (60 + rank), to six places
    assert [r.hit.score for r in found.results] == [0.016393, 0.016129, 0.015873]
    assert len((await lib.knowledge.search(scope, "zebra", top_k=2)).results) == 2


async def test_a_hybrid_search_sums_both_rankings_for_a_chunk_in_both() -> None:
    embedder = HashingEmbedder()
    lib = await library(embedder=embedder)
    await lib.index_queued()
    embedder.calls.clear()
    found = await lib.knowledge.search(ORG, "org zebra")
    assert embedder.calls == [["org zebra"]]
    assert found.mode == "hybrid"
    [only] = found.results
    assert (only.hit.document_id, only.text_rank, only.vector_rank) == (lib.org.id, 1, 1)
    assert only.hit.score == 0.032787  # 2 / 61


async def test_each_ranking_is_20_deep_before_the_fusion() -> None:
    embedder = HashingEmbedder(dimensions=4096)
    lib = await library(embedder=embedder)
    # 19 documents with every word of the query (and much besides), one with two of
    # them (and more besides), and one with only "lion": by text that one is 21st,
    # by vector it is first and the one with two words is last
    strong = [
        await upload(
            lib.knowledge,
            KEY,
            f"s{n}.txt",
            text=f"lion tiger bear s{n} w1 w2 w3 w4 w5 w6",
        )
        for n in range(19)
    ]
    weak = await upload(
        lib.knowledge, KEY, "weak.txt", text="lion tiger " + " ".join(f"x{n}" for n in range(20))
    )
    lone = await upload(lib.knowledge, KEY, "lone.txt", text="lion")
    await lib.index_queued()
    found = await lib.knowledge.search(ORG, "lion tiger bear", top_k=20)
    ranks = {r.hit.document_id: (r.text_rank, r.vector_rank) for r in found.results}
    assert ranks[lone.id] == (None, 1)
    assert weak.id not in ranks  # 20th by text and 21st by vector: scores less than lone
    assert all(ranks[s.id][0] is not None and ranks[s.id][1] is not None for s in strong)


def _hit(name: str, score: float = 0.0) -> ChunkHit:
    return ChunkHit(
        chunk_id=uuid.uuid5(uuid.NAMESPACE_URL, name),
        document_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
        title=name,
        ordinal=0,
        text=f"{name} at {score}",
        score=score,
    )


def test_fusion_sums_one_over_60_plus_the_rank_and_keeps_the_first_hit_seen() -> None:
    a, b, c = _hit("a", 0.5), _hit("b", 0.4), _hit("c", 0.3)
    b_again = _hit("b", 0.9)
    fused = fuse([[a, b], [b_again, c]])
    assert [(hit.title, hit.text, round(score, 9)) for hit, score in fused] == [
        ("b", "b at 0.4", round(1 / 62 + 1 / 61, 9)),
        ("a", "a at 0.5", round(1 / 61, 9)),
        ("c", "c at 0.3", round(1 / 62, 9)),
    ]
    # ties keep the order first seen
    assert [hit.title for hit, _ in fuse([[c], [a]])] == ["c", "a"]
    assert fuse([[a]], k=1) == [(a, 0.5)]


# --- the debug search ------------------------------------------------------------


async def test_the_debug_search_of_a_thread_is_for_who_may_see_it_with_its_agent() -> None:
    lib = await library()
    await lib.index_queued()
    k = lib.knowledge
    expected = {lib.org.id, lib.of_agent.id, lib.alices.id}
    assert documents(await k.search_for(ALICE, "zebra", thread_id=lib.alice_thread)) == expected
    named = await k.search_for(ALICE, "zebra", thread_id=lib.alice_thread, agent_id=lib.agent)
    assert documents(named) == expected
    with pytest.raises(InvalidInput) as refused:
        await k.search_for(ALICE, "zebra", thread_id=lib.alice_thread, agent_id=uuid.uuid4())
    assert (refused.value.field, refused.value.problem) == ("agentId", "is not the thread's agent")
    with pytest.raises(PermissionDenied):
        await k.search_for(BOB, "zebra", thread_id=lib.alice_thread)
    top = await k.search_for(ALICE, "zebra", thread_id=lib.alice_thread, top_k=1)
    assert len(top.results) == 1


async def test_the_debug_search_of_the_organization_and_its_agents_is_for_admins() -> None:
    lib = await library()
    await lib.index_queued()
    k = lib.knowledge
    with pytest.raises(
        PermissionDenied, match=r"^the search of the organization's documents is for admins$"
    ):
        await k.search_for(ALICE, "zebra")
    assert documents(await k.search_for(ADMIN_CAROL, "zebra")) == {lib.org.id}
    of_agent = await k.search_for(ADMIN_CAROL, "zebra", agent_id=lib.agent)
    assert documents(of_agent) == {lib.org.id, lib.of_agent.id}
    with pytest.raises(NotFound, match=r"^agent not found$"):
        await k.search_for(ADMIN_CAROL, "zebra", agent_id=uuid.uuid4())
    assert len((await k.search_for(KEY, "zebra", agent_id=lib.agent, top_k=1)).results) == 1


async def test_who_has_documents_is_the_ready_ones_by_scope() -> None:
    lib = await library()
    assert await lib.knowledge.offered("acme") == (False, frozenset(), frozenset())
    await lib.index_queued()
    assert await lib.knowledge.offered("acme") == (
        True,
        frozenset({lib.agent}),
        frozenset({lib.alice_thread, lib.bob_thread, lib.key_thread}),
    )


# --- a document's chunks --------------------------------------------------------------


async def test_a_documents_chunks_come_in_pages_by_ordinal_with_the_next_offset() -> None:
    text = " ".join(f"Zebra fact number {n} is here." for n in range(40))
    parsed = ParsedDocument(title=None, text=text, sections=(Section(("Zebras",), text, 0, 2),))
    sizes = {"target_tokens": 10, "max_tokens": 15, "overlap": 0.0}
    lib = await library(parser=Parses(parsed), limits=KnowledgeLimits(**sizes))  # type: ignore[arg-type]
    queued = await lib.knowledge.chunks(KEY, lib.org.id, 0, 10)
    assert (queued.document, queued.chunks, queued.next_offset) == (lib.org, [], None)
    await lib.knowledge.index(lib.job(lib.org))
    kept = cast("MemoryKnowledge", lib.storage.knowledge)._chunks[("acme", lib.org.id)]
    assert len(kept) > 5
    whole = await lib.knowledge.chunks(KEY, lib.org.id, 0, 200)
    assert whole.document == await lib.stored(lib.org)
    assert whole.document.status == "ready"
    assert [
        (c.id, c.ordinal, c.text, c.headings, c.page, c.start, c.end) for c in whole.chunks
    ] == [(c.id, c.ordinal, c.text, c.headings, c.page, c.start, c.end) for c in kept]
    assert whole.next_offset is None
    first = await lib.knowledge.chunks(KEY, lib.org.id, 0, 2)
    assert ([c.ordinal for c in first.chunks], first.next_offset) == ([0, 1], 2)
    then = await lib.knowledge.chunks(KEY, lib.org.id, 2, 3)
    assert ([c.ordinal for c in then.chunks], then.next_offset) == ([2, 3, 4], 5)
    # a page that ends exactly at the last chunk is the last page
    n = len(kept)
    last = await lib.knowledge.chunks(KEY, lib.org.id, n - 2, 2)
    assert ([c.ordinal for c in last.chunks], last.next_offset) == ([n - 2, n - 1], None)
    one_short = await lib.knowledge.chunks(KEY, lib.org.id, n - 3, 2)
    assert one_short.next_offset == n - 1
    assert (await lib.knowledge.chunks(KEY, lib.org.id, n, 2)).chunks == []
    # a page reads its chunks and one more (whether another page follows), not the rest
    store = cast("MemoryKnowledge", lib.storage.knowledge)
    read: list[int] = []
    real = store.chunks

    async def counted(org_id: str, document_id: uuid.UUID, offset: int, limit: int) -> Any:
        found = await real(org_id, document_id, offset, limit)
        read.append(len(found))
        return found

    store.chunks = counted  # type: ignore[method-assign]
    await lib.knowledge.chunks(KEY, lib.org.id, 1, 2)
    assert read == [3]


@pytest.mark.parametrize(
    ("offset", "limit", "field", "problem"),
    [
        (-1, 10, "offset", "must be 0 or more"),
        (0, 0, "limit", "must be between 1 and 200"),
        (0, 201, "limit", "must be between 1 and 200"),
    ],
)
async def test_a_chunk_page_is_1_to_200_from_offset_0_or_more(
    offset: int, limit: int, field: str, problem: str
) -> None:
    lib = await library()
    with pytest.raises(InvalidInput) as refused:
        await lib.knowledge.chunks(KEY, lib.org.id, offset, limit)
    assert (refused.value.field, refused.value.problem) == (field, problem)
    assert (await lib.knowledge.chunks(KEY, lib.org.id, 0, 1)).chunks == []
    assert (await lib.knowledge.chunks(KEY, lib.org.id, 0, 200)).next_offset is None


async def test_a_documents_chunks_are_for_who_may_read_it() -> None:
    lib = await library()
    await lib.index_queued()
    assert len((await lib.knowledge.chunks(ALICE, lib.org.id, 0, 10)).chunks) == 1
    assert len((await lib.knowledge.chunks(ALICE, lib.alices.id, 0, 10)).chunks) == 1
    assert len((await lib.knowledge.chunks(KEY, lib.bobs.id, 0, 10)).chunks) == 1
    for who, doc in ((ALICE, lib.bobs), (ADMIN_CAROL, lib.keys)):
        with pytest.raises(NotFound):
            await lib.knowledge.chunks(who, doc.id, 0, 10)
    with pytest.raises(NotFound):
        await lib.knowledge.chunks(KEY, uuid.uuid4(), 0, 10)
