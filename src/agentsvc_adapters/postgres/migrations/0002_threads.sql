-- Threads, participants, runs (replies), messages and usage records.
-- Every key and index leads with org_id (see 0001).

CREATE TABLE threads (
    org_id                 text        NOT NULL REFERENCES organizations (org_id),
    id                     uuid        NOT NULL,
    -- no foreign key: threads outlive their agent (DELETE /api/agents keeps them)
    agent_id               uuid        NOT NULL,
    title                  text,
    kind                   text        NOT NULL,
    status                 text        NOT NULL,
    active_profile         text,
    system_prompt_overlay  text,
    metadata               json        NOT NULL,
    resource_bindings      json        NOT NULL,
    created_by             text,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    -- distinct within an organization, so the listing cursor pages exactly
    CONSTRAINT threads_org_created_at UNIQUE (org_id, created_at)
);
CREATE INDEX threads_org_agent_created ON threads (org_id, agent_id, created_at DESC);

CREATE TABLE thread_participants (
    org_id        text        NOT NULL,
    thread_id     uuid        NOT NULL,
    user_id       text        NOT NULL,
    display_name  text,
    role          text        NOT NULL,
    added_at      timestamptz NOT NULL,
    PRIMARY KEY (org_id, thread_id, user_id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE INDEX thread_participants_user ON thread_participants (org_id, user_id);

CREATE TABLE runs (
    org_id              text        NOT NULL,
    id                  uuid        NOT NULL,
    thread_id           uuid        NOT NULL,
    status              text        NOT NULL,
    started_at          timestamptz NOT NULL,
    heartbeat_at        timestamptz NOT NULL,
    finished_at         timestamptz,
    pending_tool_calls  json        NOT NULL DEFAULT '[]',
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
-- One reply at a time per thread: a second running run is a unique violation.
CREATE UNIQUE INDEX runs_one_running ON runs (org_id, thread_id) WHERE status = 'running';
CREATE INDEX runs_org_thread_started ON runs (org_id, thread_id, started_at DESC);
CREATE INDEX runs_running_heartbeat ON runs (org_id, heartbeat_at) WHERE status = 'running';

CREATE TABLE messages (
    org_id        text        NOT NULL,
    thread_id     uuid        NOT NULL,
    seq           bigint      GENERATED ALWAYS AS IDENTITY,
    id            uuid        NOT NULL,
    role          text        NOT NULL,
    content       text        NOT NULL,
    sender_name   text,
    sender_id     text,
    tool_calls    json,
    tool_call_id  text,
    status        text        NOT NULL,
    run_id        uuid,
    -- shown by the history endpoint (user and assistant messages with text)
    visible       boolean     NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (org_id, thread_id, seq),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX messages_org_id ON messages (org_id, id);
CREATE INDEX messages_visible ON messages (org_id, thread_id, seq) WHERE visible;

CREATE TABLE usage_records (
    org_id               text        NOT NULL,
    id                   uuid        NOT NULL,
    agent_id             uuid        NOT NULL,
    thread_id            uuid        NOT NULL,
    run_id               uuid        NOT NULL,
    message_id           uuid,
    provider             text        NOT NULL,
    model                text        NOT NULL,
    input_tokens         integer     NOT NULL,
    output_tokens        integer     NOT NULL,
    cached_input_tokens  integer,
    key_source           text        NOT NULL,
    metadata             json        NOT NULL,
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (org_id, id)
);
CREATE INDEX usage_records_thread ON usage_records (org_id, thread_id, created_at);
CREATE INDEX usage_records_created ON usage_records (org_id, created_at);
