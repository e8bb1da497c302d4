-- Deletion and erasure (docs/privacy.md; agentsvc_adapters/postgres/erasure.py): an
-- organization's thread retention, and the indexes a thread's deletion, a user's
-- erasure and the retention sweep read by. Every key leads with org_id (see 0001).
CREATE TABLE thread_retention (
    org_id  text     PRIMARY KEY REFERENCES organizations (org_id),
    days    integer  NOT NULL,
    CONSTRAINT thread_retention_days CHECK (days BETWEEN 1 AND 3650)
);
-- the sweep: an organization's threads by their last change
CREATE INDEX threads_updated ON threads (org_id, updated_at);
-- a user's threads, a visitor's threads, a user's (a thread's) memories
CREATE INDEX threads_created_by ON threads (org_id, created_by) WHERE created_by IS NOT NULL;
CREATE INDEX visitor_threads_visitor ON visitor_threads (org_id, visitor_id);
CREATE INDEX memories_scope_id ON memories (org_id, scope, scope_id) WHERE scope_id IS NOT NULL;
-- what a thread's deletion scrubs: runner runs and channel messages of the thread
CREATE INDEX runner_runs_thread ON runner_runs (org_id, thread_id) WHERE thread_id IS NOT NULL;
CREATE INDEX channel_events_thread ON channel_events (org_id, thread_id)
    WHERE thread_id IS NOT NULL;
CREATE INDEX channel_contacts_thread ON channel_contacts (org_id, thread_id)
    WHERE thread_id IS NOT NULL;
