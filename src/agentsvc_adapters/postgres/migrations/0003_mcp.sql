-- MCP servers and their agent and runner attachments.
-- credentials holds a sealed value (AES-256-GCM, key id inside), never plaintext.

CREATE TABLE mcp_servers (
    org_id         text        NOT NULL REFERENCES organizations (org_id),
    id             uuid        NOT NULL,
    name           text        NOT NULL,
    slug           text        NOT NULL,
    transport      text        NOT NULL,
    url            text,
    command        text,
    args           json        NOT NULL,
    credentials    text,
    allowed_tools  json,
    status         text        NOT NULL,
    tools_cache    json        NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    CONSTRAINT mcp_servers_org_slug UNIQUE (org_id, slug)
);
CREATE INDEX mcp_servers_org_created ON mcp_servers (org_id, created_at);

CREATE TABLE mcp_attachments (
    org_id         text        NOT NULL,
    owner_kind     text        NOT NULL,   -- 'agent' or 'runner'
    owner_id       uuid        NOT NULL,
    mcp_id         uuid        NOT NULL,
    allowed_tools  json,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (org_id, owner_kind, owner_id, mcp_id),
    FOREIGN KEY (org_id, mcp_id) REFERENCES mcp_servers (org_id, id) ON DELETE CASCADE
);
CREATE INDEX mcp_attachments_server ON mcp_attachments (org_id, mcp_id);
