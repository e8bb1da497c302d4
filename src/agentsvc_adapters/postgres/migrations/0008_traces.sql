-- Stored traces (GET /api/logs; agentsvc_core/ports/traces.py) and what analytics
-- reads (GET /api/analytics). Written with a turn's final write, in its statement.

-- The cost of a model call (NULL: its model has no price), what it was for, and
-- when it was stored (the transaction's time: what the hourly sums fold by).
ALTER TABLE usage_records
    ADD COLUMN cost_usd  double precision,
    ADD COLUMN purpose   text NOT NULL DEFAULT 'reply',
    ADD COLUMN stored_at timestamptz NOT NULL DEFAULT now();
-- Analytics reads the hourly sums (usage_hourly) and, for the hours since they were
-- last folded, the records themselves: this index holds every column it reads, so
-- that part is an index-only scan of a few hours (no heap visit once the table is
-- vacuumed: autovacuum does so for inserts too). It replaces the plain
-- (org_id, created_at) index: as many B-tree writes per record as before.
DROP INDEX usage_records_created;
CREATE INDEX usage_records_analytics ON usage_records (org_id, created_at)
    INCLUDE (agent_id, model, purpose, key_source, input_tokens, output_tokens,
             cached_input_tokens, cost_usd, stored_at);
-- The fold's scan of what was stored since the last one (all organizations): rows
-- come in stored_at order, which BRIN summarises for next to nothing on insert.
CREATE INDEX usage_records_stored ON usage_records USING brin (stored_at);

-- One row per turn (and later per runner run): its totals, rolled up on write, and
-- its spans, one JSON array read only by GET /api/logs/{traceId}. A trace id sent
-- with several turns (one traceparent) has a row for each; the trace is their union.
CREATE TABLE traces (
    org_id               text             NOT NULL,
    id                   text             NOT NULL,  -- W3C trace id, 32 hex
    root_span_id         text             NOT NULL,  -- the turn's own span
    kind                 text             NOT NULL,
    name                 text             NOT NULL,
    status               text             NOT NULL,  -- ok | error
    run_status           text,
    started_at           timestamptz      NOT NULL,
    ended_at             timestamptz      NOT NULL,
    duration_ms          integer          NOT NULL,
    agent_id             uuid,
    thread_id            uuid,
    run_id               uuid,
    runner_id            uuid,
    message_id           uuid,
    model                text,
    input_tokens         bigint           NOT NULL,
    output_tokens        bigint           NOT NULL,
    cached_input_tokens  bigint           NOT NULL,
    cost_usd             double precision,
    model_calls          integer          NOT NULL,
    tool_calls           integer          NOT NULL,
    tool_errors          integer          NOT NULL,
    input_messages       integer          NOT NULL,
    key_source           text,
    error                text,
    first_token_ms       integer,
    keep_until           timestamptz      NOT NULL,
    stored_at            timestamptz      NOT NULL DEFAULT now(),
    spans                json             NOT NULL,
    PRIMARY KEY (org_id, id, root_span_id)
) WITH (
    -- as run_events: a turn's spans are a few KB, kept in the row uncompressed (the
    -- list and analytics read other columns, through their indexes)
    toast_tuple_target = 8160
);
-- The list, newest first, and analytics' sums over a range (index-only: it holds
-- what they read).
CREATE INDEX traces_started ON traces (org_id, started_at DESC, id DESC)
    INCLUDE (agent_id, status, input_messages, tool_calls, tool_errors, stored_at);
CREATE INDEX traces_agent ON traces (org_id, agent_id, started_at DESC, id DESC);
CREATE INDEX traces_thread ON traces (org_id, thread_id, started_at DESC, id DESC);
-- Few rows each: nothing written for a turn that went well.
CREATE INDEX traces_runner ON traces (org_id, runner_id, started_at DESC, id DESC)
    WHERE runner_id IS NOT NULL;
CREATE INDEX traces_errors ON traces (org_id, started_at DESC, id DESC)
    WHERE status = 'error';
CREATE INDEX traces_keep_until ON traces USING brin (keep_until);
CREATE INDEX traces_stored ON traces USING brin (stored_at);

-- Checks recorded on spans: heuristic ones when a turn ends (only what they found),
-- and later model-judged and human ones.
CREATE TABLE trace_evaluations (
    org_id      text              NOT NULL,
    trace_id    text              NOT NULL,
    seq         bigint            GENERATED ALWAYS AS IDENTITY,
    span_id     text,
    name        text              NOT NULL,
    source      text              NOT NULL,
    score       double precision,
    label       text,
    detail      text,
    keep_until  timestamptz       NOT NULL,
    PRIMARY KEY (org_id, trace_id, seq)
);
CREATE INDEX trace_evaluations_keep_until ON trace_evaluations USING brin (keep_until);

-- The threads analytics counts: an index-only scan of the window (threads are
-- opened far less often than turns run, so one more index costs little).
CREATE INDEX threads_analytics ON threads (org_id, created_at) INCLUDE (agent_id);

-- Analytics' hourly sums, folded from the rows above by the maintenance sweep
-- (agentsvc_adapters/postgres/traces.py, roll_up) and kept for good: a 30-day
-- answer reads 720 hours of sums, not millions of rows, and outlives the traces'
-- retention.
CREATE TABLE usage_hourly (
    org_id               text              NOT NULL,
    hour                 timestamptz       NOT NULL,
    agent_id             uuid              NOT NULL,
    model                text              NOT NULL,
    purpose              text              NOT NULL,
    key_source           text              NOT NULL,
    calls                bigint            NOT NULL,
    input_tokens         bigint            NOT NULL,
    output_tokens        bigint            NOT NULL,
    cached_input_tokens  bigint            NOT NULL,
    cost_usd             double precision  NOT NULL,  -- the known costs
    unpriced             bigint            NOT NULL,  -- calls without a price
    PRIMARY KEY (org_id, hour, agent_id, model, purpose, key_source)
);
CREATE TABLE traces_hourly (
    org_id          text         NOT NULL,
    hour            timestamptz  NOT NULL,
    agent_id        uuid         NOT NULL,
    replies         bigint       NOT NULL,
    messages        bigint       NOT NULL,
    tool_calls      bigint       NOT NULL,
    tool_errors     bigint       NOT NULL,
    errors          bigint       NOT NULL,
    PRIMARY KEY (org_id, hour, agent_id)
);
-- The same by UTC day, folded with them: a 30-day series by day reads 30 days of
-- these (and the hours of the window's partial days from the hourly ones).
CREATE TABLE usage_daily (
    org_id               text              NOT NULL,
    day                  timestamptz       NOT NULL,
    agent_id             uuid              NOT NULL,
    model                text              NOT NULL,
    purpose              text              NOT NULL,
    key_source           text              NOT NULL,
    calls                bigint            NOT NULL,
    input_tokens         bigint            NOT NULL,
    output_tokens        bigint            NOT NULL,
    cached_input_tokens  bigint            NOT NULL,
    cost_usd             double precision  NOT NULL,
    unpriced             bigint            NOT NULL,
    PRIMARY KEY (org_id, day, agent_id, model, purpose, key_source)
);
CREATE TABLE traces_daily (
    org_id          text         NOT NULL,
    day             timestamptz  NOT NULL,
    agent_id        uuid         NOT NULL,
    replies         bigint       NOT NULL,
    messages        bigint       NOT NULL,
    tool_calls      bigint       NOT NULL,
    tool_errors     bigint       NOT NULL,
    errors          bigint       NOT NULL,
    PRIMARY KEY (org_id, day, agent_id)
);
-- How far the fold has gone: rows stored at or before rolled_to are in the sums.
-- One row per source for the whole service (not an organization's data).
CREATE TABLE rollup_marks (
    name       text         PRIMARY KEY,
    rolled_to  timestamptz  NOT NULL
);
INSERT INTO rollup_marks VALUES ('analytics', '-infinity');
