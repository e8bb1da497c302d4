"""The official templates shipped with the package: one JSON file per template in
``agentsvc_adapters/data/templates/`` (its name is the template's id), read with
importlib.resources once, when the catalogue is built. A file that does not decode
into a ``Template`` (an unknown field, a wrong type) or whose id is not its name
stops the service at start-up, not at the first use."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

import msgspec

from agentsvc_core.entities.template import Template
from agentsvc_core.ports.templates import TemplateCatalogue

__all__ = ["PackagedTemplates"]

_decode = msgspec.json.Decoder(Template).decode


class PackagedTemplates(TemplateCatalogue):
    def __init__(self) -> None:
        folder = resources.files("agentsvc_adapters") / "data" / "templates"
        found = []
        for entry in folder.iterdir():
            if not entry.name.endswith(".json"):
                continue
            template = _decode(entry.read_bytes())
            if f"{template.id}.json" != entry.name:
                raise ValueError(f"template {entry.name}: its id is {template.id!r}")
            found.append(template)
        self._templates = tuple(sorted(found, key=lambda t: (t.category, t.name, t.id)))

    def templates(self) -> Sequence[Template]:
        return self._templates
