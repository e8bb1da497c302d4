"""Secrets at rest: sealed with a key the core never sees."""

from __future__ import annotations

from typing import Protocol

from agentsvc_core.errors import DomainError


class SecretUnreadable(DomainError):
    """A sealed value cannot be opened: wrong key, wrong row or organization
    (the associated data does not match), or damaged. Never says more, but for
    ``key_id``: the id of the key the value names when no configured key has it
    (an id is a label, no secret), so that an operator can be told which to add."""

    def __init__(self, detail: str, key_id: str | None = None) -> None:
        super().__init__(detail)
        self.key_id = key_id


class SecretBox(Protocol):
    """Authenticated encryption of small secrets (credentials, tokens).

    ``context`` is bound to the sealed value (associated data): the same bytes
    moved to another organization's row, or another row, do not open.
    """

    def seal(self, plaintext: bytes, context: str) -> str:
        """Encrypt with the newest key; the result names that key's id."""
        ...

    def open(self, sealed: str, context: str) -> bytes:
        """Decrypt with the key the value names. Raises ``SecretUnreadable``."""
        ...

    def is_current(self, sealed: str) -> bool:
        """True when sealed with the newest key (rotation leaves it alone)."""
        ...
