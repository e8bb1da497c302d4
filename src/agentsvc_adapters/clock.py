"""The system's clock (``Clock``): built by the composition root, passed to the use
cases; tests may pass one of their own."""

from __future__ import annotations

from datetime import UTC, datetime

from agentsvc_core.ports import Clock

__all__ = ["SystemClock"]


class SystemClock(Clock):
    def now(self) -> datetime:
        return datetime.now(UTC)
