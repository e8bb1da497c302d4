"""A command on a computer: its place within the agent's limits
(``CommandLimits``) and its events as they come (``Execution``).

Limits per agent, in this process: at most ``concurrent`` commands at once, and
the budget ``spend`` keeps (the composition root's token buckets: 60 a minute);
past either a command is refused with ``RateLimited`` before it runs."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Hashable
from uuid import UUID

from agentsvc_core.entities.computer import ComputerInstance
from agentsvc_core.errors import RateLimited
from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput

__all__ = ["CONCURRENT", "CommandLimits", "Execution", "Spend"]

CONCURRENT = 3  # commands at once per agent
# takes a token from the key's budget or raises RateLimited naming ``what``
Spend = Callable[[Hashable, str], None]


class CommandLimits:
    def __init__(self, spend: Spend, concurrent: int = CONCURRENT) -> None:
        self._spend = spend
        self._concurrent = concurrent
        self._running: dict[tuple[str, UUID], int] = {}  # (org, agent) -> commands now

    def take(self, org: str, agent_id: UUID) -> Callable[[], None]:
        """A command's place within the agent's limits, or ``RateLimited``; answers
        the function that gives it back (once: a second call does nothing)."""
        key = (org, agent_id)
        if self._running.get(key, 0) >= self._concurrent:
            raise RateLimited(
                f"at most {self._concurrent} commands run at once on an agent's computer", 1
            )
        self._spend(key, "on this agent's computer")
        self._running[key] = self._running.get(key, 0) + 1
        given = False

        def release() -> None:
            nonlocal given
            if given:
                return
            given = True
            # the key is there: this place holds it until now
            left = self._running[key] - 1
            if left:
                self._running[key] = left
            else:
                del self._running[key]

        return release


class Execution:
    """One command on an instance, its slot taken (``Computers.begin``): iterate
    ``events`` once; leaving it early kills the command. The slot is given back
    when the events end (or ``close`` is called for one never iterated)."""

    def __init__(
        self,
        instance: ComputerInstance,
        events: AsyncGenerator[ExecOutput | ExecExit],
        release: Callable[[], None],
    ) -> None:
        self.instance = instance
        self._events = events
        self._release = release

    async def events(self) -> AsyncGenerator[ExecOutput | ExecExit]:
        try:
            async for event in self._events:
                yield event
        finally:
            try:
                # closed early (a reader that left): the command is killed now, not
                # when the generator is collected
                await self._events.aclose()
            finally:
                self.close()

    def close(self) -> None:
        self._release()
