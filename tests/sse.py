"""A small, strict SSE parser for tests (written from the SSE format, not from our code)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec


class Event(msgspec.Struct):
    id: int | None
    event: str
    data: dict[str, Any]


def parse_lines(lines: Iterable[str]) -> Iterator[Event | str]:
    """Events, and comment lines (as their text) in order."""
    fields: dict[str, str] = {}
    for raw in lines:
        line = raw.rstrip("\r")
        if line == "":
            if fields:
                data = fields.get("data", "")
                yield Event(
                    id=int(fields["id"]) if "id" in fields else None,
                    event=fields.get("event", "message"),
                    data=json.loads(data) if data else {},
                )
                fields = {}
            continue
        if line.startswith(":"):
            yield line[1:].strip()
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        fields[name] = fields[name] + "\n" + value if name == "data" and name in fields else value


def parse(text: str) -> list[Event]:
    return [e for e in parse_lines(text.split("\n")) if isinstance(e, Event)]


def names(events: list[Event]) -> list[str]:
    return [e.event for e in events]


def tokens(events: list[Event]) -> str:
    return "".join(e.data["delta"] for e in events if e.event == "token")
