"""An agent's computer: its configuration (``settings``), its instances and
commands (``instances``) and the model's tools (``tools``); docs/computer.md."""

from agentsvc_core.use_cases.computer.commands import Execution
from agentsvc_core.use_cases.computer.instances import Computers
from agentsvc_core.use_cases.computer.settings import (
    ComputerConfig,
    ComputerSettings,
    resolve_provider,
)
from agentsvc_core.use_cases.computer.tools import ComputerTools

__all__ = [
    "ComputerConfig",
    "ComputerSettings",
    "ComputerTools",
    "Computers",
    "Execution",
    "resolve_provider",
]
