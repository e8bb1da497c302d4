"""Messaging platforms behind ``agentsvc_core.ports.channel_platforms``: one module
per channel type, each speaking its platform's wire format through the outbound
guard (docs/channels.md)."""
