-- Event webhooks (agentsvc_core/entities/event_webhook.py, docs/webhooks.md): the
-- organizations' endpoints, the events published to them and each delivery.
CREATE TABLE event_webhook_endpoints (
    org_id           text         NOT NULL,
    id               uuid         NOT NULL,
    url              text         NOT NULL,
    description      text         NOT NULL,
    events           text[]       NOT NULL,
    enabled          boolean      NOT NULL,
    secret_sealed    text         NOT NULL,  -- the sealed whsec_ secret: never answered
    disabled_reason  text,
    created_at       timestamptz  NOT NULL,
    updated_at       timestamptz  NOT NULL,
    PRIMARY KEY (org_id, id)
);

-- An event as it is sent: ``body`` is the exact JSON every delivery signs; the
-- thread whose text it holds, if any, so deleting the thread deletes it.
CREATE TABLE event_webhook_events (
    org_id      text         NOT NULL,
    id          text         NOT NULL,
    type        text         NOT NULL,
    thread_id   uuid,
    body        text         NOT NULL,
    created_at  timestamptz  NOT NULL,
    PRIMARY KEY (org_id, id)
);
CREATE INDEX event_webhook_events_thread ON event_webhook_events (org_id, thread_id)
    WHERE thread_id IS NOT NULL;
-- the sweep's: events past their retention, of every organization
CREATE INDEX event_webhook_events_created ON event_webhook_events (created_at);

-- One event to one endpoint; a resend is another row. Gone with the endpoint or
-- the event.
CREATE TABLE event_webhook_deliveries (
    org_id           text         NOT NULL,
    id               uuid         NOT NULL,
    endpoint_id      uuid         NOT NULL,
    event_id         text         NOT NULL,
    event_type       text         NOT NULL,
    status           text         NOT NULL,
    attempts         jsonb        NOT NULL,
    next_attempt_at  timestamptz,
    created_at       timestamptz  NOT NULL,
    updated_at       timestamptz  NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, endpoint_id) REFERENCES event_webhook_endpoints (org_id, id)
        ON DELETE CASCADE,
    FOREIGN KEY (org_id, event_id) REFERENCES event_webhook_events (org_id, id)
        ON DELETE CASCADE
);
-- an endpoint's deliveries, newest first
CREATE INDEX event_webhook_deliveries_endpoint
    ON event_webhook_deliveries (org_id, endpoint_id, created_at DESC, id DESC);
CREATE INDEX event_webhook_deliveries_event ON event_webhook_deliveries (org_id, event_id);
-- the sweep's: pending deliveries by when they are due
CREATE INDEX event_webhook_deliveries_pending ON event_webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
