"""The built-in offline model ``local``: answers with no provider and no key.

Its reply is deterministic and shows what it was given, so a user can see that
the history and the system prompt reach the model:

- it repeats the last user message, counts the turns, and quotes the previous
  user message and the start of the system prompt;
- asked to "call <tool>" or "use <tool>" (a tool it was offered), it calls that
  tool, with the first JSON object in the message as arguments;
- after a tool result it reports the result;
- a message containing "slowly" streams one word every 0.2 s
  (``AGENTSVC_LOCAL_SLOW_DELAY_MS``): a long reply, something to stop.

Model parameters: its reply ends before the first of the ``stop`` texts it contains
(finish reason ``stop``), and after ``maxOutputTokens`` words, one word counting as
one token (finish reason ``length``); temperature and topP change nothing, and a JSON
Schema to follow is refused before the turn (use_cases/model_params.py).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from agentsvc_core.entities import ToolCall, Usage
from agentsvc_core.ports import (
    ChatModel,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    UsageReport,
)

_CALL = re.compile(r"\b(?:call|use)\s+(?:the\s+)?(?:tool\s+)?`?([A-Za-z0-9_.-]+)`?", re.IGNORECASE)
SLOW_DELAY_S = 0.2


def _first_json_object(text: str) -> dict[str, Any]:
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else {}
    return {}


def _before_stop(text: str, stop: tuple[str, ...] | None) -> str:
    """``text`` up to the first of the stop texts it contains (all of it: none)."""
    ends = [i for i in (text.find(s) for s in stop or ()) if i >= 0]
    return text[: min(ends)] if ends else text


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class LocalModel(ChatModel):
    provider = "local"

    def __init__(self, slow_delay_s: float = SLOW_DELAY_S) -> None:
        self._slow_delay_s = slow_delay_s

    def _reply(self, request: ModelRequest) -> tuple[str, ToolCall | None]:
        msgs = request.messages
        users = [m for m in msgs if m.role == "user"]
        last = msgs[-1] if msgs else None
        if last is not None and last.role == "tool":
            return (f"The tool {last.sender_name or 'tool'} returned: {last.content}", None)
        said = users[-1].content if users else ""
        offered = {t.name for t in request.tools}
        for match in _CALL.finditer(said):
            name = match.group(1)
            if name in offered:
                call_id = f"call_{len(msgs)}_{name}"[:64]
                return ("", ToolCall(id=call_id, name=name, arguments=_first_json_object(said)))
        parts = [f'You said: "{said}".', f"This is message {len(users)} of our conversation."]
        if len(users) > 1:
            parts.append(f'Before that you said: "{users[-2].content}".')
        if request.system:
            parts.append(f'My instructions begin: "{request.system[:60]}".')
        if "slowly" in said.lower():
            parts.append(" ".join(f"word{i}" for i in range(1, 51)) + ".")
        return (" ".join(parts), None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        text, call = self._reply(request)
        said = request.messages[-1].content if request.messages else ""
        delay = self._slow_delay_s if "slowly" in said.lower() else 0.0
        text = _before_stop(text, request.params.stop if request.params else None)
        words = text.split(" ")
        cut = len(words) > request.max_tokens
        words = words[: request.max_tokens]
        for i, word in enumerate(words):
            if delay:
                await asyncio.sleep(delay)
            yield TextDelta(word if i == 0 else " " + word)
        if call is not None:
            yield ToolCallRequested(call)
        prompt = request.system + "".join(m.content for m in request.messages)
        out = _estimate_tokens(" ".join(words))
        out = min(out, len(words)) if cut else out
        yield UsageReport(Usage(input_tokens=_estimate_tokens(prompt), output_tokens=out))
        yield Finished("tool_calls" if call else "length" if cut else "stop")
