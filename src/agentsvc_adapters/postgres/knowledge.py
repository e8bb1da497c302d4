"""Knowledge on PostgreSQL (``knowledge_documents``, ``knowledge_chunks``;
migration 0013; ``knowledge_vectors`` when pgvector is there).

Full-text search is always there: each chunk's ``search`` tsvector is computed at
insert with the configured text search configuration (``language``, English by
default), and a query matches any of its words, ranked by ``ts_rank_cd`` (cover
density: chunks where the words stand close together first) over all of them.

The candidates a full-text search ranks are chosen by the query's rare words
(``knowledge_text.py`` says how and why).

Vectors need the pgvector extension. ``enable_vectors`` (called at start-up when
an embedding provider is configured) creates it and ``knowledge_vectors`` if it
can; without it, or without the right to create it, the service logs why and
searches full text only. The column is an untyped ``vector`` (the dimensions are
configuration, not schema); an HNSW index on ``embedding::vector(D)`` for the
configured ``D`` serves the nearest-neighbour search, with pgvector's iterative
scan so that the filter on the organization and scope does not starve it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from agentsvc_adapters.postgres.knowledge_text import (
    COMMON,
    HIT,
    SCOPE,
    STATS,
    STATS_TTL,
    TEXT_SEARCH,
)
from agentsvc_adapters.postgres.pool import Pool, Repo, Row, translate
from agentsvc_core.entities.knowledge import (
    ChunkHit,
    DocumentChunk,
    DocumentScope,
    DocumentStatus,
    KnowledgeChunk,
    KnowledgeDocument,
    SearchScope,
)
from agentsvc_core.entities.memory import words
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.knowledge import DocumentFilter, KnowledgeStore, Pending

log = logging.getLogger("agentsvc.knowledge")

_COLUMNS = (
    "org_id, id, title, source_ref, mime_type, bytes, content_hash, scope, agent_id,"
    " thread_id, status, error, chunk_count, generation, attempts, embedding_model,"
    " created_at, updated_at, indexed_at"
)
_BATCH = 500  # chunks per INSERT
_HNSW_MAX_DIMS = 2000  # pgvector's HNSW index takes vectors of at most this many dimensions
_SEP = "\x1f"  # joins a chunk's headings into one text for unnest (not in headings)


def _document(row: Row) -> KnowledgeDocument:
    (org, did, title, ref, mime, size, digest, scope, agent, thread, status, error) = row[:12]
    count, generation, attempts, model, created, updated, indexed = row[12:19]
    scope_: DocumentScope = scope
    status_: DocumentStatus = status
    return KnowledgeDocument(
        id=did,
        org_id=org,
        title=title,
        source_ref=ref,
        mime_type=mime,
        bytes=size,
        content_hash=digest,
        scope=scope_,
        agent_id=agent,
        thread_id=thread,
        status=status_,
        error=error,
        chunk_count=count,
        generation=generation,
        attempts=attempts,
        embedding_model=model,
        created_at=created,
        updated_at=updated,
        indexed_at=indexed,
    )


def _hit(row: Row) -> ChunkHit:
    cid, did, title, ordinal, text, headings, page, score = row[:8]
    return ChunkHit(
        chunk_id=cid,
        document_id=did,
        title=title,
        ordinal=ordinal,
        text=text,
        headings=tuple(headings),
        page=page,
        score=float(score),
    )


def _scope_params(scope: SearchScope) -> dict[str, Any]:
    return {"org": scope.org_id, "agent": scope.agent_id, "thread": scope.thread_id}


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


class PostgresKnowledge(Repo, KnowledgeStore):
    def __init__(self, pool: Pool, *, language: str = "english") -> None:
        super().__init__(pool)
        self._language = language
        self._dims: int | None = None  # set by enable_vectors
        self._iterative = False  # pgvector 0.8+: hnsw.iterative_scan
        self._common: tuple[float, list[str]] | None = None  # (read at, common lexemes)

    @property
    def vectors(self) -> bool:
        return self._dims is not None

    async def check_language(self) -> bool:
        """Whether the server knows the text search configuration ``language``."""
        row = await self._one("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (self._language,))
        return row is not None

    async def enable_vectors(self, dimensions: int) -> str | None:
        """Create pgvector, ``knowledge_vectors`` and the index for ``dimensions``
        when missing. None when vectors work; else why not (for the log)."""
        try:
            async with self._pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT installed_version IS NOT NULL FROM pg_available_extensions"
                    " WHERE name = 'vector'"
                )
                found = await cur.fetchone()
                if found is None:
                    return "the PostgreSQL server has no pgvector extension"
                if not found[0]:
                    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                cur = await conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                )
                version = await cur.fetchone()
                assert version is not None
                self._iterative = _version(version[0]) >= (0, 8)
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS knowledge_vectors ("
                    " org_id text NOT NULL, document_id uuid NOT NULL, ordinal integer NOT NULL,"
                    " model text NOT NULL, dims integer NOT NULL, embedding vector NOT NULL,"
                    " PRIMARY KEY (org_id, document_id, ordinal),"
                    " FOREIGN KEY (org_id, document_id, ordinal)"
                    "  REFERENCES knowledge_chunks (org_id, document_id, ordinal)"
                    "  ON DELETE CASCADE)"
                )
                if dimensions <= _HNSW_MAX_DIMS:
                    await conn.execute(
                        sql.SQL(
                            "CREATE INDEX IF NOT EXISTS {} ON knowledge_vectors USING hnsw"
                            " ((embedding::vector({})) vector_cosine_ops) WHERE dims = {}"
                        ).format(
                            sql.Identifier(f"knowledge_vectors_hnsw_{dimensions}"),
                            sql.Literal(dimensions),
                            sql.Literal(dimensions),
                        )
                    )
                else:
                    log.warning(
                        "knowledge vectors of %d dimensions are searched without an index"
                        " (pgvector indexes %d at most): set AGENTSVC_EMBEDDINGS_DIMENSIONS"
                        " to %d or fewer for large collections",
                        dimensions,
                        _HNSW_MAX_DIMS,
                        _HNSW_MAX_DIMS,
                    )
        except psycopg.Error as exc:
            return f"pgvector could not be set up ({type(exc).__name__}: {exc.sqlstate})"
        self._dims = dimensions
        return None

    async def add(self, document: KnowledgeDocument, content: bytes) -> KnowledgeDocument:
        d = document
        params = (
            d.org_id, d.id, d.title, d.source_ref, d.mime_type, d.bytes, d.content_hash,
            d.scope, d.agent_id, d.thread_id, d.status, d.error, d.chunk_count, d.generation,
            d.attempts, d.embedding_model, d.created_at, d.updated_at, d.indexed_at, content,
        )  # fmt: skip
        async with translate(), self._pool.connection() as conn:
            try:
                cur = await conn.execute(
                    f"INSERT INTO knowledge_documents ({_COLUMNS}, content)"
                    f" VALUES ({', '.join(['%s'] * 20)})"
                    f" ON CONFLICT DO NOTHING RETURNING {_COLUMNS}",
                    params,
                )
            except psycopg.errors.ForeignKeyViolation:
                raise NotFound("agent or thread not found") from None
            row = await cur.fetchone()
            if row is not None:
                return _document(row)
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM knowledge_documents WHERE org_id = %s"
                " AND scope = %s AND agent_id IS NOT DISTINCT FROM %s"
                " AND thread_id IS NOT DISTINCT FROM %s AND content_hash = %s",
                (d.org_id, d.scope, d.agent_id, d.thread_id, d.content_hash),
            )
            row = await cur.fetchone()
        if row is None:  # deleted between the two statements: store it after all
            return await self.add(document, content)
        return _document(row)

    async def get(self, org_id: str, document_id: UUID) -> KnowledgeDocument:
        row = await self._one(
            f"SELECT {_COLUMNS} FROM knowledge_documents WHERE org_id = %s AND id = %s",
            (org_id, document_id),
        )
        if row is None:
            raise NotFound("document not found")
        return _document(row)

    async def chunks(
        self, org_id: str, document_id: UUID, offset: int, limit: int
    ) -> list[DocumentChunk]:
        rows = await self._all(
            "SELECT id, ordinal, text, headings, page, start_offset, end_offset"
            " FROM knowledge_chunks WHERE org_id = %s AND document_id = %s AND ordinal >= %s"
            " ORDER BY ordinal LIMIT %s",
            (org_id, document_id, offset, limit),
        )
        return [
            DocumentChunk(id=i, ordinal=o, text=t, headings=tuple(h), page=p, start=s, end=e)
            for i, o, t, h, p, s, e in rows
        ]

    async def list_all(self, org_id: str, where: DocumentFilter) -> list[KnowledgeDocument]:
        conds = ["org_id = %(org)s"]
        params: dict[str, Any] = {"org": org_id}
        for name in ("scope", "agent_id", "thread_id", "status"):
            value = getattr(where, name)
            if value is not None:
                conds.append(f"{name} = %({name})s")
                params[name] = value
        rows = await self._all(
            f"SELECT {_COLUMNS} FROM knowledge_documents WHERE {' AND '.join(conds)}"
            " ORDER BY created_at DESC, id DESC",
            params,
        )
        return [_document(r) for r in rows]

    async def delete(self, org_id: str, document_id: UUID) -> None:
        row = await self._one(
            "DELETE FROM knowledge_documents WHERE org_id = %s AND id = %s RETURNING id",
            (org_id, document_id),
        )
        if row is None:
            raise NotFound("document not found")

    async def reindex(self, org_id: str, document_id: UUID, now: datetime) -> KnowledgeDocument:
        row = await self._one(
            "UPDATE knowledge_documents SET generation = generation + 1, status = 'queued',"
            " error = NULL, attempts = 0, updated_at = %s WHERE org_id = %s AND id = %s"
            f" RETURNING {_COLUMNS}",
            (now, org_id, document_id),
        )
        if row is None:
            raise NotFound("document not found")
        return _document(row)

    async def claim(
        self, org_id: str, document_id: UUID, generation: int, now: datetime
    ) -> tuple[KnowledgeDocument, bytes] | None:
        row = await self._one(
            "UPDATE knowledge_documents SET status = 'processing', attempts = attempts + 1,"
            " updated_at = %s WHERE org_id = %s AND id = %s AND generation = %s"
            f" AND status IN ('queued', 'processing') RETURNING {_COLUMNS}, content",
            (now, org_id, document_id, generation),
        )
        if row is None:
            return None
        return _document(row), bytes(row[19])

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
        keep_vectors = vectors is not None and self._dims is not None
        async with translate(), self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT generation FROM knowledge_documents WHERE org_id = %s AND id = %s"
                " FOR UPDATE",
                (org_id, document_id),
            )
            row = await cur.fetchone()
            if row is None or row[0] != generation:
                return False
            await conn.execute(
                "DELETE FROM knowledge_chunks WHERE org_id = %s AND document_id = %s",
                (org_id, document_id),
            )
            for at in range(0, len(chunks), _BATCH):
                part = chunks[at : at + _BATCH]
                await conn.execute(
                    "INSERT INTO knowledge_chunks (org_id, document_id, ordinal, id, text,"
                    " headings, page, start_offset, end_offset, search)"
                    " SELECT %(org)s, %(doc)s, o, i, t,"
                    " CASE WHEN h = '' THEN '{}'::text[] ELSE string_to_array(h, %(sep)s) END,"
                    " p, s, e, to_tsvector(%(cfg)s::regconfig, x)"
                    " FROM unnest(%(o)s::int[], %(i)s::uuid[], %(t)s::text[], %(h)s::text[],"
                    " %(p)s::int[], %(s)s::int[], %(e)s::int[], %(x)s::text[])"
                    " AS u(o, i, t, h, p, s, e, x)",
                    {
                        "org": org_id,
                        "doc": document_id,
                        "sep": _SEP,
                        "cfg": self._language,
                        "o": [c.ordinal for c in part],
                        "i": [c.id for c in part],
                        "t": [c.text for c in part],
                        "h": [_SEP.join(c.headings) for c in part],
                        "p": [c.page for c in part],
                        "s": [c.start for c in part],
                        "e": [c.end for c in part],
                        "x": [c.search_text for c in part],
                    },
                )
                if keep_vectors:
                    assert vectors is not None
                    await conn.execute(
                        "INSERT INTO knowledge_vectors (org_id, document_id, ordinal, model,"
                        " dims, embedding) SELECT %(org)s, %(doc)s, o, %(model)s, %(dims)s,"
                        " v::vector FROM unnest(%(o)s::int[], %(v)s::text[]) AS u(o, v)",
                        {
                            "org": org_id,
                            "doc": document_id,
                            "model": embedding_model,
                            "dims": self._dims,
                            "o": [c.ordinal for c in part],
                            "v": [_vector_text(v) for v in vectors[at : at + _BATCH]],
                        },
                    )
            await conn.execute(
                "UPDATE knowledge_documents SET status = 'ready', error = %s,"
                " chunk_count = %s, embedding_model = %s, updated_at = %s, indexed_at = %s"
                " WHERE org_id = %s AND id = %s",
                (
                    note,
                    len(chunks),
                    embedding_model if keep_vectors else None,
                    now,
                    now,
                    org_id,
                    document_id,
                ),
            )
        return True

    async def fail(
        self, org_id: str, document_id: UUID, generation: int, error: str, now: datetime
    ) -> bool:
        row = await self._one(
            "UPDATE knowledge_documents SET status = 'failed', error = %s, updated_at = %s"
            " WHERE org_id = %s AND id = %s AND generation = %s AND status <> 'ready'"
            " RETURNING id",
            (error, now, org_id, document_id, generation),
        )
        return row is not None

    async def pending(self, older_than: datetime, limit: int) -> list[Pending]:
        rows = await self._all(
            "SELECT org_id, id, generation FROM knowledge_documents"
            " WHERE status IN ('queued', 'processing') AND updated_at < %s"
            " ORDER BY updated_at LIMIT %s",
            (older_than, limit),
        )
        return [Pending(org, did, gen) for org, did, gen in rows]

    async def has_documents(self, org_id: str) -> tuple[bool, frozenset[UUID], frozenset[UUID]]:
        rows = await self._all(
            "SELECT DISTINCT scope, agent_id, thread_id FROM knowledge_documents"
            " WHERE org_id = %s AND chunk_count > 0 AND scope <> 'org'"
            " UNION ALL (SELECT 'org', NULL, NULL FROM knowledge_documents"
            " WHERE org_id = %s AND chunk_count > 0 AND scope = 'org' LIMIT 1)",
            (org_id, org_id),
        )
        org = any(r[0] == "org" for r in rows)
        agents = frozenset(r[1] for r in rows if r[0] == "agent")
        threads = frozenset(r[2] for r in rows if r[0] == "thread")
        return org, agents, threads

    async def text_search(self, scope: SearchScope, query: str, limit: int) -> list[ChunkHit]:
        terms = words(query)
        if not terms:
            return []
        params = {
            **_scope_params(scope),
            "q": " ".join(terms),
            "cfg": self._language,
            "limit": limit,
            "common": await self._common_words(),
        }
        rows = await self._all(TEXT_SEARCH, params)
        return [_hit(r) for r in rows]

    async def _common_words(self) -> list[str]:
        """The lexemes in more than ``COMMON`` of the chunks, by the column's
        statistics (none before the first ANALYZE), read again after ``STATS_TTL``."""
        now = time.monotonic()
        if self._common is None or now - self._common[0] > STATS_TTL:
            rows = await self._all(STATS, (COMMON,))
            self._common = (now, [r[0] for r in rows])
        return self._common[1]

    async def vector_search(
        self, scope: SearchScope, vector: Sequence[float], model: str, limit: int
    ) -> list[ChunkHit]:
        dims = self._dims
        if dims is None or len(vector) != dims:
            return []
        params = {
            **_scope_params(scope),
            "v": _vector_text(vector),
            "model": model,
            "dims": dims,
            "limit": limit,
        }
        cast = f"::vector({int(dims)})"
        async with translate(), self._pool.connection() as conn, conn.transaction():
            # iterative scans (pgvector 0.8+): the index keeps looking past rows the
            # organization and scope filter out, instead of answering fewer
            if self._iterative:
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cur = await conn.execute(
                f"SELECT {HIT}, 1 - (v.embedding{cast} <=> %(v)s{cast}) AS score"
                " FROM knowledge_vectors v"
                " JOIN knowledge_chunks c ON c.org_id = v.org_id"
                "  AND c.document_id = v.document_id AND c.ordinal = v.ordinal"
                " JOIN knowledge_documents d ON d.org_id = c.org_id AND d.id = c.document_id"
                " WHERE v.org_id = %(org)s AND v.dims = %(dims)s AND v.model = %(model)s"
                f" AND {SCOPE}"
                f" ORDER BY v.embedding{cast} <=> %(v)s{cast} LIMIT %(limit)s",
                params,
            )
            rows = await cur.fetchall()
        return [_hit(r) for r in rows]
