-- The process that runs a reply: a random id that the process holds as a session
-- advisory lock while it lives (agentsvc_adapters/postgres/owners.py). NULL for runs
-- begun before this column (their process is unknown: only the heartbeat tells).
ALTER TABLE runs ADD COLUMN owner bigint;
