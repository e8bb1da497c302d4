"""What each event's ``data`` says (docs/webhooks.md), pure: built by the areas
where the event happens. Ids and states; only ``message.created`` holds a thread's
text (its event is deleted with the thread)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentsvc_core.entities import Message
from agentsvc_core.ports.event_webhooks import EventPublisher

if TYPE_CHECKING:
    from agentsvc_core.entities.channel import Channel
    from agentsvc_core.entities.code_session import CodeSession
    from agentsvc_core.entities.runner import RunnerRun

__all__ = [
    "channel_data",
    "code_session_data",
    "message_data",
    "messages_stored",
    "run_data",
    "run_event",
    "status_changed",
]


def message_data(m: Message) -> dict[str, Any]:
    return {
        "thread_id": str(m.thread_id),
        "message_id": str(m.id),
        "role": m.role,
        "content": m.content,
        "sender_id": m.sender_id,
        "sender_name": m.sender_name,
        "run_id": None if m.run_id is None else str(m.run_id),
        "created_at": m.created_at.isoformat(),
    }


async def messages_stored(events: EventPublisher, new: Sequence[Message]) -> None:
    """``message.created`` for each user message of a send (free when nobody listens)."""
    for m in new:
        if m.role == "user":
            await events.publish(
                m.org_id, "message.created", message_data(m), thread_id=m.thread_id
            )


def run_event(run: RunnerRun) -> str | None:
    """The event type a run's state is, if any."""
    return {"succeeded": "run.completed", "paused": "run.paused", "failed": "run.failed"}.get(
        run.status
    )


def run_data(run: RunnerRun) -> dict[str, Any]:
    return {
        "run_id": str(run.id),
        "runner_id": None if run.runner_id is None else str(run.runner_id),
        "status": run.status,
        "paused_reason": run.paused_reason,
        "error": run.error,
    }


def code_session_data(session: CodeSession) -> dict[str, Any]:
    return {
        "session_id": str(session.id),
        "code_agent_id": str(session.code_agent_id),
        "status": session.status,
        "error": session.error,
        "pr_url": session.pr_url,
    }


async def status_changed(events: EventPublisher, before: Channel, after: Channel) -> None:
    """``channel.status_changed`` when ``after``'s status is not ``before``'s."""
    if after.status != before.status:
        await events.publish(after.org_id, "channel.status_changed", channel_data(after))


def channel_data(channel: Channel) -> dict[str, Any]:
    return {
        "channel_id": str(channel.id),
        "type": channel.type,
        "status": channel.status,
        "reason": channel.status_reason,
    }
