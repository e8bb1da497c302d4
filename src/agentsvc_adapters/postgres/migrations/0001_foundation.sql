-- Organizations, API keys and agents.
--
-- Every table carries org_id and every primary key and index leads with it, so
-- the schema can be distributed by organization (e.g. Citus, distribution column
-- org_id). The one exception is the unique index on api_keys.key_hash: a request
-- names its organization only through its key, so that lookup is global; with
-- Citus, organizations and api_keys are small reference tables (see docs/deploy.md).

CREATE TABLE organizations (
    org_id      text        PRIMARY KEY,
    created_at  timestamptz NOT NULL
);

CREATE TABLE api_keys (
    org_id          text        NOT NULL REFERENCES organizations (org_id),
    id              uuid        NOT NULL,
    name            text        NOT NULL,
    display_prefix  text        NOT NULL,
    key_hash        text        NOT NULL,
    created_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    PRIMARY KEY (org_id, id)
);
CREATE UNIQUE INDEX api_keys_key_hash ON api_keys (key_hash);

CREATE TABLE agents (
    org_id            text        NOT NULL REFERENCES organizations (org_id),
    id                uuid        NOT NULL,
    name              text        NOT NULL,
    description       text        NOT NULL,
    stable_preamble   text        NOT NULL,
    default_model     text        NOT NULL,
    -- json, not jsonb: profiles come back in the order the client gave them.
    tool_profiles     json,
    default_profile   text,
    runtime_provider  text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (org_id, id)
);
CREATE INDEX agents_org_created ON agents (org_id, created_at, id);
