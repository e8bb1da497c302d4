"""The model port: one streaming call per model turn, provider-neutral."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol

import msgspec

from agentsvc_core.entities import Message, ToolCall, Usage
from agentsvc_core.entities.model_params import ModelParams


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the model: name, description, JSON Schema of its arguments.
    ``instructions``: text the tool adds to the system prompt, after the agent's
    stable preamble, while it is offered (the skills' catalogue: ``load_skill``).
    ``approval``: set by the server-side tool source that lists the tool when this
    agent's calls of it wait for a person's approval (docs/tools.md, "Approval
    before a call"). Providers are sent name, description and parameters only."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    instructions: str | None = None
    approval: bool = False


class NativeCompaction(msgspec.Struct, frozen=True, kw_only=True):
    """Ask the provider (first family) to compact the context itself past a trigger."""

    trigger_tokens: int
    instructions: str | None = None
    pause_after: bool = False


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    system: str
    # user / assistant (with tool_calls) / tool messages, oldest first
    messages: list[Message]
    tools: list[ToolSpec] = []
    max_tokens: int = 4096
    # A per-call key (bring-your-own-key); None uses the provider's platform key.
    api_key: str | None = None
    native_compaction: NativeCompaction | None = None
    # sampling, stop texts and structured output (entities/model_params.py); the
    # output cap is ``max_tokens``. Checked against the family before the turn starts
    # (use_cases/model_params.py), so a family sends what it is given.
    params: ModelParams | None = None


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ToolCallRequested(msgspec.Struct, frozen=True):
    """A complete tool call (arguments fully received and parsed)."""

    call: ToolCall


class UsageReport(msgspec.Struct, frozen=True):
    usage: Usage


class CompactionBlock(msgspec.Struct, frozen=True):
    """A block the provider returned that must be sent back verbatim on later calls,
    in place of the history it replaces (the first family's native compaction)."""

    block: dict[str, Any]


FinishReason = Literal["stop", "tool_calls", "length", "compaction", "other"]


class Finished(msgspec.Struct, frozen=True):
    reason: FinishReason


ModelEvent = TextDelta | ToolCallRequested | UsageReport | CompactionBlock | Finished


class ChatModel(Protocol):
    """A model provider family.

    ``stream`` yields text deltas as they arrive, then complete tool calls, a
    usage report and ``Finished``. It raises ``Upstream`` (code ``PROVIDER_*``,
    a detail with no secret in it) for provider errors, before or during the
    stream. Closing the iterator early (a stop) must release the connection.
    """

    provider: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


NATIVE_COMPACTION_FAMILIES = frozenset({"alpha"})
"""The families whose provider compacts the context itself (the turn asks it to)."""
SUMMARY_COMPACTION_FAMILIES = frozenset({"beta"})
"""The families whose context the service summarises (use_cases/turn/compaction.py)."""


class ModelRoute(msgspec.Struct, frozen=True, kw_only=True):
    """One rule of the router, as it tries them (docs/models.md#routing).

    ``pattern``: the model ids it takes, as a glob (``local``, ``alpha:*``,
    ``claude-*``); ``family``: the provider family that serves them; ``configured``:
    this deployment has that family (a key or a base URL); ``key_configured``: it has
    its own key for it (None: the family needs none, ``local``); ``sends``: what the
    provider is sent as the model name, ``id`` (the whole id) or ``name`` (the id
    without its ``family:`` prefix)."""

    pattern: str
    family: str
    configured: bool
    key_configured: bool | None
    sends: Literal["id", "name"] = "id"


class RouteMatch(msgspec.Struct, frozen=True, kw_only=True):
    """The route a model id takes and the model name the provider is sent."""

    route: ModelRoute
    name: str


class ModelRouter(Protocol):
    def route(self, model_id: str) -> tuple[ChatModel, str]:
        """The family that serves ``model_id`` and the model name to send it.
        Raises ``InvalidInput`` for a model no configured family serves."""
        ...

    def routes(self) -> tuple[ModelRoute, ...]:
        """Every rule ``route`` tries, in its order (configured families or not)."""
        ...

    def match(self, model_id: str) -> RouteMatch | None:
        """The rule ``route`` takes for ``model_id`` (its family configured or not),
        or None when no rule takes it. ``route`` answers from this, so what a model
        listing derives from it is what a turn does."""
        ...
