"""Sandbox providers: the adapters of ``agentsvc_core.ports.sandboxes``."""
