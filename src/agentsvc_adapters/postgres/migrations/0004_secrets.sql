-- Small sealed records per organization: OAuth states (single use), tokens and
-- dynamically registered clients. value is sealed (AES-256-GCM), never plaintext.
CREATE TABLE org_secrets (
    org_id      text        NOT NULL,
    kind        text        NOT NULL,
    key         text        NOT NULL,
    value       text        NOT NULL,
    expires_at  timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, kind, key)
);
CREATE INDEX org_secrets_expiry ON org_secrets (org_id, expires_at) WHERE expires_at IS NOT NULL;
