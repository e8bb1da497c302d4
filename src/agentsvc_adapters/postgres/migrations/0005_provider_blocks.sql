-- Blocks a provider asked to get back verbatim (native compaction), per message.
ALTER TABLE messages ADD COLUMN provider_blocks json;
