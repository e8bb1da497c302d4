-- Knowledge documents and their chunks (docs/knowledge.md). Keys lead with org_id
-- (see 0001). A document of an agent goes with the agent, one of a thread with the
-- thread; chunks go with their document (ON DELETE CASCADE). The uploaded file is
-- kept (content) so that a reindex needs no new upload; lists never read it.
-- Vectors, when pgvector is there, live in knowledge_vectors (created at start-up
-- by the service, not here: the extension is optional and the dimensions are
-- configuration).

CREATE TABLE knowledge_documents (
    org_id           text        NOT NULL,
    id               uuid        NOT NULL,
    title            text        NOT NULL,
    source_ref       text        NOT NULL,
    mime_type        text        NOT NULL,
    bytes            bigint      NOT NULL,
    content_hash     text        NOT NULL,
    scope            text        NOT NULL,
    agent_id         uuid,
    thread_id        uuid,
    status           text        NOT NULL,
    error            text,
    chunk_count      integer     NOT NULL DEFAULT 0,
    generation       integer     NOT NULL DEFAULT 1,
    attempts         integer     NOT NULL DEFAULT 0,
    embedding_model  text,
    content          bytea       NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    indexed_at       timestamptz,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE,
    CONSTRAINT knowledge_scope CHECK (
        (scope = 'org' AND agent_id IS NULL AND thread_id IS NULL)
        OR (scope = 'agent' AND agent_id IS NOT NULL AND thread_id IS NULL)
        OR (scope = 'thread' AND thread_id IS NOT NULL)),
    CONSTRAINT knowledge_status CHECK (status IN ('queued', 'processing', 'ready', 'failed'))
);
-- the list, newest first
CREATE INDEX knowledge_documents_created ON knowledge_documents (org_id, created_at DESC, id);
-- one copy of a file per scope
CREATE UNIQUE INDEX knowledge_documents_same_file ON knowledge_documents
    (org_id, scope, coalesce(agent_id::text, ''), coalesce(thread_id::text, ''), content_hash);
-- the sweep of indexings that should be running
CREATE INDEX knowledge_documents_pending ON knowledge_documents (updated_at)
    WHERE status IN ('queued', 'processing');

CREATE TABLE knowledge_chunks (
    org_id       text     NOT NULL,
    document_id  uuid     NOT NULL,
    ordinal      integer  NOT NULL,
    id           uuid     NOT NULL,
    text         text     NOT NULL,
    headings     text[]   NOT NULL,
    page         integer,
    start_offset integer  NOT NULL,
    end_offset   integer  NOT NULL,
    -- the headings and the text, with the configuration the service was set to
    -- (AGENTSVC_KNOWLEDGE_LANGUAGE) when the document was indexed
    search       tsvector NOT NULL,
    PRIMARY KEY (org_id, document_id, ordinal),
    FOREIGN KEY (org_id, document_id) REFERENCES knowledge_documents (org_id, id)
        ON DELETE CASCADE
);
CREATE INDEX knowledge_chunks_search ON knowledge_chunks USING gin (search);
