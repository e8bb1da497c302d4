"""From request bodies to the core's drafts (agentsvc_web/drafts.py): a body made from
a draft reads its fields in camelCase with the draft's types, bounds and defaults,
and ``draft_of`` keeps a PATCH body's unsupplied fields unset."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import pytest
from msgspec import UNSET, Meta

from agentsvc_core.use_cases.webhook_tools import WebhookToolChanges, WebhookToolDraft
from agentsvc_web.controllers.tools import ToolCreateBody, ToolPatchBody
from agentsvc_web.drafts import camel_body, draft_of


class Draft(msgspec.Struct, frozen=True, kw_only=True):
    short_name: Annotated[str, Meta(max_length=3)]
    with_default: int = 7
    some_list: list[int] = msgspec.field(default_factory=list)


Body = camel_body(Draft, "Body", __name__)


def test_a_body_made_from_a_draft_reads_camel_case_with_the_drafts_bounds() -> None:
    body = msgspec.json.decode(b'{"shortName": "abc", "someList": [1]}', type=Body)
    assert isinstance(body, Draft)
    assert (Body.__name__, Body.__module__) == ("Body", __name__)
    assert (body.short_name, body.with_default, body.some_list) == ("abc", 7, [1])
    assert Body(short_name="x").some_list is not Body(short_name="y").some_list
    with pytest.raises(msgspec.ValidationError, match=r"length <= 3 - at `\$.shortName`"):
        msgspec.json.decode(b'{"shortName": "abcd"}', type=Body)
    with pytest.raises(msgspec.ValidationError, match="missing required field `shortName`"):
        msgspec.json.decode(b'{"short_name": "abc"}', type=Body)
    assert msgspec.json.encode(body) == b'{"shortName":"abc","withDefault":7,"someList":[1]}'
    draft = draft_of(body, Draft)
    assert type(draft) is Draft
    assert draft == Draft(short_name="abc", some_list=[1])


def test_a_frozen_draft_makes_a_frozen_body() -> None:
    body: Any = Body(short_name="a")
    with pytest.raises(AttributeError):
        body.short_name = "b"


def test_a_create_body_becomes_the_whole_draft() -> None:
    raw = (
        b'{"name": "lookup", "url": "https://t.example/x", "timeoutMs": 2000, "approval": "never"}'
    )
    draft = draft_of(msgspec.json.decode(raw, type=ToolCreateBody), WebhookToolDraft)
    assert draft == WebhookToolDraft(name="lookup", url="https://t.example/x", timeout_ms=2000)


@pytest.mark.parametrize(
    ("raw", "changed"),
    [
        (b"{}", {}),
        (b'{"description": "d"}', {"description": "d"}),
        (b'{"headers": null}', {"headers": None}),  # null removes the headers
        (
            b'{"headers": {"X-A": "b"}, "maxResultBytes": 10}',
            {"headers": {"X-A": "b"}, "max_result_bytes": 10},
        ),
    ],
)
def test_a_patch_body_changes_only_what_it_supplied(raw: bytes, changed: dict[str, Any]) -> None:
    changes = draft_of(msgspec.json.decode(raw, type=ToolPatchBody), WebhookToolChanges)
    given = {
        f: getattr(changes, f)
        for f in changes.__struct_fields__
        if getattr(changes, f) is not UNSET
    }
    assert given == changed
