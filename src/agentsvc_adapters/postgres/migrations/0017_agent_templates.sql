-- The official template an agent was made from, and its version
-- (agentsvc_core/entities/agent.py, TemplateRef): both null, or both set.
ALTER TABLE agents ADD COLUMN template_id text;
ALTER TABLE agents ADD COLUMN template_version integer;
ALTER TABLE agents ADD CONSTRAINT agents_template_whole
    CHECK ((template_id IS NULL) = (template_version IS NULL));
