"""The sandbox providers this service can use, by name (``local``, ``e2b``): what
an agent's computer configuration, or its ``runtimeProvider``, picks from
(docs/computer.md).

Each provider registers here, built from the environment: ``local`` (bubblewrap
on this machine, its workspaces under the data folder) and ``e2b`` (the hosted
provider, when its API key is set). Every provider's outbound HTTP goes through
``guard``. A name missing from the answer is a provider this service does not
have: the computer then answers 503 saying what to install or set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.sandboxes import SandboxProvider

__all__ = ["providers"]


def providers(
    environ: Mapping[str, str], guard: OutboundGuard, data_dir: Path
) -> dict[str, SandboxProvider]:
    """The providers the environment configures, by their ``name``. None is
    registered yet: the local and hosted adapters add themselves here."""
    del environ, guard, data_dir
    return {}
