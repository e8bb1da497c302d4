"""A follower of a thread's live events (``GET /api/threads/{id}/events``) for tests:
reads the stream in a thread of its own and keeps every event it sees."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from tests.sse import Event, parse_lines


class Follower:
    def __init__(self, url: str, thread: str, headers: dict[str, str], query: str = "") -> None:
        self.events: list[Event] = []
        self._url = f"{url}/api/threads/{thread}/events{query}"
        self._headers = headers
        self._stop = threading.Event()
        self._open = threading.Event()
        self.status: int | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(30, read=60))
        self._worker = threading.Thread(target=self._run, daemon=True)
        self._worker.start()
        assert self._open.wait(20), "the events stream did not open"
        assert self.status == 200, self.status

    def _run(self) -> None:
        try:
            with (
                self._client,
                self._client.stream("GET", self._url, headers=self._headers) as r,
            ):
                self.status = r.status_code
                self._open.set()
                for item in parse_lines(r.iter_lines()):
                    if isinstance(item, Event):
                        self.events.append(item)
                    if self._stop.is_set():
                        return
        except httpx.HTTPError:
            if not self._stop.is_set():  # a follower that left ignores the service stopping
                raise
        finally:
            self._open.set()

    def wait_for(self, check: Callable[[list[Event]], bool], timeout: float = 20) -> list[Event]:
        """The events once ``check`` holds for them (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not check(list(self.events)):
            assert time.monotonic() < deadline, [(e.event, e.data) for e in self.events]
            time.sleep(0.02)
        return list(self.events)

    def close(self) -> None:
        """Leave: the reading thread stops at the next event or keep-alive comment,
        and closes the connection (the server's stream ends with it)."""
        self._stop.set()


def named(events: list[Event], *names: str) -> list[Event]:
    return [e for e in events if e.event in names]
