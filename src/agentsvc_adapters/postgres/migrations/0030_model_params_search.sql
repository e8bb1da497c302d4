-- An agent's model parameters' defaults (agentsvc_core/entities/model_params.py), as
-- JSON; NULL: none set.
ALTER TABLE agents ADD COLUMN model_params json;

-- The thread search (agentsvc_adapters/postgres/threads.py): the words of the
-- messages a thread's history shows, the first 100,000 characters of each (the
-- expression must stay the one the search writes, or the index is not used).
CREATE INDEX messages_search ON messages
    USING gin (to_tsvector('simple'::regconfig, left(content, 100000))) WHERE visible;
