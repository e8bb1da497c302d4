"""A published chat's request budgets (agentsvc_web/controllers/publishing/guards.py):
its ``rate_limit_per_min`` per client address and per visitor, ten times that for
the whole chat; each chat's budgets are its own; a refusal says when to come back."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.published_chat import PublishedChat
from agentsvc_core.errors import RateLimited
from agentsvc_web.controllers.publishing.guards import SLUG_TIMES, ChatLimits
from tests.contract.test_publishing_contract import a_chat


def _chat(rate: int, slug: str = "a-chat") -> PublishedChat:
    return msgspec.structs.replace(a_chat("org", uuid.uuid4()), slug=slug, rate_limit_per_min=rate)


def _from(address: str) -> Any:
    return SimpleNamespace(scope={"client": (address, 1234)})


def test_an_address_has_the_chats_rate_per_chat() -> None:
    limits = ChatLimits()
    chat, other = _chat(2), _chat(2, "other-chat")
    limits.address(_from("10.0.0.1"), chat)
    limits.address(_from("10.0.0.1"), chat)
    with pytest.raises(RateLimited) as refused:
        limits.address(_from("10.0.0.1"), chat)
    assert refused.value.code == "RATE_LIMITED"
    assert 1 <= refused.value.retry_after_s <= 31
    limits.address(_from("10.0.0.2"), chat)  # another address
    limits.address(_from("10.0.0.1"), other)  # another chat


def test_a_visitor_has_the_chats_rate_and_the_chat_ten_times_it() -> None:
    limits = ChatLimits()
    chat = _chat(1)
    limits.visitor(chat, "v-0")
    with pytest.raises(RateLimited, match="this visitor"):
        limits.visitor(chat, "v-0")
    for n in range(1, SLUG_TIMES):
        limits.visitor(chat, f"v-{n}")
    with pytest.raises(RateLimited, match="this chat"):
        limits.visitor(chat, "v-last")
    limits.visitor(_chat(1, "calm-chat"), "v-last")  # another chat's budget is its own
