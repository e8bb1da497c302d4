"""``reply.completed`` and ``reply.failed``: published after each stored reply,
from the turn's ``after_turn`` hooks (once the reply's last event is out, off
the token loop)."""

from __future__ import annotations

from agentsvc_core.ports.event_webhooks import EventPublisher
from agentsvc_core.use_cases.turn.events import AfterTurn, TurnEnded

__all__ = ["reply_events"]

_TYPES = {"completed": "reply.completed", "failed": "reply.failed"}


def reply_events(events: EventPublisher) -> AfterTurn:
    async def after_turn(ended: TurnEnded) -> None:
        type_ = _TYPES.get(ended.status)
        if type_ is None:
            return  # stopped, interrupted, waiting for the client's tools
        data = {
            "thread_id": str(ended.thread_id),
            "run_id": str(ended.run_id),
            "agent_id": str(ended.agent_id),
            "status": ended.status,
            "model": ended.model_id,
        }
        await events.publish(
            ended.org_id, type_, data, thread_id=ended.thread_id, key=str(ended.run_id)
        )

    return after_turn
