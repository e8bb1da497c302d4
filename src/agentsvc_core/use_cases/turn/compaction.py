"""Summary-based compaction for the second provider family ("beta").

Once the context's token estimate passes the agent's ``beta_compact_threshold``,
the oldest messages are summarised with a model call and replaced, in what the
model is sent, by that summary (kept in the system prompt, after the agent's own
instructions, which are never summarised away) plus the recent messages. The
stored history is untouched: the history endpoint still returns every message.

The estimate prefers the provider's reported input tokens of the thread's
previous call, plus about one token per four characters for what was added since.
A failed summary never breaks the turn: the full history is sent instead.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Usage
from agentsvc_core.ports import (
    ChatModel,
    ModelRequest,
    SecretBox,
    SecretStore,
    TextDelta,
    UsageReport,
)
from agentsvc_core.use_cases.sealed import SealedRecords

log = logging.getLogger("agentsvc.compaction")

KEEP_RECENT = 4  # messages always sent verbatim
SUMMARY_PROMPT = (
    "You compress conversations. Write a concise summary of the conversation below that "
    "keeps every fact, decision, name, number and open question a helpful assistant needs "
    "to continue it. Write only the summary."
)


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    summary: str = ""
    through: UUID | None = None  # the last message the summary covers
    input_tokens: int = 0  # the provider's input tokens of the thread's last call
    counted: int = 0  # messages in the context when it was reported


def estimate(system: str, messages: list[Message]) -> int:
    chars = len(system) + sum(
        len(m.content) + sum(len(str(c.arguments)) + len(c.name) for c in m.tool_calls)
        for m in messages
    )
    return chars // 4 + 1


def native_tokens(system: str, messages: list[Message], block: dict[str, Any]) -> tuple[int, int]:
    """Estimates of a native compaction (a ``compaction`` event's tokens): the
    context the provider was sent, and the system prompt with the block's summary
    that stands for it from then on."""
    return estimate(system, messages), estimate(f"{system}{block.get('content') or ''}", [])


def transcript(previous: str, messages: list[Message]) -> str:
    lines = [f"Summary so far:\n{previous}\n"] if previous else []
    for m in messages:
        who = m.sender_name if m.role == "tool" and m.sender_name else m.role
        calls = "".join(f" [calls {c.name}({c.arguments})]" for c in m.tool_calls)
        lines.append(f"{who}: {m.content}{calls}")
    return "\n".join(lines)


class Compactor:
    def __init__(self, store: SecretStore, box: SecretBox) -> None:
        self._records = SealedRecords(store, box)
        self._store = store

    async def checkpoint(self, org: str, thread_id: UUID) -> Checkpoint:
        cp = await self._records.get(org, "checkpoint", str(thread_id), Checkpoint)
        return cp or Checkpoint()

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        """A deleted thread's summary goes with it (use_cases/erasure.py: a thread
        data holder); 1 when there was one."""
        return int(await self._store.take(org_id, "checkpoint", str(thread_id)) is not None)

    async def save(self, org: str, thread_id: UUID, cp: Checkpoint) -> None:
        await self._records.put(org, "checkpoint", str(thread_id), cp)

    @staticmethod
    def on_branch(cp: Checkpoint, messages: list[Message]) -> Checkpoint:
        """``cp``, or none when the messages it covers are not on this branch (the
        thread's current branch left them: use_cases/branches.py)."""
        if cp.through is None or any(m.id == cp.through for m in messages):
            return cp
        return Checkpoint()

    @staticmethod
    def after(cp: Checkpoint, messages: list[Message]) -> list[Message]:
        """The messages the summary does not cover."""
        if cp.through is None:
            return messages
        for i, m in enumerate(messages):
            if m.id == cp.through:
                return messages[i + 1 :]
        return messages

    @staticmethod
    def with_summary(system: str, cp: Checkpoint) -> str:
        if not cp.summary:
            return system
        return f"{system}\n\nSummary of the earlier conversation:\n{cp.summary}".lstrip()

    @classmethod
    def applied(
        cls, cp: Checkpoint, system: str, messages: list[Message]
    ) -> tuple[str, list[Message]]:
        """What the model is sent with the summary of ``cp``: the system prompt with
        the summary after it, and the messages the summary does not cover. The turn
        and ``GET /api/threads/{id}/context`` both build the context with this."""
        return cls.with_summary(system, cp), cls.after(cp, messages)

    def tokens(self, cp: Checkpoint, system: str, messages: list[Message]) -> int:
        """The provider's last count plus an estimate of what came since, or an estimate."""
        if cp.input_tokens and cp.counted <= len(messages):
            return cp.input_tokens + estimate("", messages[cp.counted :])
        return estimate(system, messages)

    async def compact(
        self,
        model: ChatModel,
        model_name: str,
        cp: Checkpoint,
        messages: list[Message],
        api_key: str | None,
    ) -> tuple[Checkpoint, Usage] | None:
        """Summarise all but the recent messages; None when there is nothing to do or it failed."""
        cut = len(messages) - KEEP_RECENT
        while cut > 0 and messages[cut].role != "user":
            cut -= 1  # start the kept part at a user message: no orphaned tool results
        if cut <= 0:
            return None
        old = messages[:cut]
        request = ModelRequest(
            model=model_name,
            system=SUMMARY_PROMPT,
            messages=[
                msgspec.structs.replace(
                    old[-1],
                    role="user",
                    content=transcript(cp.summary, old),
                    tool_calls=(),
                    tool_call_id=None,
                )
            ],
            max_tokens=2048,
            api_key=api_key,
        )
        parts: list[str] = []
        usage = Usage()
        try:
            async for event in model.stream(request):
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, UsageReport):
                    usage = event.usage
        except Exception:
            log.warning("compaction summary failed; sending the full history", exc_info=True)
            return None
        summary = "".join(parts).strip()
        if not summary:
            return None
        return Checkpoint(summary=summary, through=old[-1].id), usage
