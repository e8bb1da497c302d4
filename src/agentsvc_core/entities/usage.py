from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

KeySource = Literal["platform", "byok"]


def key_source(api_key: str | None) -> KeySource:
    """The key that paid for a model call: the user's own (resolved) or the platform's."""
    return "byok" if api_key else "platform"


# what a model call was for: a reply, the summary of a compaction, memory
# collection, or a code session's model (its agent_id is the code agent's, its
# thread_id and run_id the session's)
UsagePurpose = Literal["reply", "compaction", "memory", "code_session"]


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cached = None
        if self.cached_input_tokens is not None or other.cached_input_tokens is not None:
            cached = (self.cached_input_tokens or 0) + (other.cached_input_tokens or 0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=cached,
        )


class UsageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One per model call: what analytics and budgets read."""

    id: UUID
    org_id: str
    agent_id: UUID
    thread_id: UUID
    run_id: UUID
    message_id: UUID | None
    provider: str
    model: str
    usage: Usage
    key_source: KeySource
    metadata: dict[str, str]
    created_at: datetime
    cost_usd: float | None = None  # from the price table; None: the model has no price
    purpose: UsagePurpose = "reply"
