"""One question to an agent's model outside a user's conversation (suggestions, a
marketplace description): a turn of that agent, as the organization, on a thread
of its own whose metadata says what it was for. So the call goes through the same
router, key broker, usage records and trace as any turn, and works offline with
the ``local`` model."""

from __future__ import annotations

from uuid import UUID

from agentsvc_core.entities import Principal
from agentsvc_core.errors import Upstream
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.conversation import Conversation
from agentsvc_core.use_cases.turn.events import Done, ErrorEvent, last_event
from agentsvc_core.use_cases.turn.send_input import SendInput

__all__ = ["ask_agent"]


async def ask_agent(
    threads: Threads,
    conversation: Conversation,
    org_id: str,
    agent_id: UUID,
    prompt: str,
    *,
    title: str,
    metadata: dict[str, str],
) -> str:
    """The final text of the agent's answer to ``prompt``; ``Upstream`` when the
    model could not answer."""
    system = Principal.organization(org_id)
    thread = await threads.create(
        system, ThreadDraft(agent_id=agent_id, title=title, metadata=metadata)
    )
    turn = await conversation.send(system, thread.id, SendInput(content=prompt))
    final = await last_event(turn)
    if isinstance(final, ErrorEvent):
        raise Upstream(f"the model could not answer: {final.detail or final.code}")
    return final.content if isinstance(final, Done) else ""
