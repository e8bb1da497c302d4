-- Projects: a named grouping of an organization's agents and runners
-- (agentsvc_core/entities/project.py). A member names its project; the foreign keys
-- lead with org_id, so a member can only name a project of its own organization.
-- A project is deleted after its members are detached (PostgresProjects.delete);
-- the keys make a change that names it meanwhile fail instead of leaving a member
-- naming a project that is gone (the constraint names end in "_project", which
-- pool.translate reads as "project not found").
CREATE TABLE projects (
    org_id      text        NOT NULL REFERENCES organizations (org_id),
    id          uuid        NOT NULL,
    name        text        NOT NULL,
    description text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, id)
);

ALTER TABLE agents ADD COLUMN project_id uuid;
ALTER TABLE agents ADD CONSTRAINT agents_project
    FOREIGN KEY (org_id, project_id) REFERENCES projects (org_id, id);
CREATE INDEX agents_by_project ON agents (org_id, project_id) WHERE project_id IS NOT NULL;

ALTER TABLE runners ADD COLUMN project_id uuid;
ALTER TABLE runners ADD CONSTRAINT runners_project
    FOREIGN KEY (org_id, project_id) REFERENCES projects (org_id, id);
CREATE INDEX runners_by_project ON runners (org_id, project_id) WHERE project_id IS NOT NULL;
