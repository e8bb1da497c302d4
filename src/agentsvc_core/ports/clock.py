"""The time, as a port (``agentsvc_adapters.clock.SystemClock`` reads the system's)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...
