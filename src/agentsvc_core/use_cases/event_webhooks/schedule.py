"""When a delivery is tried again, pure: the Standard Webhooks schedule.

The first attempt is immediate; after a failed attempt ``n`` (1-based) the next
comes ``RETRY_DELAYS_S[n - 1]`` later: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
10 h, eight attempts over about 27 hours. ``scale`` multiplies every delay
(1 in production; ``AGENTSVC_WEBHOOK_RETRY_SPEEDUP`` is its inverse, which tests
raise).
"""

from __future__ import annotations

__all__ = ["MAX_ATTEMPTS", "RETRY_DELAYS_S", "retry_delay"]

RETRY_DELAYS_S: tuple[float, ...] = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
MAX_ATTEMPTS = len(RETRY_DELAYS_S) + 1


def retry_delay(attempts_made: int, scale: float = 1.0) -> float | None:
    """Seconds until the next attempt after ``attempts_made`` failed ones (0: none
    made yet, the first is immediate), or None when that was the last."""
    if attempts_made < 1:
        return 0.0
    if attempts_made > len(RETRY_DELAYS_S):
        return None
    return RETRY_DELAYS_S[attempts_made - 1] * scale
