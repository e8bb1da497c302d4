-- Plans of a thread, their todos and the todos' dependency edges (docs/api.md#plans).
-- Every key and index leads with org_id (see 0001). A plan goes with its thread,
-- todos with their plan, edges with either of their todos (ON DELETE CASCADE).

CREATE TABLE plans (
    org_id      text        NOT NULL,
    id          uuid        NOT NULL,
    thread_id   uuid        NOT NULL,
    title       text        NOT NULL,
    status      text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);
CREATE INDEX plans_thread ON plans (org_id, thread_id, created_at);

CREATE TABLE plan_todos (
    org_id       text        NOT NULL,
    plan_id      uuid        NOT NULL,
    id           uuid        NOT NULL,
    content      text        NOT NULL,
    active_form  text,
    status       text        NOT NULL,
    -- display only; kept consistent by the use case (a deleted parent's children
    -- take its parent), so no foreign key
    parent_id    uuid,
    position     integer     NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (org_id, plan_id, id),
    FOREIGN KEY (org_id, plan_id) REFERENCES plans (org_id, id) ON DELETE CASCADE
);

-- todo_id depends on depends_on_id: both of the same plan (the foreign keys say so)
CREATE TABLE plan_todo_deps (
    org_id         text NOT NULL,
    plan_id        uuid NOT NULL,
    todo_id        uuid NOT NULL,
    depends_on_id  uuid NOT NULL,
    PRIMARY KEY (org_id, plan_id, todo_id, depends_on_id),
    FOREIGN KEY (org_id, plan_id, todo_id)
        REFERENCES plan_todos (org_id, plan_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, plan_id, depends_on_id)
        REFERENCES plan_todos (org_id, plan_id, id) ON DELETE CASCADE,
    CONSTRAINT plan_todo_deps_not_self CHECK (todo_id <> depends_on_id)
);
-- the cascade from a deleted blocker
CREATE INDEX plan_todo_deps_depends_on ON plan_todo_deps (org_id, plan_id, depends_on_id);
