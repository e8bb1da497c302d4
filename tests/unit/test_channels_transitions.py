"""The pure rules of channels (use_cases/channels/transitions.py), alone: who is
answered under each policy, what a failed delivery attempt comes to (its wait,
the cap on attempts), and a platform's word about the connection."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_core.ports.channel_platforms import InboundStatus
from agentsvc_core.use_cases.channels.transitions import (
    MAX_ATTEMPTS,
    MAX_BACKOFF_S,
    after_failure,
    backoff_s,
    decide,
    with_status,
)
from tests.contract.test_channels_contract import a_channel, a_contact, an_event
from tests.unit.turn_world import T0

CHANNEL = a_channel("org", uuid.uuid4(), dm_policy="open", allow_from=())


def verdict(
    channel: dict[str, Any], contact: dict[str, Any], event: dict[str, Any], created: bool = False
) -> str:
    c = msgspec.structs.replace(CHANNEL, **channel)
    k = a_contact(c, **{"status": "approved", "pairing_code": None, "username": None, **contact})
    e = an_event(c, **{"is_group": False, "mentioned": False, "sender_username": None, **event})
    return decide(c, k, created, e)


def test_a_blocked_contact_is_never_answered() -> None:
    assert verdict({}, {"status": "blocked"}, {}) == "store"
    assert verdict({"group_policy": "all"}, {"status": "blocked"}, {"is_group": True}) == "store"


@pytest.mark.parametrize(
    ("policy", "mentioned", "answer"),
    [
        ("mention", True, "answer"),
        ("mention", False, "store"),
        ("all", False, "answer"),
        ("disabled", True, "store"),
    ],
)
def test_groups(policy: str, mentioned: bool, answer: str) -> None:
    # a group follows its own policy, whatever the direct chats' one
    got = verdict(
        {"group_policy": policy, "dm_policy": "disabled"},
        {},
        {"is_group": True, "mentioned": mentioned},
    )
    assert got == answer


def test_open_and_disabled() -> None:
    assert verdict({"dm_policy": "open"}, {"status": "pending"}, {}) == "answer"
    assert verdict({"dm_policy": "disabled"}, {}, {}) == "store"


def test_the_allowlist_names_ids_and_usernames() -> None:
    allow = {"dm_policy": "allowlist", "allow_from": ("u1", "bob")}
    assert verdict(allow, {}, {"sender_id": "u1"}) == "answer"
    assert verdict(allow, {}, {"sender_id": "u9"}) == "store"
    assert verdict(allow, {}, {"sender_id": "u9", "sender_username": "bob"}) == "answer"
    assert verdict(allow, {"username": "bob"}, {"sender_id": "u9"}) == "answer"
    # no username at all is not a match of anything
    assert verdict({**allow, "allow_from": ("u1",)}, {}, {"sender_id": "u9"}) == "store"


def test_pairing() -> None:
    pairing = {"dm_policy": "pairing"}
    assert verdict(pairing, {"status": "approved"}, {}) == "answer"
    assert (
        verdict(pairing, {"status": "pending", "pairing_code": "123456"}, {}, created=True)
        == "pair"
    )
    assert (
        verdict(pairing, {"status": "pending", "pairing_code": "123456"}, {}, created=False)
        == "store"
    )
    assert (
        verdict(pairing, {"status": "pending", "pairing_code": None}, {}, created=True) == "store"
    )


def test_backoff_doubles_to_a_cap() -> None:
    assert [backoff_s(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert backoff_s(20) == MAX_BACKOFF_S


def test_after_failure_counts_and_caps() -> None:
    event = an_event(CHANNEL)
    counted, wait = after_failure(event, "down", None, T0)
    assert (counted.attempts, counted.state, wait, counted.updated_at) == (1, "received", 2.0, T0)
    counted, wait = after_failure(event, "busy", 0.2, T0)
    assert wait == 1.0  # at least a second
    counted, wait = after_failure(event, "busy", 30.0, T0)
    assert wait == 30.0
    last = msgspec.structs.replace(event, attempts=MAX_ATTEMPTS - 2)
    counted, wait = after_failure(last, "down", None, T0)
    assert (counted.attempts, wait) == (MAX_ATTEMPTS - 1, backoff_s(MAX_ATTEMPTS - 1))
    spent = msgspec.structs.replace(event, attempts=MAX_ATTEMPTS - 1)
    failed, wait = after_failure(spent, "down", 3.0, T0)
    assert wait is None
    assert failed.updated_at == T0
    assert (failed.state, failed.error, failed.attempts) == (
        "failed",
        f"down (after {MAX_ATTEMPTS} attempts)",
        MAX_ATTEMPTS,
    )


def test_with_status_merges_what_the_platform_said() -> None:
    channel = msgspec.structs.replace(CHANNEL, config={"a": "1", "b": "2"})
    changed = with_status(
        channel, InboundStatus(status="connected", reason=None, config={"b": "3"}), T0
    )
    assert (changed.status, changed.status_reason, changed.config, changed.updated_at) == (
        "connected",
        None,
        {"a": "1", "b": "3"},
        T0,
    )
    lost = with_status(changed, InboundStatus(status="disconnected", reason="logged out"), T0)
    assert (lost.status, lost.status_reason, lost.config) == (
        "disconnected",
        "logged out",
        {"a": "1", "b": "3"},
    )
