"""Knowledge: an organization's documents, indexed into chunks the model searches
(docs/knowledge.md).

A document belongs to the organization and to one scope: ``org`` (every agent
sees it), ``agent`` (one agent's conversations) or ``thread`` (one
conversation). Its status goes ``queued`` -> ``processing`` -> ``ready`` or
``failed`` (with ``error``); ``generation`` counts the indexings asked for (a
reindex adds one), so a job for an older generation finds nothing to do.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args
from uuid import UUID

import msgspec

__all__ = [
    "DOCUMENT_SCOPES",
    "DOCUMENT_STATUSES",
    "ChunkHit",
    "DocumentChunk",
    "DocumentScope",
    "DocumentStatus",
    "KnowledgeChunk",
    "KnowledgeDocument",
    "SearchScope",
]

DocumentScope = Literal["org", "agent", "thread"]
DocumentStatus = Literal["queued", "processing", "ready", "failed"]
DOCUMENT_SCOPES: tuple[DocumentScope, ...] = get_args(DocumentScope)
DOCUMENT_STATUSES: tuple[DocumentStatus, ...] = get_args(DocumentStatus)


class KnowledgeDocument(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    title: str
    source_ref: str  # the uploaded file's name
    mime_type: str  # as parsed: text/plain, text/markdown, text/html, application/pdf
    bytes: int
    content_hash: str  # sha256 of the file, hex: an identical file in one scope is kept once
    scope: DocumentScope
    agent_id: UUID | None = None  # the agent of an ``agent`` or ``thread`` document
    thread_id: UUID | None = None
    status: DocumentStatus = "queued"
    error: str | None = None  # why it failed, for people
    chunk_count: int = 0
    generation: int = 1
    attempts: int = 0  # indexings of this generation started (a killed worker's count too)
    embedding_model: str | None = None  # the model of its chunks' vectors; None: full text only
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime | None = None


class KnowledgeChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of a document's text, as stored and searched."""

    id: UUID
    ordinal: int
    text: str
    search_text: str  # what full-text search indexes: the headings, then the text
    headings: tuple[str, ...] = ()
    page: int | None = None
    start: int = 0  # offsets of ``text`` in the document's extracted text
    end: int = 0


class DocumentChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A stored chunk as its document's chunk list shows it (no vector, no search
    index)."""

    id: UUID
    ordinal: int
    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None
    start: int = 0
    end: int = 0


class SearchScope(msgspec.Struct, frozen=True, kw_only=True):
    """Which documents a search sees: the organization's, plus the agent's and the
    thread's when given."""

    org_id: str
    agent_id: UUID | None = None
    thread_id: UUID | None = None


class ChunkHit(msgspec.Struct, frozen=True, kw_only=True):
    chunk_id: UUID
    document_id: UUID
    title: str
    ordinal: int
    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None
    score: float = 0.0
