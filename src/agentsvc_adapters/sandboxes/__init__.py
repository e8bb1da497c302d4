"""Sandbox providers (``agentsvc_core.ports.sandboxes``): ``local`` (bubblewrap on
the service's own machine)."""
