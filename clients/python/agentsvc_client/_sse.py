"""A Server-Sent Events line decoder (the WHATWG rules the service's stream needs)."""

from __future__ import annotations

from typing import NamedTuple


class RawEvent(NamedTuple):
    name: str
    id: str
    data: str


class SSEDecoder:
    """Feed it lines (without their end of line); it returns an event at each blank
    line that ends one. Comments (``: keep-alive``) are skipped. An event cut before
    its blank line is never returned: a dropped connection loses no half-event."""

    def __init__(self) -> None:
        self._name = ""
        self._id = ""
        self._data: list[str] = []

    def feed(self, line: str) -> RawEvent | None:
        if not line:
            if not self._data:  # WHATWG: an event without data is not dispatched
                self._name = ""
                return None
            event = RawEvent(self._name or "message", self._id, "\n".join(self._data))
            self._name, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._name = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        return None
