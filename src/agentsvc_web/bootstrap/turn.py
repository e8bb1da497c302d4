"""The turn: the conversation use case (send, stop, re-attach) over its storage,
the model router, the tool hub and the stop bus, with the keys it pays with and
what runs after each reply."""

from __future__ import annotations

from collections.abc import Sequence

from agentsvc_core.ports import (
    Clock,
    FollowRequests,
    ModelRouter,
    SecretBox,
    ServerTools,
    StopBus,
    Storage,
)
from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.ports.telemetry import Tracer
from agentsvc_core.use_cases import Conversation, Threads
from agentsvc_core.use_cases.multiplayer.posts import MultiplayerPosts
from agentsvc_core.use_cases.org_settings import AgentConfigs, KeyBroker
from agentsvc_core.use_cases.traces.build import TraceConfig
from agentsvc_core.use_cases.turn.compaction import Compactor
from agentsvc_core.use_cases.turn.events import AfterTurn
from agentsvc_web.settings import Settings


def conversation(
    settings: Settings,
    storage: Storage,
    threads: Threads,
    router: ModelRouter,
    tools: ServerTools,
    stops: StopBus,
    clock: Clock,
    box: SecretBox,
    *,
    keys: KeyBroker,
    follows: FollowRequests | None,
    tracer: Tracer,
    traces: TraceConfig,
    after_turn: Sequence[AfterTurn],
    multiplayer: MultiplayerPosts,
    events: EventPublisher,
) -> Conversation:
    """The turn: its reads and writes in storage, its agent configurations
    (resolver, compaction) sealed with ``box``, its events kept for re-attach
    (``follows``: a client in another process asks for them as they come)."""
    return Conversation(
        threads,
        storage.turn_reader,
        storage.conversations,
        router,
        tools,
        stops,
        clock,
        stale_after_s=settings.run_stale_after_s,
        keys=keys,
        configs=AgentConfigs(storage.secrets, box),
        compactor=Compactor(storage.secrets, box),
        streams=storage.streams,
        follows=follows,
        idempotency=storage.idempotency,
        replay_s=settings.stream_replay_s,
        flush_s=settings.stream_flush_ms / 1000,
        tracer=tracer,
        traces=traces,
        after_turn=after_turn,
        multiplayer=multiplayer,
        events=events,
    )
