"""What SIGTERM and SIGINT do to a worker of ``agentsvc serve``.

uvicorn catches both and shuts down: it stops accepting connections, waits up to
``timeout_graceful_shutdown`` for the open ones (our streams) to end, cancels
whatever is left, and only then runs the lifespan's shutdown. By then a reply
would have been cut without a word. So each worker chains a handler in front of
uvicorn's that begins ``Conversation.close`` the moment the signal arrives: new
sends are refused, running replies get ``AGENTSVC_SHUTDOWN_GRACE_S`` to finish,
then the rest are interrupted (their streams end with an ``INTERRUPTED`` error,
their partial text is stored), and their connections close, which ends uvicorn's
wait. ``cli`` sets uvicorn's timeout to the grace plus ``DRAIN_MARGIN_S``, so it
never cuts a stream the drain is still ending. With ``--workers N`` each worker
gets the signal from uvicorn's supervisor and drains itself.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

from agentsvc_core.use_cases import Conversation
from agentsvc_core.use_cases.health import Readiness
from agentsvc_core.use_cases.turn.conversation import INTERRUPT_WAIT_S

# after the grace: interrupting (then cancelling what ignores it), storing, and
# the streams' last writes
DRAIN_MARGIN_S = 2 * INTERRUPT_WAIT_S + 1.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def drain_on_signals(
    conversation: Conversation,
    grace_s: float,
    readiness: Readiness | None = None,
    leaving: Callable[[], None] | None = None,
) -> Callable[[], None]:
    """An ``on_startup`` hook: from then on, SIGTERM and SIGINT begin the drain,
    then reach the handler that was there (uvicorn's, which it installs before
    the app starts and puts back when it is done). Only in the main thread (a
    server run in a thread, as tests do, gets no signals) and only in front of a
    handler that shuts something down. ``readiness`` answers not ready from the
    signal on (``/readyz``: a load balancer stops sending new requests). ``leaving``
    runs on the signal too: it ends the streams that never end by themselves (a
    thread's live events), whose clients reconnect elsewhere."""

    def install() -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(
                    sig,
                    partial(
                        _drain, loop, conversation, grace_s, readiness, previous, leaving=leaving
                    ),
                )

    return install


def _drain(
    loop: asyncio.AbstractEventLoop,
    conversation: Conversation,
    grace_s: float,
    readiness: Readiness | None,
    previous: Callable[[int, FrameType | None], Any],
    signum: int,
    frame: FrameType | None,
    leaving: Callable[[], None] | None = None,
) -> None:
    if readiness is not None:
        readiness.drain()
    loop.call_soon_threadsafe(conversation.close, grace_s)
    if leaving is not None:
        loop.call_soon_threadsafe(leaving)
    previous(signum, frame)
