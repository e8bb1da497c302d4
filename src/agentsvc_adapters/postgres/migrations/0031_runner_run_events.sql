-- A runner run's events (GET /api/runners/{id}/runs/{runId}/events): each of the
-- run's state changes writes its events in the statement that writes the run
-- (save_run), numbered from 1 per run; they go with the run.
CREATE TABLE runner_run_events (
    org_id      text         NOT NULL,
    run_id      uuid         NOT NULL,
    seq         integer      NOT NULL,
    type        text         NOT NULL,
    data        json         NOT NULL,
    created_at  timestamptz  NOT NULL,
    PRIMARY KEY (org_id, run_id, seq),
    FOREIGN KEY (org_id, run_id) REFERENCES runner_runs (org_id, id) ON DELETE CASCADE
);
