-- Webhook tools: an organization's HTTP endpoints its agents' models may call.
-- headers holds a sealed value (AES-256-GCM, key id inside), never plaintext.
-- Which agents may use which tools is a sealed record of kind 'delegated'
-- (org_secrets), read with the turn.

CREATE TABLE webhook_tools (
    org_id            text        NOT NULL REFERENCES organizations (org_id),
    id                uuid        NOT NULL,
    name              text        NOT NULL,
    description       text        NOT NULL,
    parameters        json        NOT NULL,
    url               text        NOT NULL,
    method            text        NOT NULL,
    headers           text,
    timeout_ms        integer     NOT NULL,
    max_result_bytes  integer     NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    CONSTRAINT webhook_tools_org_name UNIQUE (org_id, name)
);
