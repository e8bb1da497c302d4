-- Stored traces (GET /api/logs; agentsvc_core/ports/traces.py) and what analytics
-- reads (GET /api/analytics). Written with a turn's final write, in its statement.

-- The cost of a model call (NULL: its model has no price) and what it was for.
ALTER TABLE usage_records
    ADD COLUMN cost_usd double precision,
    ADD COLUMN purpose  text NOT NULL DEFAULT 'reply';
-- Analytics sums an organization's records of a time range: this index holds every
-- column it reads, so the sums are an index-only scan of the range (no heap visit
-- once the table is vacuumed: autovacuum does so for inserts too). It replaces the
-- plain (org_id, created_at) index: as many index writes per record as before.
DROP INDEX usage_records_created;
CREATE INDEX usage_records_analytics ON usage_records (org_id, created_at)
    INCLUDE (agent_id, model, purpose, key_source, input_tokens, output_tokens,
             cached_input_tokens, cost_usd);

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
    INCLUDE (agent_id, status, input_messages, tool_calls, tool_errors);
CREATE INDEX traces_agent ON traces (org_id, agent_id, started_at DESC, id DESC);
CREATE INDEX traces_thread ON traces (org_id, thread_id, started_at DESC, id DESC);
-- Few rows each: nothing written for a turn that went well.
CREATE INDEX traces_runner ON traces (org_id, runner_id, started_at DESC, id DESC)
    WHERE runner_id IS NOT NULL;
CREATE INDEX traces_errors ON traces (org_id, started_at DESC, id DESC)
    WHERE status = 'error';
CREATE INDEX traces_keep_until ON traces USING brin (keep_until);

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
