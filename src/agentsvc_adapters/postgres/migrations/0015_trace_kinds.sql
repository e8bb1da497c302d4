-- Trace records that are not turns (a runner run's, TraceStore.add_trace): analytics
-- counts replies from turns' records only (kind = 'agent_turn'), so the index its
-- live part reads holds kind too, to stay an index-only scan
-- (agentsvc_adapters/postgres/traces.py, _TRACES). It replaces traces_started (the
-- list's index as well): as many B-tree writes per record as before.
DROP INDEX traces_started;
CREATE INDEX traces_started ON traces (org_id, started_at DESC, id DESC)
    INCLUDE (agent_id, kind, status, input_messages, tool_calls, tool_errors, stored_at);
