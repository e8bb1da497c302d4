"""Sandbox providers (``agentsvc_core.ports.sandboxes``): ``local`` (bubblewrap on
the service's own machine) and ``e2b`` (a hosted provider over its REST and
in-sandbox APIs), built from the environment by ``registry.py``."""
