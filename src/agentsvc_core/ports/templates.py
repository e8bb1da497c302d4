"""The official templates the service ships (``TemplateCatalogue``): read once, at
start-up, from the package's data files (agentsvc_adapters/templates.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentsvc_core.entities.template import Template

__all__ = ["TemplateCatalogue"]


class TemplateCatalogue(Protocol):
    def templates(self) -> Sequence[Template]:
        """Every template, ordered by category, then name. Pure: no I/O per call."""
        ...
