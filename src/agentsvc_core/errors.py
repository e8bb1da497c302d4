"""The domain's exception tree.

Core code raises these; adapters translate foreign exceptions into them at their
edge (``raise NotFound(...) from exc``); the web layer owns the one table that maps
each to an HTTP status and error code. ``detail`` is shown to API clients, so it
must never carry a secret.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "DomainError",
    "InvalidInput",
    "InvalidState",
    "McpAuthRequired",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "StorageError",
    "ThreadBusy",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMedia",
    "Upstream",
]


class DomainError(Exception):
    """Base of every error the core raises on purpose."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(DomainError):
    """The resource does not exist, or belongs to another organization."""


class InvalidInput(DomainError):
    """Input parsed but breaks a rule of the domain; ``field`` names the culprit."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class InvalidState(DomainError):
    """An OAuth callback's state is unknown, already used, expired or for another
    server, or the callback carries none (or the authorization server's refusal)."""


class Conflict(DomainError):
    """The request collides with the current state (e.g. a busy thread)."""

    def __init__(self, detail: str, code: str = "CONFLICT") -> None:
        super().__init__(detail)
        self.code = code


class ThreadBusy(Conflict):
    """A reply is still running on the thread (one at a time per thread)."""

    def __init__(self) -> None:
        super().__init__(
            "a reply is still running on this thread; wait for it or stop it", code="THREAD_BUSY"
        )


class IdempotencyKeyInUse(Conflict):
    """A request with this ``Idempotency-Key`` is still being answered."""

    def __init__(self) -> None:
        super().__init__(
            "a request with this Idempotency-Key is still in progress; retry in a moment",
            code="IDEMPOTENCY_KEY_IN_USE",
        )


class IdempotencyKeyReused(DomainError):
    """This ``Idempotency-Key`` was used (within its 24 hours) for another request:
    another path or another body."""

    def __init__(self) -> None:
        super().__init__("this Idempotency-Key was used for a different request")


class PermissionDenied(DomainError):
    """Authenticated, but this principal may not use this resource."""


class RateLimited(DomainError):
    """Too much, for now: ``retry_after_s`` says when to try again; ``code`` names
    the limit (``RATE_LIMITED``, or a published chat's ``DAILY_COST_CAP_REACHED``)."""

    def __init__(self, detail: str, retry_after_s: int, code: str = "RATE_LIMITED") -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
        self.code = code


class Unauthenticated(DomainError):
    """No, malformed, unknown, revoked or expired credential."""


class TooLarge(DomainError):
    """The request carries more than the service takes (an upload over its cap)."""


class UnsupportedMedia(DomainError):
    """The request carries a kind of content the service cannot read (a file type)."""


class Upstream(DomainError):
    """A dependency outside the service (provider, resolver, MCP server) failed."""

    def __init__(self, detail: str, code: str = "UPSTREAM_ERROR") -> None:
        super().__init__(detail)
        self.code = code


class Unavailable(DomainError):
    """A dependency the service cannot work without (its database) is unreachable
    right now; the same request may succeed later."""


class StorageError(DomainError):
    """Storage failed in a way the domain did not foresee (a bug or a broken
    schema). Its detail is generic; the cause goes to the log only."""


class McpAuthRequired(Upstream):
    """An MCP server answered 401: the user must complete its OAuth flow first."""

    def __init__(self, detail: str, resource_metadata_url: str | None = None) -> None:
        super().__init__(detail, code="MCP_AUTH_REQUIRED")
        self.resource_metadata_url = resource_metadata_url
