-- Memories of an agent (docs/memory.md). Keys lead with org_id (see 0001); a
-- memory goes with its agent (ON DELETE CASCADE). superseded_by names a newer
-- memory of the same place, not a foreign key: deleting the newer one leaves the
-- older superseded.

CREATE TABLE memories (
    org_id         text        NOT NULL,
    id             uuid        NOT NULL,
    agent_id       uuid        NOT NULL,
    scope          text        NOT NULL,
    -- the thread id or the user id; NULL for the agent scope
    scope_id       text,
    content        text        NOT NULL,
    key            text,
    -- sha256 of the content casefolded with its spaces collapsed: the same fact
    fingerprint    text        NOT NULL,
    status         text        NOT NULL,
    superseded_by  uuid,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    search         tsvector    GENERATED ALWAYS AS
        (to_tsvector('simple'::regconfig, coalesce(key, '') || ' ' || content)) STORED,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE,
    CONSTRAINT memories_scope CHECK (scope IN ('agent', 'thread', 'user')),
    CONSTRAINT memories_status CHECK (status IN ('active', 'superseded')),
    CONSTRAINT memories_scope_id CHECK ((scope = 'agent') = (scope_id IS NULL))
);
-- the list, newest first; the cascade from the agent
CREATE INDEX memories_agent_created ON memories (org_id, agent_id, created_at, id);
-- the recall (active memories only)
CREATE INDEX memories_search ON memories USING gin (search) WHERE status = 'active';
-- one active copy of a fact, one active memory of a key, per place (the save
-- checks both under a lock; these say so to anything else that writes)
CREATE UNIQUE INDEX memories_fact ON memories
    (org_id, agent_id, scope, coalesce(scope_id, ''), fingerprint) WHERE status = 'active';
CREATE UNIQUE INDEX memories_key ON memories
    (org_id, agent_id, scope, coalesce(scope_id, ''), key)
    WHERE status = 'active' AND key IS NOT NULL;
