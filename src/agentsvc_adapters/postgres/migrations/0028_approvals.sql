-- Approval before a tool call (docs/tools.md, "Approval before a call"): how long an
-- agent's waiting approvals last, a webhook tool's own approval, and the MCP tools
-- an attachment makes wait for a person (NULL: none).
ALTER TABLE agents ADD COLUMN approval_timeout_minutes integer NOT NULL DEFAULT 60;
ALTER TABLE webhook_tools ADD COLUMN approval text NOT NULL DEFAULT 'never';
ALTER TABLE mcp_attachments ADD COLUMN require_approval json;
