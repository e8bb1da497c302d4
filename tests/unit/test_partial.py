"""Partial updates (agentsvc_core/partial.py): the fields given, by name; ``None``
is a value; the fields the caller handles itself are left out."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.partial import given_fields


class Changes(msgspec.Struct, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    note: str | UnsetType | None = UNSET
    size: int | UnsetType = UNSET
    rotate: bool = False


def test_only_the_fields_given_none_included_in_declaration_order() -> None:
    assert given_fields(Changes()) == {"rotate": False}  # a plain default is a value
    assert given_fields(Changes(size=0, note=None, name="")) == {
        "name": "",
        "note": None,
        "size": 0,
        "rotate": False,
    }
    assert list(given_fields(Changes(size=3, name="a"))) == ["name", "size", "rotate"]


def test_the_fields_left_are_not_answered_even_when_given() -> None:
    assert given_fields(Changes(name="a", rotate=True), leave=("rotate",)) == {"name": "a"}
    assert given_fields(Changes(size=1), leave={"size", "rotate"}) == {}
