-- The events of replies, kept so a client can re-attach to a stream
-- (GET /api/threads/{threadId}/stream; agentsvc_core/ports/streams.py). A row is a
-- batch: the JSON array of [event name, data] of events first .. first + count - 1.
-- Written with the reply's final write, and while it runs only when a client in
-- another process follows it. Dropped after keep_until by the maintenance sweep.
CREATE TABLE run_events (
    org_id      text        NOT NULL,
    run_id      uuid        NOT NULL,
    seq_end     integer     NOT NULL,  -- first + count: a batch written twice is one row
    first       integer     NOT NULL,
    data        bytea       NOT NULL,
    keep_until  timestamptz NOT NULL,
    PRIMARY KEY (org_id, run_id, seq_end)
) WITH (
    -- A reply's batch is a few KB (50 tokens: about 2 KB). Past the default 2 KB
    -- PostgreSQL would compress it and move it to the TOAST table on every turn,
    -- which cost about 0.45 ms of PostgreSQL's CPU per turn (bench); up to a page's
    -- worth it stays in the row, as written.
    toast_tuple_target = 8160
);
-- The sweep's purge: rows arrive roughly in keep_until order, which BRIN summarises
-- for next to nothing on the insert path.
CREATE INDEX run_events_keep_until ON run_events USING brin (keep_until);

-- Idempotency keys (Idempotency-Key; agentsvc_core/ports/idempotency.py): per
-- organization, 24 hours. A send's key names its run; another POST's key holds its
-- response once complete (status NULL until then), the body sealed.
CREATE TABLE idempotency_keys (
    org_id        text        NOT NULL,
    key           text        NOT NULL,
    fingerprint   bytea       NOT NULL,
    run_id        uuid,
    status        integer,
    content_type  text,
    body          text,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys USING brin (expires_at);
