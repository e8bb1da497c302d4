-- Runners, their triggers, runs and suggestions; an agent's scheduled tasks are
-- triggers (and runs) owned by the agent (agentsvc_core/entities/runner.py).
-- Keys lead with org_id (see 0001). Triggers, runs and suggestions go with their
-- runner or their agent (ON DELETE CASCADE). Three indexes are global, for the
-- background work that names no organization: the inbound webhook's token, the
-- scheduler's due cron triggers and the sweep's stale runs.
--
-- Documents (a runner's input schema, steps and budget, a trigger's input, a run's
-- input, output, pipeline and step states) are json, not jsonb: nothing queries
-- into them, and json keeps what was written as it was (an object's keys in their
-- order, as the agents' tool_profiles; a NUL escaped in a string, which jsonb
-- refuses: a webhook's answer may hold one). Money is double precision: the
-- entities hold floats, which it stores bit for bit (numeric takes a float8 at 15
-- significant digits); the sums of a day's runs stay within a float's precision.

CREATE TABLE runners (
    org_id        text        NOT NULL REFERENCES organizations (org_id),
    id            uuid        NOT NULL,
    name          text        NOT NULL,
    description   text        NOT NULL,
    input_schema  json        NOT NULL,
    steps         json        NOT NULL,
    -- skill ids, in their order; an array (not a document) so that "the runners
    -- that bind a skill" is a plain query when the skills area needs it
    skills        uuid[]      NOT NULL,
    budget        json        NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (org_id, id)
);
-- the list, newest first
CREATE INDEX runners_created ON runners (org_id, created_at, id);

CREATE TABLE runner_triggers (
    org_id         text        NOT NULL,
    id             uuid        NOT NULL,
    runner_id      uuid,
    agent_id       uuid,
    kind           text        NOT NULL,
    name           text        NOT NULL,
    enabled        boolean     NOT NULL,
    input          json        NOT NULL,
    cron           text,
    timezone       text        NOT NULL,
    overlap        text        NOT NULL,
    catchup        text        NOT NULL,
    end_at         timestamptz,
    next_fire_at   timestamptz,
    last_fired_at  timestamptz,
    -- SHA-256 of a webhook's or button's token
    token_hash     bytea,
    token_hint     text,
    prompt         text,
    thread_id      uuid,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, runner_id) REFERENCES runners (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE,
    -- a runner's trigger or an agent's scheduled task, never both
    CONSTRAINT runner_triggers_owner CHECK ((runner_id IS NULL) <> (agent_id IS NULL))
);
-- a runner's (an agent's) triggers, oldest first; the cascades
CREATE INDEX runner_triggers_runner ON runner_triggers (org_id, runner_id, created_at, id);
CREATE INDEX runner_triggers_agent ON runner_triggers (org_id, agent_id, created_at, id);
-- the inbound webhook: its token names the trigger, and so the organization
CREATE UNIQUE INDEX runner_triggers_token ON runner_triggers (token_hash);
-- the scheduler: due cron triggers of every organization
CREATE INDEX runner_triggers_due ON runner_triggers (next_fire_at)
    WHERE kind = 'cron' AND enabled;

CREATE TABLE runner_runs (
    org_id               text             NOT NULL,
    id                   uuid             NOT NULL,
    -- NULL for an agent's scheduled task (agent_id names the agent)
    runner_id            uuid,
    agent_id             uuid,
    -- no foreign key: a deleted trigger leaves its runs
    trigger_id           uuid,
    trigger_kind         text             NOT NULL,
    status               text             NOT NULL,
    paused_reason        text,
    input                json             NOT NULL,
    output               json             NOT NULL,
    error                text,
    tokens               bigint           NOT NULL,
    cost_usd             double precision NOT NULL,
    pipeline             json             NOT NULL,
    steps                json             NOT NULL,
    cursor               integer          NOT NULL,
    thread_id            uuid,
    budget_extra_usd     double precision NOT NULL,
    budget_extra_tokens  bigint           NOT NULL,
    budget_warning       text,
    scheduled_for        timestamptz,
    idempotency_key      text,
    trace_id             text,
    -- grows with every write (save_run's compare-and-set)
    version              bigint           NOT NULL,
    created_at           timestamptz      NOT NULL,
    started_at           timestamptz,
    ended_at             timestamptz,
    updated_at           timestamptz      NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, runner_id) REFERENCES runners (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE,
    CONSTRAINT runner_runs_owner CHECK (runner_id IS NOT NULL OR agent_id IS NOT NULL)
);
-- the lists, newest first: a runner's runs (and spent_since), an agent's, all of an
-- organization's; the cascades
CREATE INDEX runner_runs_runner ON runner_runs (org_id, runner_id, created_at, id);
CREATE INDEX runner_runs_agent ON runner_runs (org_id, agent_id, created_at, id);
CREATE INDEX runner_runs_created ON runner_runs (org_id, created_at, id);
-- one run per idempotency key of a runner (of an agent, for its scheduled tasks)
CREATE UNIQUE INDEX runner_runs_idempotency ON runner_runs
    (org_id, coalesce(runner_id, agent_id), idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- a cron tick is taken once; and the scheduler's "has this trigger a run going?"
CREATE UNIQUE INDEX runner_runs_tick ON runner_runs (org_id, trigger_id, scheduled_for);
-- the sweep: queued or running runs of every organization not written lately
CREATE INDEX runner_runs_stale ON runner_runs (updated_at)
    WHERE status IN ('queued', 'running');

CREATE TABLE runner_suggestions (
    org_id      text        NOT NULL,
    id          uuid        NOT NULL,
    runner_id   uuid,
    agent_id    uuid,
    title       text        NOT NULL,
    detail      text        NOT NULL,
    dismissed   boolean     NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, runner_id) REFERENCES runners (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE
);
-- the lists, newest first; the cascades
CREATE INDEX runner_suggestions_runner ON runner_suggestions (org_id, runner_id, created_at, id);
CREATE INDEX runner_suggestions_agent ON runner_suggestions (org_id, agent_id, created_at, id);
