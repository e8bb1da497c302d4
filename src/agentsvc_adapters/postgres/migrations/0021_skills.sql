-- Skills (agentsvc_core/entities/skill.py): the skill, and every version it had (a
-- binding pinned to a version reads it after a sync). A name is one skill's in its
-- organization (the model loads a skill by it). Versions go with their skill.
CREATE TABLE skills (
    org_id          text        NOT NULL,
    id              uuid        NOT NULL,
    name            text        NOT NULL,
    renamed         boolean     NOT NULL,
    source          jsonb       NOT NULL,
    version         integer     NOT NULL,
    status          text        NOT NULL,
    sync_error      text,
    last_synced_at  timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (org_id, id)
);
CREATE UNIQUE INDEX skills_name ON skills (org_id, name);

CREATE TABLE skill_versions (
    org_id        text    NOT NULL,
    skill_id      uuid    NOT NULL,
    version       integer NOT NULL,
    name          text    NOT NULL,
    description   text    NOT NULL,
    body          text    NOT NULL,
    allowed_tools text[]  NOT NULL,
    front_matter  jsonb   NOT NULL,
    -- path -> bytes, as MessagePack: the files are read and written together
    files         bytea   NOT NULL,
    content_hash  text    NOT NULL,
    PRIMARY KEY (org_id, skill_id, version),
    FOREIGN KEY (org_id, skill_id) REFERENCES skills (org_id, id) ON DELETE CASCADE
);

-- A runner's skill bindings become {skill_id, pinned_version, enabled} objects
-- (they were skill ids, which become bindings at the current version, enabled).
ALTER TABLE runners ADD COLUMN skill_bindings json NOT NULL DEFAULT '[]';
UPDATE runners SET skill_bindings = (
    SELECT coalesce(
        jsonb_agg(
            jsonb_build_object('skill_id', s, 'pinned_version', NULL, 'enabled', true)
            ORDER BY n
        ),
        '[]'::jsonb
    )::json
    FROM unnest(skills) WITH ORDINALITY AS u (s, n)
);
ALTER TABLE runners DROP COLUMN skills;
ALTER TABLE runners RENAME COLUMN skill_bindings TO skills;
ALTER TABLE runners ALTER COLUMN skills DROP DEFAULT;
