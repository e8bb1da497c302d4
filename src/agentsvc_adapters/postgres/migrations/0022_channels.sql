-- Channels (agentsvc_core/entities/channel.py): an agent's doors onto messaging
-- platforms, the contacts who write through them, which thread each external chat
-- is, and the inbound events they received.
CREATE TABLE channels (
    org_id              text         NOT NULL,
    id                  uuid         NOT NULL,
    agent_id            uuid         NOT NULL,
    type                text         NOT NULL,
    name                text         NOT NULL,
    status              text         NOT NULL,
    status_reason       text,
    config              jsonb        NOT NULL,
    credentials_sealed  text,        -- one sealed JSON object of strings
    dm_policy           text         NOT NULL,
    allow_from          text[]       NOT NULL,
    group_policy        text         NOT NULL,
    created_at          timestamptz  NOT NULL,
    updated_at          timestamptz  NOT NULL,
    PRIMARY KEY (org_id, id),
    FOREIGN KEY (org_id, agent_id) REFERENCES agents (org_id, id) ON DELETE CASCADE
);
-- the public inbound endpoint names the channel alone (its id is unique)
CREATE UNIQUE INDEX channels_id ON channels (id);
CREATE INDEX channels_agent ON channels (org_id, agent_id, created_at);
-- one whatsapp_web channel per agent: its QR route is keyed by type
CREATE UNIQUE INDEX channels_one_whatsapp_web ON channels (org_id, agent_id)
    WHERE type = 'whatsapp_web';

-- Someone who wrote to a channel, by the platform's id for them.
CREATE TABLE channel_contacts (
    org_id           text         NOT NULL,
    id               uuid         NOT NULL,
    channel_id       uuid         NOT NULL,
    external_id      text         NOT NULL,
    display_name     text,
    username         text,
    thread_id        uuid,        -- their direct chat's thread (no key: it may go)
    status           text         NOT NULL,
    pairing_code     text,
    first_seen_at    timestamptz  NOT NULL,
    last_message_at  timestamptz,
    PRIMARY KEY (org_id, id),
    UNIQUE (org_id, channel_id, external_id),
    FOREIGN KEY (org_id, channel_id) REFERENCES channels (org_id, id) ON DELETE CASCADE
);
CREATE INDEX channel_contacts_page
    ON channel_contacts (org_id, channel_id, first_seen_at DESC, id DESC);

-- One thread per (channel, external chat); the mapping goes with its thread.
CREATE TABLE channel_chats (
    org_id      text  NOT NULL,
    channel_id  uuid  NOT NULL,
    chat_id     text  NOT NULL,
    thread_id   uuid  NOT NULL,
    PRIMARY KEY (org_id, channel_id, chat_id),
    FOREIGN KEY (org_id, channel_id) REFERENCES channels (org_id, id) ON DELETE CASCADE,
    FOREIGN KEY (org_id, thread_id) REFERENCES threads (org_id, id) ON DELETE CASCADE
);

-- Inbound events: the primary key is the de-duplication (a redelivered event
-- inserts nothing); the row keeps the message and the progress of its answer.
CREATE TABLE channel_events (
    org_id            text         NOT NULL,
    channel_id        uuid         NOT NULL,
    event_id          text         NOT NULL,
    chat_id           text         NOT NULL,
    sender_id         text         NOT NULL,
    sender_name       text,
    sender_username   text,
    text              text         NOT NULL,
    is_group          boolean      NOT NULL,
    mentioned         boolean      NOT NULL,
    reply_to          text,
    state             text         NOT NULL,
    contact_id        uuid,
    thread_id         uuid,
    run_id            uuid,
    reply_message_id  uuid,
    reply_text        text,
    parts_sent        integer      NOT NULL,
    attempts          integer      NOT NULL,
    error             text,
    created_at        timestamptz  NOT NULL,
    updated_at        timestamptz  NOT NULL,
    PRIMARY KEY (org_id, channel_id, event_id),
    FOREIGN KEY (org_id, channel_id) REFERENCES channels (org_id, id) ON DELETE CASCADE
);
-- the channel's inbound messages, newest first (GET .../channels/{id}/messages)
CREATE INDEX channel_events_newest
    ON channel_events (org_id, channel_id, created_at DESC, event_id DESC);
