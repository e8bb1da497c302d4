"""Knowledge documents (``/api/knowledge``); docs/api.md#knowledge.

The upload is ``multipart/form-data``: a ``file`` part, and optional ``title``,
``agentId`` or ``threadId`` fields. It answers 202 with the document (``queued``)
while indexing runs in the background, or 200 with the document already stored
when the same file was uploaded to the same scope before. Who may add, read and
remove which documents is the use case's (``use_cases/knowledge/documents.py``): the routes
are ``MEMBER`` routes and the use case refuses a member what is an admin's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIType,
    Schema,
)
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import Meta

from agentsvc_core.entities.knowledge import (
    DocumentChunk,
    DocumentScope,
    DocumentStatus,
    KnowledgeDocument,
)
from agentsvc_core.errors import InvalidInput, UnsupportedMedia
from agentsvc_core.rules import MAX_OFFSET
from agentsvc_core.use_cases.knowledge.chunking import estimate_tokens
from agentsvc_core.use_cases.knowledge.documents import (
    MAX_CHUNK_PAGE,
    MAX_QUERY,
    MAX_TITLE,
    MAX_TOP_K,
    Knowledge,
)
from agentsvc_web.access import MEMBER
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied
from agentsvc_web.upload_form import form_operation, read_upload_form

Req = Request[Any, Any, Any]

# what a multipart body may hold besides the file (its fields, boundaries, headers)
FORM_OVERHEAD = 64 * 1024


class DocumentOut(msgspec.Struct):
    id: UUID
    org_id: str
    title: str
    source_ref: str
    mime_type: str
    bytes: int
    content_hash: str
    scope: DocumentScope
    agent_id: UUID | None
    thread_id: UUID | None
    status: DocumentStatus
    error: str | None
    chunk_count: int
    chunks: int  # chunk_count again, under the short name uploaders commonly read
    embedding_model: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime | None

    @classmethod
    def of(cls, d: KnowledgeDocument) -> DocumentOut:
        return copied(cls, d, chunks=d.chunk_count)


class ChunkOut(msgspec.Struct):
    id: UUID
    ordinal: int  # 0, 1, 2... in document order
    text: str
    chars: int
    tokens: int  # estimated as the chunker does: a token per 4 characters
    headings: list[str]  # the heading path, outermost first
    page: int | None  # the PDF page it starts on
    start: int  # offsets of the text in the document's extracted text
    end: int

    @classmethod
    def of(cls, c: DocumentChunk) -> ChunkOut:
        return copied(
            cls, c, chars=len(c.text), tokens=estimate_tokens(c.text), headings=list(c.headings)
        )


class ChunkListOut(msgspec.Struct):
    document_id: UUID
    status: DocumentStatus  # queued or processing: no chunk yet (or a reindex's old ones)
    chunk_count: int
    chunks: list[ChunkOut]
    next_offset: int | None


class SearchBody(msgspec.Struct, rename="camel"):
    query: Annotated[str, Meta(min_length=1, max_length=MAX_QUERY)]
    top_k: Annotated[int, Meta(ge=1, le=MAX_TOP_K)] = 5
    agent_id: UUID | None = None
    thread_id: UUID | None = None


class SearchHitOut(msgspec.Struct):
    chunk_id: UUID
    document_id: UUID
    title: str
    ordinal: int
    headings: list[str]
    page: int | None
    text: str
    score: float  # the reciprocal-rank fusion score
    text_rank: int | None  # 1-based rank in the full-text ranking, None: not in it
    vector_rank: int | None


class SearchOut(msgspec.Struct):
    mode: str  # hybrid | full_text
    results: list[SearchHitOut]


_TEXT_FIELDS = frozenset({"title", "agentId", "threadId"})


def _uuid(fields: dict[str, str], name: str) -> UUID | None:
    raw = fields.get(name)
    if raw is None:
        return None
    try:
        return UUID(raw)
    except ValueError:
        raise InvalidInput(name, "must be a UUID") from None


def _text_field(**kw: Any) -> Schema:
    return Schema(type=OpenAPIType.STRING, **kw)


_UUID_FIELD = _text_field(format=OpenAPIFormat.UUID)
_UploadOperation = form_operation(
    {
        "file": _text_field(format=OpenAPIFormat.BINARY),
        "title": _text_field(min_length=1, max_length=MAX_TITLE),
        "agentId": _UUID_FIELD,
        "threadId": _UUID_FIELD,
    },
    ["file"],
)


class KnowledgeUploadController(Controller):
    """The upload alone: its body limit is the file cap (``uploads_up_to``), not
    the JSON routes' ``AGENTSVC_MAX_BODY_BYTES``."""

    path = "/api/knowledge"
    tags = ["knowledge"]

    @post(
        "/upload",
        operation_id="uploadKnowledge",
        operation_class=_UploadOperation,
        opt=MEMBER,
        status_code=202,
        responses={
            200: ResponseSpec(
                data_container=DocumentOut,
                description="The same file was in that scope already: the stored document",
                generate_examples=False,
            ),
            **errors(400, 403, 404, 413, 415, 422),
        },
        summary="Upload a document (multipart: file, title, agentId or threadId); it is "
        "indexed in the background",
    )
    async def upload(
        self, request: Req, knowledge: NamedDependency[Knowledge]
    ) -> Response[DocumentOut]:
        if not request.content_type[0].startswith("multipart/form-data"):
            raise UnsupportedMedia("the upload is multipart/form-data with a file part")
        form = await read_upload_form(request, _TEXT_FIELDS, self.max_file_bytes)
        if form.data is None:
            raise InvalidInput("file", "a file part is required")
        document, new = await knowledge.upload(
            principal_of(request),
            filename=form.filename or "",
            data=form.data,
            mime_type=form.content_type,
            title=form.fields.get("title"),
            agent_id=_uuid(form.fields, "agentId"),
            thread_id=_uuid(form.fields, "threadId"),
        )
        return Response(DocumentOut.of(document), status_code=202 if new else 200)

    max_file_bytes = 0  # set by ``uploads_up_to``


class KnowledgeController(Controller):
    path = "/api/knowledge"
    tags = ["knowledge"]

    @get(
        "",
        operation_id="listKnowledge",
        responses=errors(404, 422),
        summary="The organization's documents, newest first",
    )
    async def list_documents(
        self,
        request: Req,
        knowledge: NamedDependency[Knowledge],
        scope_filter: Annotated[DocumentScope | None, QueryParameter(name="scope")] = None,
        agent_id: Annotated[UUID | None, QueryParameter(name="agentId")] = None,
        thread_id: Annotated[UUID | None, QueryParameter(name="threadId")] = None,
        status: Annotated[DocumentStatus | None, QueryParameter(name="status")] = None,
    ) -> list[DocumentOut]:
        found = await knowledge.list_documents(
            principal_of(request),
            scope=scope_filter,
            agent_id=agent_id,
            thread_id=thread_id,
            status=status,
        )
        return [DocumentOut.of(d) for d in found]

    @get(
        "/{document_id:uuid}",
        operation_id="getKnowledge",
        responses=errors(404),
        summary="One document: its status, error and chunk count",
    )
    async def get_document(
        self, request: Req, knowledge: NamedDependency[Knowledge], document_id: FromPath[UUID]
    ) -> DocumentOut:
        return DocumentOut.of(await knowledge.get(principal_of(request), document_id))

    @get(
        "/{document_id:uuid}/chunks",
        operation_id="listKnowledgeChunks",
        responses=errors(404, 422),
        summary="How the document was cut: its chunks in order, by pages",
    )
    async def list_chunks(
        self,
        request: Req,
        knowledge: NamedDependency[Knowledge],
        document_id: FromPath[UUID],
        offset: Annotated[int, QueryParameter(name="offset", ge=0, le=MAX_OFFSET)] = 0,
        limit: Annotated[int, QueryParameter(name="limit", ge=1, le=MAX_CHUNK_PAGE)] = 50,
    ) -> ChunkListOut:
        page = await knowledge.chunks(principal_of(request), document_id, offset, limit)
        return ChunkListOut(
            document_id=page.document.id,
            status=page.document.status,
            chunk_count=page.document.chunk_count,
            chunks=[ChunkOut.of(c) for c in page.chunks],
            next_offset=page.next_offset,
        )

    @delete(
        "/{document_id:uuid}",
        operation_id="deleteKnowledge",
        opt=MEMBER,
        status_code=200,
        responses=errors(403, 404),
        summary="Delete a document and its chunks",
    )
    async def delete_document(
        self, request: Req, knowledge: NamedDependency[Knowledge], document_id: FromPath[UUID]
    ) -> OkBody:
        await knowledge.delete(principal_of(request), document_id)
        return OkBody(ok=True)

    @post(
        "/{document_id:uuid}/reindex",
        operation_id="reindexKnowledge",
        opt=MEMBER,
        status_code=202,
        responses=errors(403, 404),
        summary="Index the document again (its chunks stay searchable meanwhile)",
    )
    async def reindex(
        self, request: Req, knowledge: NamedDependency[Knowledge], document_id: FromPath[UUID]
    ) -> DocumentOut:
        return DocumentOut.of(await knowledge.reindex(principal_of(request), document_id))

    @post(
        "/search",
        operation_id="searchKnowledge",
        opt=MEMBER,
        status_code=200,
        responses=errors(400, 403, 404, 413, 415, 422),
        summary="What knowledge_search finds for a query (an agent's, a thread's view)",
    )
    async def search(
        self, request: Req, knowledge: NamedDependency[Knowledge], data: JSONBody[SearchBody]
    ) -> SearchOut:
        found = await knowledge.search_for(
            principal_of(request),
            data.query,
            top_k=data.top_k,
            agent_id=data.agent_id,
            thread_id=data.thread_id,
        )
        return SearchOut(
            mode=found.mode,
            results=[
                SearchHitOut(
                    chunk_id=r.hit.chunk_id,
                    document_id=r.hit.document_id,
                    title=r.hit.title,
                    ordinal=r.hit.ordinal,
                    headings=list(r.hit.headings),
                    page=r.hit.page,
                    text=r.hit.text,
                    score=r.hit.score,
                    text_rank=r.text_rank,
                    vector_rank=r.vector_rank,
                )
                for r in found.results
            ],
        )


def uploads_up_to(max_file_bytes: int) -> type[Controller]:
    """The upload controller taking bodies of a file of ``max_file_bytes`` and its form."""
    return type(
        "KnowledgeUploads",
        (KnowledgeUploadController,),
        {"request_max_body_size": max_file_bytes + FORM_OVERHEAD, "max_file_bytes": max_file_bytes},
    )
