"""Knowledge documents (docs/knowledge.md): upload, list, chunks, delete and reindex
over ``/api/knowledge``, the background indexing job, and the hybrid search that
``knowledge_search`` (``use_cases/knowledge/tools.py``) and the operators' debug
search use.

An upload is stored with its file and answered at once (``queued``); a job
(``knowledge.index``, on the job queue) parses the file, cuts it into chunks that
follow its headings (``use_cases/knowledge/chunking.py``), asks the embedding provider for
their vectors when one is configured and the storage keeps vectors, and stores
them in one transaction (``ready``), or records why it could not (``failed``).
The job is idempotent: it names the document's generation, and finds nothing to
do once that generation is indexed or replaced by a reindex. A worker killed
mid-job leaves the job to be picked again; a document whose indexing was started
``MAX_ATTEMPTS`` times without ending fails with a readable error instead of
looping, and the sweep enqueues again any indexing whose job was lost.

Search is PostgreSQL full text always and, with vectors, also the nearest
vectors to the query's; the two rankings are merged by reciprocal-rank fusion
(k = 60: a chunk's score is the sum over the rankings of 1 / (60 + its rank)).

Who may do what: every member reads the organization's and agents' documents;
admins add and remove them. A thread's documents belong to the thread: whoever
may see the thread adds, reads and removes them (a JWT user their own threads).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.knowledge import (
    ChunkHit,
    DocumentChunk,
    DocumentScope,
    DocumentStatus,
    KnowledgeChunk,
    KnowledgeDocument,
    SearchScope,
)
from agentsvc_core.errors import (
    DomainError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    TooLarge,
    UnsupportedMedia,
    Upstream,
)
from agentsvc_core.ports import AgentRepository, Clock
from agentsvc_core.ports.documents import DocumentError, DocumentParser
from agentsvc_core.ports.embeddings import Embedder
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.ports.jobs import JobQueue
from agentsvc_core.ports.knowledge import DocumentFilter, KnowledgeStore
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.knowledge.chunking import chunk, search_text
from agentsvc_core.use_cases.threads import Threads

__all__ = [
    "INDEX_JOB",
    "MAX_ATTEMPTS",
    "MAX_CHUNK_PAGE",
    "MAX_QUERY",
    "MAX_TOP_K",
    "ChunkPage",
    "Knowledge",
    "KnowledgeLimits",
    "Search",
    "SearchResult",
]

log = logging.getLogger("agentsvc.knowledge")

INDEX_JOB = "knowledge.index"
MAX_ATTEMPTS = 3  # indexings of one generation started before it fails
MAX_TITLE = 200
MAX_QUERY = 1000
MAX_TOP_K = 20
MAX_CHUNK_PAGE = 200  # chunks of a document listed at once
RRF_K = 60
_CANDIDATES = 20  # each ranking's depth before the fusion
_PENDING_AFTER = timedelta(seconds=60)  # queued/processing this long: enqueue again
_EMBED_BATCH = 256  # chunks handed to the embedder at once (it batches its requests)


class KnowledgeLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_bytes: int = 20 * 1024 * 1024  # an uploaded file (AGENTSVC_KNOWLEDGE_MAX_BYTES)
    max_chunks: int = 20_000  # a document cut into more fails (a 10,000-page file, say)
    target_tokens: int = 600
    max_tokens: int = 800
    overlap: float = 0.15


class _IndexJob(msgspec.Struct, frozen=True):
    org: str
    document: UUID
    generation: int


class SearchResult(msgspec.Struct, frozen=True, kw_only=True):
    hit: ChunkHit
    text_rank: int | None = None  # 1-based rank in the full-text ranking
    vector_rank: int | None = None


class ChunkPage(msgspec.Struct, frozen=True, kw_only=True):
    document: KnowledgeDocument
    chunks: list[DocumentChunk]
    next_offset: int | None  # the ordinal the next page starts at; None: the last page


class Search(msgspec.Struct, frozen=True, kw_only=True):
    mode: Literal["hybrid", "full_text"]
    results: tuple[SearchResult, ...]


def fuse(rankings: Sequence[Sequence[ChunkHit]], k: int = RRF_K) -> list[tuple[ChunkHit, float]]:
    """Reciprocal-rank fusion of rankings (each best first): a chunk's score is
    the sum of 1 / (k + rank) over the rankings it is in. Ties keep first-seen order."""
    scores: dict[UUID, float] = {}
    first: dict[UUID, ChunkHit] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (k + rank)
            first.setdefault(hit.chunk_id, hit)
    order = sorted(scores, key=lambda cid: -scores[cid])
    return [(first[cid], scores[cid]) for cid in order]


class Knowledge:
    def __init__(
        self,
        store: KnowledgeStore,
        agents: AgentRepository,
        threads: Threads,
        jobs: JobQueue,
        parser: DocumentParser,
        clock: Clock,
        *,
        embedder: Embedder | None = None,
        limits: KnowledgeLimits | None = None,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told when a document is indexed or fails (event webhooks)."""
        self._store = store
        self._events = events or NoEvents()
        self._agents = agents
        self._threads = threads
        self._jobs = jobs
        self._parser = parser
        self._clock = clock
        self._embedder = embedder
        self.limits = limits or KnowledgeLimits()
        # org -> how many documents changed in this process: knowledge_search's
        # cache of who has documents (KnowledgeTools) starts afresh when it moves
        self.changes: dict[str, int] = {}

    @property
    def hybrid(self) -> bool:
        """Whether searches use vectors too (an embedder, and storage that keeps them)."""
        return self._embedder is not None and self._store.vectors

    def _changed(self, org_id: str) -> None:
        self.changes[org_id] = self.changes.get(org_id, 0) + 1

    # -- HTTP ---------------------------------------------------------------

    async def upload(
        self,
        who: Principal,
        *,
        filename: str,
        data: bytes,
        mime_type: str | None,
        title: str | None = None,
        agent_id: UUID | None = None,
        thread_id: UUID | None = None,
    ) -> tuple[KnowledgeDocument, bool]:
        """Store a file and queue its indexing; answers the document and whether it
        is new (False: the scope already had this very file, answered as it is)."""
        if agent_id is not None and thread_id is not None:
            raise InvalidInput("threadId", "give agentId or threadId, not both")
        filename = check_text("file", filename or "upload", max_len=255, required=True)
        if title is not None:
            title = check_text("title", title, max_len=MAX_TITLE, required=True).strip()
        if len(data) > self.limits.max_bytes:
            raise TooLarge(f"the file is larger than {self.limits.max_bytes} bytes")
        if not data:
            raise InvalidInput("file", "must not be empty")
        kind = self._parser.kind(filename=filename, mime_type=mime_type, head=data[:512])
        if kind is None:
            raise UnsupportedMedia(
                "file: the type is not supported (text, Markdown, HTML and PDF are)"
            )
        scope: DocumentScope = "org"
        owner_agent = agent_id
        if thread_id is not None:
            thread = await self._threads.visible(who, thread_id)
            scope, owner_agent = "thread", thread.agent_id
        else:
            if not who.is_admin:
                raise PermissionDenied(
                    "documents of the organization and its agents are added by admins"
                )
            if agent_id is not None:
                await self._agents.get(who.org_id, agent_id)
                scope = "agent"
        now = self._clock.now()
        document = KnowledgeDocument(
            id=uuid.uuid4(),
            org_id=who.org_id,
            title=title or filename,
            source_ref=filename,
            mime_type=kind,
            bytes=len(data),
            content_hash=hashlib.sha256(data).hexdigest(),
            scope=scope,
            agent_id=owner_agent,
            thread_id=thread_id,
            created_at=now,
            updated_at=now,
        )
        stored = await self._store.add(document, data)
        if stored.id != document.id:
            return stored, False
        await self._enqueue(stored.org_id, stored.id, stored.generation)
        self._changed(who.org_id)
        return stored, True

    async def _index_job(self, org_id: str, document_id: UUID, generation: int) -> bool:
        """Queue the indexing of this generation; False when its job waits or runs."""
        return await self._jobs.enqueue(
            INDEX_JOB,
            msgspec.json.encode(_IndexJob(org_id, document_id, generation)),
            key=f"knowledge:{org_id}:{document_id}:{generation}",
        )

    async def _enqueue(self, org_id: str, document_id: UUID, generation: int) -> None:
        try:
            await self._index_job(org_id, document_id, generation)
        except DomainError as exc:
            # stored and ``queued``: the sweep enqueues it again
            log.warning("could not queue the indexing of %s: %s", document_id, exc.detail)

    async def _readable(self, who: Principal, document: KnowledgeDocument) -> KnowledgeDocument:
        """The document if ``who`` may see it, else 404 (as another organization's)."""
        if document.thread_id is not None and not who.acts_for_org:
            try:
                await self._threads.visible(who, document.thread_id)
            except (NotFound, PermissionDenied):
                raise NotFound("document not found") from None
        return document

    async def _writable(self, who: Principal, document_id: UUID) -> KnowledgeDocument:
        document = await self._readable(who, await self._store.get(who.org_id, document_id))
        if document.scope != "thread" and not who.is_admin:
            raise PermissionDenied(
                "documents of the organization and its agents are changed by admins"
            )
        return document

    async def get(self, who: Principal, document_id: UUID) -> KnowledgeDocument:
        return await self._readable(who, await self._store.get(who.org_id, document_id))

    async def chunks(self, who: Principal, document_id: UUID, offset: int, limit: int) -> ChunkPage:
        """How the document was cut, in order: none while its first indexing runs,
        the previous ones while a reindex runs (search still finds those)."""
        if offset < 0:
            raise InvalidInput("offset", "must be 0 or more")
        if not 1 <= limit <= MAX_CHUNK_PAGE:
            raise InvalidInput("limit", f"must be between 1 and {MAX_CHUNK_PAGE}")
        document = await self.get(who, document_id)
        found = await self._store.chunks(who.org_id, document_id, offset, limit + 1)
        more = len(found) > limit
        return ChunkPage(
            document=document, chunks=found[:limit], next_offset=offset + limit if more else None
        )

    async def list_documents(
        self,
        who: Principal,
        *,
        scope: DocumentScope | None = None,
        agent_id: UUID | None = None,
        thread_id: UUID | None = None,
        status: DocumentStatus | None = None,
    ) -> list[KnowledgeDocument]:
        """Newest first. A caller that does not act for the organization sees the
        organization's and agents' documents, and a thread's when it asks for that
        thread (and may see it)."""
        if thread_id is not None and not who.acts_for_org:
            await self._threads.visible(who, thread_id)
        where = DocumentFilter(scope=scope, agent_id=agent_id, thread_id=thread_id, status=status)
        found = await self._store.list_all(who.org_id, where)
        if who.acts_for_org or thread_id is not None:
            return found
        return [d for d in found if d.scope != "thread"]

    async def delete(self, who: Principal, document_id: UUID) -> None:
        await self._writable(who, document_id)
        await self._store.delete(who.org_id, document_id)
        self._changed(who.org_id)

    async def reindex(self, who: Principal, document_id: UUID) -> KnowledgeDocument:
        await self._writable(who, document_id)
        document = await self._store.reindex(who.org_id, document_id, self._clock.now())
        await self._enqueue(document.org_id, document.id, document.generation)
        return document

    async def search_for(
        self,
        who: Principal,
        query: str,
        *,
        top_k: int = 5,
        agent_id: UUID | None = None,
        thread_id: UUID | None = None,
    ) -> Search:
        """The debug search: what ``knowledge_search`` would find for that agent
        and thread (admins, or who may see the thread)."""
        if thread_id is not None:
            thread = await self._threads.visible(who, thread_id)
            if agent_id is not None and agent_id != thread.agent_id:
                raise InvalidInput("agentId", "is not the thread's agent")
            agent_id = thread.agent_id
        elif not who.is_admin:
            raise PermissionDenied("the search of the organization's documents is for admins")
        elif agent_id is not None:
            await self._agents.get(who.org_id, agent_id)
        scope = SearchScope(org_id=who.org_id, agent_id=agent_id, thread_id=thread_id)
        return await self.search(scope, query, top_k=top_k)

    # -- the search ------------------------------------------------------------

    async def search(self, scope: SearchScope, query: str, *, top_k: int = 5) -> Search:
        check_text("query", query, max_len=MAX_QUERY, required=True)
        if not 1 <= top_k <= MAX_TOP_K:
            raise InvalidInput("topK", f"must be between 1 and {MAX_TOP_K}")
        by_text = await self._store.text_search(scope, query, _CANDIDATES)
        by_vector: list[ChunkHit] = []
        mode: Literal["hybrid", "full_text"] = "full_text"
        if self._embedder is not None and self._store.vectors:
            mode = "hybrid"
            try:
                (vector,) = await self._embedder.embed([query])
            except Upstream as exc:
                # full text still answers; the provider's trouble goes to the log
                log.warning("knowledge search without vectors: %s", exc.detail)
            else:
                by_vector = await self._store.vector_search(
                    scope, vector, self._embedder.model, _CANDIDATES
                )
        text_rank = {h.chunk_id: i for i, h in enumerate(by_text, start=1)}
        vector_rank = {h.chunk_id: i for i, h in enumerate(by_vector, start=1)}
        results = tuple(
            SearchResult(
                hit=msgspec.structs.replace(hit, score=round(score, 6)),
                text_rank=text_rank.get(hit.chunk_id),
                vector_rank=vector_rank.get(hit.chunk_id),
            )
            for hit, score in fuse([by_text, by_vector])[:top_k]
        )
        return Search(mode=mode, results=results)

    async def offered(self, org_id: str) -> tuple[bool, frozenset[UUID], frozenset[UUID]]:
        """Who has searchable documents (``KnowledgeStore.has_documents``)."""
        return await self._store.has_documents(org_id)

    # -- the job -----------------------------------------------------------------

    async def index(self, payload: bytes) -> None:
        """The ``knowledge.index`` job: idempotent (see the module's docstring)."""
        job = msgspec.json.decode(payload, type=_IndexJob)
        claimed = await self._store.claim(job.org, job.document, job.generation, self._clock.now())
        if claimed is None:
            return
        document, data = claimed
        if document.attempts > MAX_ATTEMPTS:
            await self._fail(
                job,
                f"indexing was started {MAX_ATTEMPTS} times and never finished (the worker"
                " stopped each time: a file too large for its memory?)",
            )
            return
        try:
            parsed = await asyncio.to_thread(
                self._parser.parse, data, filename=document.source_ref, mime_type=document.mime_type
            )
        except DocumentError as exc:
            await self._fail(job, exc.detail)
            return
        limits = self.limits
        pieces = chunk(
            parsed,
            target_tokens=limits.target_tokens,
            max_tokens=limits.max_tokens,
            overlap=limits.overlap,
        )
        if not pieces:
            await self._fail(job, "the document has no text to index")
            return
        if len(pieces) > limits.max_chunks:
            await self._fail(
                job,
                f"the document makes {len(pieces)} chunks, more than the"
                f" {limits.max_chunks} a document may have",
            )
            return
        chunks = [
            KnowledgeChunk(
                id=uuid.uuid4(),
                ordinal=p.ordinal,
                text=p.text,
                search_text=search_text(p),
                headings=p.headings,
                page=p.page,
                start=p.start,
                end=p.end,
            )
            for p in pieces
        ]
        vectors, model, note = await self._vectors(chunks)
        done = await self._store.finish(
            job.org,
            job.document,
            job.generation,
            chunks,
            vectors,
            model,
            self._clock.now(),
            note=note,
        )
        if done:
            self._changed(job.org)
            await self._tell(job, "knowledge.document.ready", "ready", None)

    async def _tell(self, job: _IndexJob, type_: str, status: str, error: str | None) -> None:
        data = {"document_id": str(job.document), "status": status, "error": error}
        key = f"{job.document}:{job.generation}"
        await self._events.publish(job.org, type_, data, key=key)

    async def _vectors(
        self, chunks: Sequence[KnowledgeChunk]
    ) -> tuple[list[Sequence[float]] | None, str | None, str | None]:
        """The chunks' vectors, when there is an embedder and storage for them.
        A provider failure leaves the document searchable by full text, with a
        note saying so (a reindex tries again)."""
        if self._embedder is None or not self._store.vectors:
            return None, None, None
        vectors: list[Sequence[float]] = []
        try:
            for at in range(0, len(chunks), _EMBED_BATCH):
                part = chunks[at : at + _EMBED_BATCH]
                vectors.extend(await self._embedder.embed([c.search_text for c in part]))
        except Upstream as exc:
            return (
                None,
                None,
                f"indexed for full-text search only: the embedding provider failed"
                f" ({exc.detail}); reindex to try again",
            )
        return vectors, self._embedder.model, None

    async def _fail(self, job: _IndexJob, error: str) -> None:
        if await self._store.fail(job.org, job.document, job.generation, error, self._clock.now()):
            await self._tell(job, "knowledge.document.failed", "failed", error)

    async def resume(self, limit: int = 100) -> int:
        """The sweep's: enqueue again the indexings that have been queued or running
        for a while (deduplicated: a job still waiting or running is not doubled).
        Answers how many were enqueued again."""
        pending = await self._store.pending(self._clock.now() - _PENDING_AFTER, limit)
        again = 0
        for p in pending:
            if await self._index_job(p.org_id, p.document_id, p.generation):
                again += 1
        return again
