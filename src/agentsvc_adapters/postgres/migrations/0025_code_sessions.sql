-- Code agents and code sessions (agentsvc_core/entities/code_session.py): the
-- templates, the sessions, and each session's append-only timeline.
CREATE TABLE code_agents (
    org_id                 text         NOT NULL,
    id                     uuid         NOT NULL,
    name                   text         NOT NULL,
    model                  text         NOT NULL,
    repo_url               text,
    starting_ref           text,
    preamble               text         NOT NULL,
    branch_prefix          text         NOT NULL,
    auto_create_pr         boolean      NOT NULL,
    git_credential_sealed  text,        -- the sealed token: never answered
    computer               jsonb        NOT NULL,
    created_at             timestamptz  NOT NULL,
    updated_at             timestamptz  NOT NULL,
    PRIMARY KEY (org_id, id)
);
CREATE INDEX code_agents_created ON code_agents (org_id, created_at, id);

-- A session keeps what it needs of its code agent in ``work`` (the job's record:
-- transcript, files' hashes, sandbox, lease), so deleting the agent leaves it.
CREATE TABLE code_sessions (
    org_id          text              NOT NULL,
    id              uuid              NOT NULL,
    code_agent_id   uuid              NOT NULL,
    status          text              NOT NULL,
    title           text              NOT NULL,
    prompt          text              NOT NULL,
    repo_url        text              NOT NULL,
    ref             text,
    branch          text,
    pr_url          text,
    usage           jsonb             NOT NULL,
    error           text,
    last_event_seq  integer           NOT NULL,
    archived        boolean           NOT NULL,
    work            jsonb             NOT NULL,
    created_at      timestamptz       NOT NULL,
    updated_at      timestamptz       NOT NULL,
    PRIMARY KEY (org_id, id)
);
-- the list, newest first (and one code agent's)
CREATE INDEX code_sessions_created ON code_sessions (org_id, created_at DESC, id DESC);
CREATE INDEX code_sessions_agent ON code_sessions (org_id, code_agent_id, created_at DESC, id DESC);

-- The timeline: (session, seq) is the key; a session's row is locked while its
-- events are appended (``CodeSessionStore.change``), so seq never skips nor repeats.
CREATE TABLE code_session_events (
    org_id      text         NOT NULL,
    session_id  uuid         NOT NULL,
    seq         integer      NOT NULL,
    type        text         NOT NULL,
    data        jsonb        NOT NULL,
    created_at  timestamptz  NOT NULL,
    PRIMARY KEY (org_id, session_id, seq),
    FOREIGN KEY (org_id, session_id) REFERENCES code_sessions (org_id, id) ON DELETE CASCADE
);
