-- Published chats (agentsvc_core/entities/published_chat.py): one per agent, named
-- by a slug unique across the service, and the threads their visitors open.
CREATE TABLE published_chats (
    org_id              text             NOT NULL,
    agent_id            uuid             NOT NULL,
    slug                text             NOT NULL,
    visibility          text             NOT NULL,
    title               text             NOT NULL,
    description         text             NOT NULL,
    welcome_message     text             NOT NULL,
    starter_prompts     text[]           NOT NULL,
    is_active           boolean          NOT NULL,
    allowed_domains     text[],          -- NULL: the organization's embed domains
    rate_limit_per_min  integer          NOT NULL,
    daily_cost_cap_usd  double precision,
    allow_user_grants         boolean          NOT NULL,
    identity_sealed     text             NOT NULL,  -- the identity secret, sealed
    previous_sealed     text,
    rotated_at          timestamptz,
    created_at          timestamptz      NOT NULL,
    updated_at          timestamptz      NOT NULL,
    PRIMARY KEY (org_id, agent_id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE
);
-- the public routes name the chat by its slug alone
CREATE UNIQUE INDEX published_chats_slug ON published_chats (slug);
-- the public marketplace listing: active public chats, newest first
CREATE INDEX published_chats_listed ON published_chats (created_at DESC)
    WHERE is_active AND visibility = 'public';

-- A visitor's thread: the visitor owns it and nothing else. It stays when the chat
-- is unpublished (the owner still reads it) and goes with its thread.
CREATE TABLE visitor_threads (
    org_id      text         NOT NULL,
    thread_id   uuid         NOT NULL,
    agent_id    uuid         NOT NULL,
    visitor_id  text         NOT NULL,
    identified  boolean      NOT NULL,
    created_at  timestamptz  NOT NULL,
    PRIMARY KEY (org_id, thread_id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE INDEX visitor_threads_agent ON visitor_threads (org_id, agent_id, created_at DESC);
