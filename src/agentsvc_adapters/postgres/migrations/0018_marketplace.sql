-- Agents' marketplace profiles (agentsvc_core/entities/marketplace.py): public by
-- purpose, so plain columns. The handle is unique across the service (a profile
-- without one has NULL, which the index lets repeat); a profile goes with its
-- agent. The avatar's bytes (re-encoded by the service, at most 1 MB) are a
-- column of their own, read only by the avatar's route.
CREATE TABLE marketplace_profiles (
    org_id        text        NOT NULL,
    agent_id      uuid        NOT NULL,
    handle        text,
    display_name  text        NOT NULL,
    tagline       text        NOT NULL,
    description   text        NOT NULL,
    categories    text[]      NOT NULL,
    capabilities  text[]      NOT NULL,
    listed        boolean     NOT NULL,
    avatar_type   text,
    avatar_sha256 text,
    avatar        bytea,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (org_id, agent_id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX marketplace_profiles_handle ON marketplace_profiles (handle);
-- the public avatar route names the agent alone (its id is unique across the service)
CREATE INDEX marketplace_profiles_agent ON marketplace_profiles (agent_id);
