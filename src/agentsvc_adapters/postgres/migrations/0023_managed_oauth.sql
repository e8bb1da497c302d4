-- Managed OAuth MCP providers (agentsvc_core/use_cases/managed_oauth.py): the
-- organization's MCP server for a provider (one per organization and provider), and
-- the provider's services turned on for each attachment (NULL: all of them).
-- The tokens are sealed records (org_secrets, kind 'oauth_token').
ALTER TABLE mcp_servers ADD COLUMN managed_provider text;
CREATE UNIQUE INDEX mcp_servers_managed_provider ON mcp_servers (org_id, managed_provider)
    WHERE managed_provider IS NOT NULL;
ALTER TABLE mcp_attachments ADD COLUMN services json;
