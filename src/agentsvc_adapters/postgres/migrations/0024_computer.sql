-- Computer instances (agentsvc_core/entities/computer.py): the sandboxes an
-- agent's computer runs in. The configuration is a sealed record (kind
-- 'computer'); the sandbox itself is the provider's, named by ref.
CREATE TABLE computer_instances (
    org_id          text         NOT NULL,
    id              uuid         NOT NULL,
    agent_id        uuid         NOT NULL,
    thread_id       uuid,        -- NULL: the agent's shared instance (no key: a thread may go)
    provider        text         NOT NULL,
    status          text         NOT NULL,
    persistent      boolean      NOT NULL,
    created_at      timestamptz  NOT NULL,
    last_used_at    timestamptz  NOT NULL,
    disk_bytes      bigint       NOT NULL,
    ref             text,
    state_lost      boolean      NOT NULL,
    error           text,
    idle_timeout_s  integer      NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE
);
-- one active instance per agent and thread (NULL thread: the shared one); two
-- first uses that race make one, the loser reads the winner
CREATE UNIQUE INDEX computer_instances_one_active
    ON computer_instances (org_id, agent_id, COALESCE(thread_id, '00000000-0000-0000-0000-000000000000'))
    WHERE status <> 'destroyed';
CREATE INDEX computer_instances_agent ON computer_instances (org_id, agent_id, created_at DESC);
CREATE INDEX computer_instances_thread ON computer_instances (org_id, thread_id)
    WHERE thread_id IS NOT NULL AND status <> 'destroyed';
-- the idle sweep: running instances by their last use
CREATE INDEX computer_instances_running ON computer_instances (last_used_at)
    WHERE status IN ('ready', 'idle');
