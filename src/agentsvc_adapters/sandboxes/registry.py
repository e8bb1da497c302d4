"""The sandbox providers this service can use, by name (``local``, ``e2b``): what
an agent's computer configuration, or its ``runtimeProvider``, picks from
(docs/computer.md).

Each provider registers here, built from the environment: ``local`` (bubblewrap
on this machine, its workspaces under the data folder) and ``e2b`` (the hosted
provider). Every provider's outbound HTTP goes through ``guard``. One that cannot
serve here (no bubblewrap, no E2B API key) says so with ``missing()``: the
computer then offers it not, and answers 503 saying what to install or set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes.e2b import E2BSandboxes
from agentsvc_adapters.sandboxes.local import LocalSandboxes
from agentsvc_core.ports.sandboxes import SandboxProvider

__all__ = ["providers"]


def providers(
    environ: Mapping[str, str], guard: OutboundGuard, data_dir: Path
) -> dict[str, SandboxProvider]:
    """Both providers, by their ``name``. Each is there whatever the environment
    says: one that cannot serve (no ``bwrap`` on this machine, no E2B API key) says
    so, naming what to install or set, at its first use (``SandboxUnavailable``),
    so the service starts either way."""
    local = LocalSandboxes.from_env(environ, guard, data_dir)
    hosted = E2BSandboxes.from_env(environ, guard)
    return {local.name: local, hosted.name: hosted}
