"""Where knowledge documents, their files and their chunks are kept, and searched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.entities.knowledge import (
    ChunkHit,
    DocumentChunk,
    DocumentScope,
    DocumentStatus,
    KnowledgeChunk,
    KnowledgeDocument,
    SearchScope,
)

__all__ = ["DocumentFilter", "KnowledgeStore", "Pending"]


class DocumentFilter(msgspec.Struct, frozen=True, kw_only=True):
    scope: DocumentScope | None = None
    agent_id: UUID | None = None
    thread_id: UUID | None = None
    status: DocumentStatus | None = None


class Pending(msgspec.Struct, frozen=True):
    """A document whose indexing should be running: its job is enqueued again
    (deduplicated) by the sweep, in case the first enqueue was lost."""

    org_id: str
    document_id: UUID
    generation: int


class KnowledgeStore(Protocol):
    async def add(self, document: KnowledgeDocument, content: bytes) -> KnowledgeDocument:
        """Store a new document and its file, unless the organization has one with the
        same ``content_hash`` in the same scope (same agent, same thread): then that
        one is answered and nothing is stored."""
        ...

    async def get(self, org_id: str, document_id: UUID) -> KnowledgeDocument:
        """Raises ``NotFound``."""
        ...

    async def chunks(
        self, org_id: str, document_id: UUID, offset: int, limit: int
    ) -> list[DocumentChunk]:
        """The document's stored chunks by ordinal (0, 1, 2...), from ordinal
        ``offset``, at most ``limit``: [] while none are stored (or for a document
        that is not there; the caller reads the document first)."""
        ...

    async def list_all(self, org_id: str, where: DocumentFilter) -> list[KnowledgeDocument]:
        """Newest first."""
        ...

    async def delete(self, org_id: str, document_id: UUID) -> None:
        """The document, its file and its chunks. Raises ``NotFound``."""
        ...

    async def reindex(self, org_id: str, document_id: UUID, now: datetime) -> KnowledgeDocument:
        """A new generation: ``queued``, no error, attempts 0 (the chunks stay
        searchable until the new ones replace them). Raises ``NotFound``."""
        ...

    async def claim(
        self, org_id: str, document_id: UUID, generation: int, now: datetime
    ) -> tuple[KnowledgeDocument, bytes] | None:
        """Start indexing ``generation``: ``processing``, one more attempt; answers
        the document (as changed) and its file. None when there is nothing to do:
        the document is gone, or at another generation, or already ``ready`` or
        ``failed`` at this one."""
        ...

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
        """Replace the document's chunks (and their vectors, one per chunk, when
        given) and mark it ``ready``, in one transaction, if it is still at
        ``generation``; False (and nothing changed) otherwise. ``note`` is kept as
        the document's ``error`` (ready, with a warning)."""
        ...

    async def fail(
        self, org_id: str, document_id: UUID, generation: int, error: str, now: datetime
    ) -> bool:
        """Mark ``failed`` with ``error`` if still at ``generation`` and not ready."""
        ...

    async def pending(self, older_than: datetime, limit: int) -> list[Pending]:
        """``queued`` or ``processing`` documents not changed since ``older_than``,
        of every organization (the sweep's)."""
        ...

    async def has_documents(self, org_id: str) -> tuple[bool, frozenset[UUID], frozenset[UUID]]:
        """Whether the organization has ready ``org`` documents, and the agents and
        threads that have ready documents of their own (decides whether a turn
        offers ``knowledge_search``)."""
        ...

    async def text_search(self, scope: SearchScope, query: str, limit: int) -> list[ChunkHit]:
        """Chunks of ready documents in ``scope`` matching ``query`` (full text:
        any of its words; better matches first), ``score`` the text rank."""
        ...

    @property
    def vectors(self) -> bool:
        """Whether this storage can keep and search vectors (PostgreSQL with
        pgvector, or memory)."""
        ...

    async def vector_search(
        self, scope: SearchScope, vector: Sequence[float], model: str, limit: int
    ) -> list[ChunkHit]:
        """Chunks of ready documents in ``scope`` with a vector of ``model``, nearest
        first (cosine), ``score`` the similarity. [] when ``vectors`` is False."""
        ...
