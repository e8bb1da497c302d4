-- Database integrations of an organization. connection holds a sealed value
-- (AES-256-GCM, key id inside, bound to org and row), never plaintext.
-- Agents' attachments are a sealed record of kind 'integrations' in org_secrets.

CREATE TABLE integrations (
    org_id                text        NOT NULL REFERENCES organizations (org_id),
    id                    uuid        NOT NULL,
    name                  text        NOT NULL,
    slug                  text        NOT NULL,
    type                  text        NOT NULL,
    connection            text        NOT NULL,
    allowed_tables        json,
    max_rows              integer     NOT NULL,
    max_bytes             integer     NOT NULL,
    statement_timeout_ms  integer     NOT NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    CONSTRAINT integrations_org_slug UNIQUE (org_id, slug),
    CONSTRAINT integrations_org_name UNIQUE (org_id, name)
);
CREATE INDEX integrations_org_created ON integrations (org_id, created_at);
