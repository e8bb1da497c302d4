"""Knowledge in memory. Methods do not await between reads and writes, so the
event loop runs each whole. The text search scores a chunk by the share of the
query's words among its words (PostgreSQL ranks by ``ts_rank_cd``); the vector
search is exact cosine similarity over every vector of the scope."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

import msgspec

from agentsvc_core.entities.knowledge import (
    ChunkHit,
    DocumentChunk,
    KnowledgeChunk,
    KnowledgeDocument,
    SearchScope,
)
from agentsvc_core.entities.memory import words
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.knowledge import DocumentFilter, KnowledgeStore, Pending


def _sees(scope: SearchScope, d: KnowledgeDocument) -> bool:
    return (
        d.scope == "org"
        or (d.scope == "agent" and d.agent_id == scope.agent_id)
        or (d.scope == "thread" and d.thread_id == scope.thread_id)
    )


def _hit(d: KnowledgeDocument, c: KnowledgeChunk, score: float) -> ChunkHit:
    return ChunkHit(
        chunk_id=c.id,
        document_id=d.id,
        title=d.title,
        ordinal=c.ordinal,
        text=c.text,
        headings=c.headings,
        page=c.page,
        score=score,
    )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class MemoryKnowledge(KnowledgeStore):
    def __init__(
        self,
        agent_exists: Callable[[str, UUID], bool],
        thread_exists: Callable[[str, UUID], bool],
    ) -> None:
        self._agent_exists = agent_exists  # PostgreSQL's foreign keys
        self._thread_exists = thread_exists
        self._docs: dict[tuple[str, UUID], KnowledgeDocument] = {}
        self._files: dict[tuple[str, UUID], bytes] = {}
        self._chunks: dict[tuple[str, UUID], list[KnowledgeChunk]] = {}
        self._vectors: dict[tuple[str, UUID], tuple[str, list[Sequence[float]]]] = {}

    @property
    def vectors(self) -> bool:
        return True

    def drop_agent(self, org_id: str, agent_id: UUID) -> None:
        """An agent's (and its threads') documents go with it."""
        for key, d in list(self._docs.items()):
            if key[0] == org_id and d.agent_id == agent_id:
                self._drop(key)

    def _drop(self, key: tuple[str, UUID]) -> None:
        for table in (self._docs, self._files, self._chunks, self._vectors):
            table.pop(key, None)

    def drop_thread(self, org_id: str, thread_id: UUID) -> None:
        """A thread's documents go with it."""
        for key, d in list(self._docs.items()):
            if key[0] == org_id and d.thread_id == thread_id:
                self._drop(key)

    def _stored(self, org_id: str, document_id: UUID) -> KnowledgeDocument:
        found = self._docs.get((org_id, document_id))
        if found is None:
            raise NotFound("document not found")
        return found

    async def add(self, document: KnowledgeDocument, content: bytes) -> KnowledgeDocument:
        d = document
        if d.agent_id is not None and not self._agent_exists(d.org_id, d.agent_id):
            raise NotFound("agent or thread not found")
        if d.thread_id is not None and not self._thread_exists(d.org_id, d.thread_id):
            raise NotFound("agent or thread not found")
        for other in self._docs.values():
            same = (other.org_id, other.scope, other.agent_id, other.thread_id, other.content_hash)
            if same == (d.org_id, d.scope, d.agent_id, d.thread_id, d.content_hash):
                return other
        self._docs[(d.org_id, d.id)] = d
        self._files[(d.org_id, d.id)] = content
        return d

    async def get(self, org_id: str, document_id: UUID) -> KnowledgeDocument:
        return self._stored(org_id, document_id)

    async def chunks(
        self, org_id: str, document_id: UUID, offset: int, limit: int
    ) -> list[DocumentChunk]:
        stored = self._chunks.get((org_id, document_id), [])
        return [
            DocumentChunk(
                id=c.id,
                ordinal=c.ordinal,
                text=c.text,
                headings=c.headings,
                page=c.page,
                start=c.start,
                end=c.end,
            )
            for c in sorted(stored, key=lambda c: c.ordinal)
            if c.ordinal >= offset
        ][:limit]

    async def list_all(self, org_id: str, where: DocumentFilter) -> list[KnowledgeDocument]:
        found = [
            d
            for (org, _), d in self._docs.items()
            if org == org_id
            and all(
                getattr(where, name) is None or getattr(d, name) == getattr(where, name)
                for name in ("scope", "agent_id", "thread_id", "status")
            )
        ]
        return sorted(found, key=lambda d: (d.created_at, d.id), reverse=True)

    async def delete(self, org_id: str, document_id: UUID) -> None:
        self._stored(org_id, document_id)
        self._drop((org_id, document_id))

    async def reindex(self, org_id: str, document_id: UUID, now: datetime) -> KnowledgeDocument:
        d = self._stored(org_id, document_id)
        changed = msgspec.structs.replace(
            d, generation=d.generation + 1, status="queued", error=None, attempts=0, updated_at=now
        )
        self._docs[(org_id, document_id)] = changed
        return changed

    async def claim(
        self, org_id: str, document_id: UUID, generation: int, now: datetime
    ) -> tuple[KnowledgeDocument, bytes] | None:
        d = self._docs.get((org_id, document_id))
        if d is None or d.generation != generation or d.status not in ("queued", "processing"):
            return None
        changed = msgspec.structs.replace(
            d, status="processing", attempts=d.attempts + 1, updated_at=now
        )
        self._docs[(org_id, document_id)] = changed
        return changed, self._files[(org_id, document_id)]

    async def finish(
        self,
        org_id: str,
        document_id: UUID,
        generation: int,
        chunks: Sequence[KnowledgeChunk],
        vectors: Sequence[Sequence[float]] | None,
        embedding_model: str | None,
        now: datetime,
        *,
        note: str | None = None,
    ) -> bool:
        d = self._docs.get((org_id, document_id))
        if d is None or d.generation != generation:
            return False
        key = (org_id, document_id)
        self._chunks[key] = list(chunks)
        if vectors is not None and embedding_model is not None:
            self._vectors[key] = (embedding_model, list(vectors))
        else:
            self._vectors.pop(key, None)
        self._docs[key] = msgspec.structs.replace(
            d,
            status="ready",
            error=note,
            chunk_count=len(chunks),
            embedding_model=embedding_model if vectors is not None else None,
            updated_at=now,
            indexed_at=now,
        )
        return True

    async def fail(
        self, org_id: str, document_id: UUID, generation: int, error: str, now: datetime
    ) -> bool:
        d = self._docs.get((org_id, document_id))
        if d is None or d.generation != generation or d.status == "ready":
            return False
        self._docs[(org_id, document_id)] = msgspec.structs.replace(
            d, status="failed", error=error, updated_at=now
        )
        return True

    async def pending(self, older_than: datetime, limit: int) -> list[Pending]:
        found = sorted(
            (
                d
                for d in self._docs.values()
                if d.status in ("queued", "processing") and d.updated_at < older_than
            ),
            key=lambda d: d.updated_at,
        )
        return [Pending(d.org_id, d.id, d.generation) for d in found[:limit]]

    async def has_documents(self, org_id: str) -> tuple[bool, frozenset[UUID], frozenset[UUID]]:
        ready = [d for (org, _), d in self._docs.items() if org == org_id and d.chunk_count > 0]
        return (
            any(d.scope == "org" for d in ready),
            frozenset(d.agent_id for d in ready if d.scope == "agent" and d.agent_id),
            frozenset(d.thread_id for d in ready if d.scope == "thread" and d.thread_id),
        )

    def _visible(self, scope: SearchScope) -> list[tuple[KnowledgeDocument, KnowledgeChunk]]:
        return [
            (d, c)
            for key, d in self._docs.items()
            if key[0] == scope.org_id and _sees(scope, d)
            for c in self._chunks.get(key, ())
        ]

    async def text_search(self, scope: SearchScope, query: str, limit: int) -> list[ChunkHit]:
        terms = words(query)
        if not terms:
            return []
        scored = []
        for d, c in self._visible(scope):
            have = set(words(c.search_text))
            score = sum(t in have for t in terms) / len(terms)
            if score > 0:
                scored.append(_hit(d, c, score))
        scored.sort(key=lambda h: (-h.score, str(h.document_id), h.ordinal))
        return scored[:limit]

    async def vector_search(
        self, scope: SearchScope, vector: Sequence[float], model: str, limit: int
    ) -> list[ChunkHit]:
        scored = []
        for key, d in self._docs.items():
            if key[0] != scope.org_id or not _sees(scope, d):
                continue
            kept = self._vectors.get(key)
            if kept is None or kept[0] != model:
                continue
            for c, v in zip(self._chunks.get(key, ()), kept[1], strict=False):
                if len(v) == len(vector):
                    scored.append(_hit(d, c, _cosine(vector, v)))
        scored.sort(key=lambda h: -h.score)
        return scored[:limit]
