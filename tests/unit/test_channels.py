"""Channels' use cases over the memory storage, a scripted model and a recording
double platform: an inbound message is stored once and answered once (a
redelivery, a job run twice), the policies decide who is answered, a pairing
contact gets one code and waits for approval, a long reply goes in parts that are
never sent twice through a busy platform, and a delivery that fails for good is
recorded on the event and the channel."""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.channel import Channel, ChannelEvent
from agentsvc_core.errors import Conflict, InvalidInput, NotFound
from agentsvc_core.ports.channel_platforms import (
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundRefused,
    PairingState,
)
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.channels import ANSWER_JOB, ChannelChanges, ChannelDraft
from agentsvc_core.use_cases.channels.answer import pairing_text
from agentsvc_core.use_cases.channels.manage import open_credentials
from agentsvc_core.use_cases.channels.transitions import MAX_ATTEMPTS
from tests.contract.test_conversations_contract import a_run
from tests.unit.channels_world import BASE, ChannelWorld, busy, channel_world
from tests.unit.turn_world import BOX, WHO, says

pytestmark = pytest.mark.anyio


async def answered(
    w: ChannelWorld, channel: Channel, event_id: str, text: str = "hi", **more: object
) -> None:
    assert isinstance(await w.message(channel, event_id, text, **more), Inbound)
    assert await w.run_jobs() == [None]


# --- managing -------------------------------------------------------------------


async def test_a_channel_is_connected_and_its_credentials_are_sealed() -> None:
    w = await channel_world()
    made = await w.channels.create(
        WHO,
        w.turn.agent.id,
        ChannelDraft(type="telegram", name="Bot", credentials={"token": "t0k"}),
    )
    c = made.channel
    assert (c.status, c.config, c.name) == ("connected", {"bot": "@agent_bot"}, "Bot")
    assert made.inbound_url == f"{BASE}/api/channels/{c.id}/webhook"
    assert made.signing_secret is None
    assert w.platform.connects == [({"token": "t0k"}, made.inbound_url)]
    assert c.credentials_sealed is not None
    assert "t0k" not in c.credentials_sealed
    assert open_credentials(BOX, c) == {"token": "t0k"}
    assert [v.channel.id for v in await w.channels.of_agent(WHO, w.turn.agent.id)] == [c.id]


async def test_the_generic_channel_gets_a_signing_secret_shown_once() -> None:
    w = await channel_world(kind="webhook")
    w.platform.credential_fields = ()
    made = await w.channels.create(WHO, w.turn.agent.id, ChannelDraft(type="webhook"))
    assert made.signing_secret is not None
    assert made.signing_secret.startswith("chs_")
    assert open_credentials(BOX, made.channel) == {"signing_secret": made.signing_secret}
    listed = await w.channels.of_agent(WHO, w.turn.agent.id)
    assert listed[0].signing_secret is None


async def test_credentials_and_config_are_checked_against_the_type() -> None:
    w = await channel_world()
    agent = w.turn.agent.id
    with pytest.raises(InvalidInput, match=r"credentials\.token"):
        await w.channels.create(WHO, agent, ChannelDraft(type="telegram"))
    with pytest.raises(InvalidInput, match=r"credentials\.other"):
        await w.channels.create(
            WHO, agent, ChannelDraft(type="telegram", credentials={"token": "a", "other": "b"})
        )
    with pytest.raises(InvalidInput, match=r"config\.x"):
        await w.channels.create(
            WHO, agent, ChannelDraft(type="telegram", credentials={"token": "a"}, config={"x": 1})
        )
    with pytest.raises(InvalidInput, match="type"):
        await w.channels.create(WHO, agent, ChannelDraft(type="slack"))
    w.platform.config_fields = ("phone",)
    with pytest.raises(InvalidInput, match=r"config\.phone"):
        await w.channels.create(
            WHO, agent, ChannelDraft(type="telegram", credentials={"token": "a"})
        )
    assert await w.channels.of_agent(WHO, agent) == []


async def test_one_whatsapp_web_channel_per_agent() -> None:
    w = await channel_world(kind="whatsapp_web")
    w.platform.credential_fields = ()
    await w.channels.create(WHO, w.turn.agent.id, ChannelDraft(type="whatsapp_web"))
    with pytest.raises(Conflict) as caught:
        await w.channels.create(WHO, w.turn.agent.id, ChannelDraft(type="whatsapp_web"))
    assert caught.value.code == "CHANNEL_TYPE_TAKEN"


async def test_update_merges_credentials_and_reconnects_only_when_they_change() -> None:
    w = await channel_world()
    c = await w.channel()
    view = await w.channels.update(
        WHO, w.turn.agent.id, c.id, ChannelChanges(dm_policy="allowlist", allow_from=["u1"])
    )
    assert (view.channel.dm_policy, view.channel.allow_from) == ("allowlist", ("u1",))
    assert len(w.platform.connects) == 1
    w.platform.connected = msgspec.structs.replace(
        w.platform.connected, status="error", reason="bad"
    )
    view = await w.channels.update(
        WHO, w.turn.agent.id, c.id, ChannelChanges(credentials={"token": "new"})
    )
    assert (view.channel.status, view.channel.status_reason) == ("error", "bad")
    assert open_credentials(BOX, view.channel) == {"token": "new"}
    assert view.channel.dm_policy == "allowlist"
    with pytest.raises(InvalidInput):
        await w.channels.update(
            WHO, w.turn.agent.id, c.id, ChannelChanges(credentials={"nope": "x"})
        )


async def test_delete_disconnects_and_another_agents_path_is_not_found() -> None:
    w = await channel_world()
    c = await w.channel()
    with pytest.raises(NotFound):
        await w.channels.delete(WHO, c.id, c.id)  # not the agent's
    await w.channels.delete(WHO, w.turn.agent.id, c.id)
    assert w.platform.disconnects == 1
    assert await w.channels.of_agent(WHO, w.turn.agent.id) == []


# --- inbound ----------------------------------------------------------------------------


async def test_a_wrong_proof_is_refused_and_nothing_is_stored() -> None:
    w = await channel_world()
    c = await w.channel()
    refused = await w.message(c, "e1", token="wrong")
    assert isinstance(refused, InboundRefused)
    assert refused.status == 401
    assert w.jobs.queued == []
    assert await w.store.event(c.org_id, c.id, "e1") is None


async def test_a_handshake_is_answered_as_the_platform_wants() -> None:
    w = await channel_world()
    c = await w.channel()
    answer = await w.post(c, challenge="abc")
    assert isinstance(answer, InboundAnswer)
    assert answer.body == b"abc"


async def test_an_unknown_channel_is_not_found() -> None:
    w = await channel_world()
    with pytest.raises(NotFound):
        await w.inbound.channel(uuid.uuid4())


async def test_a_status_from_the_platform_updates_the_channel() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.post(c, status="disconnected", reason="logged out")
    stored = await w.fresh(c)
    assert (stored.status, stored.status_reason) == ("disconnected", "logged out")
    [event] = w.events.events
    assert (event.org_id, event.type) == (c.org_id, "channel.status_changed")
    assert event.data == {
        "channel_id": str(c.id),
        "type": "telegram",
        "status": "disconnected",
        "reason": "logged out",
    }
    await w.post(c, status="disconnected", reason="still logged out")  # no change of status
    assert len(w.events.events) == 1


async def test_a_message_is_answered_once_even_when_delivered_twice() -> None:
    w = await channel_world()
    c = await w.channel()
    assert isinstance(await w.message(c, "e1"), Inbound)
    assert isinstance(await w.message(c, "e1"), Inbound)  # redelivered before the job ran
    assert [k for k, _, _ in w.jobs.queued] == [ANSWER_JOB]
    assert await w.run_jobs() == [None]
    await w.message(c, "e1")  # redelivered after it was answered
    assert w.jobs.queued == []
    assert await w.run_event(c, "e1") is None  # the job run again
    assert [(m.chat_id, m.text) for m in w.platform.sent] == [("chat-1", "hello there")]
    event = await w.event(c, "e1")
    assert (event.state, event.parts_sent) == ("done", 1)
    assert event.reply_message_id is not None


async def test_one_thread_per_chat_and_usage_names_the_channel_and_contact() -> None:
    w = await channel_world(says("one"), says("two"), says("three"))
    c = await w.channel()
    await answered(w, c, "e1")
    await answered(w, c, "e2")
    await answered(w, c, "e3", chat_id="chat-2", sender_id="u2")
    first, second = await w.thread_of(c), await w.thread_of(c, "chat-2")
    assert first != second
    usage = await w.turn.storage.conversations.usage(c.org_id, first)
    contact = (await w.event(c, "e1")).contact_id
    assert len(usage) == 2
    assert usage[0].metadata["channel_id"] == str(c.id)
    assert usage[0].metadata["channel_type"] == "telegram"
    assert usage[0].metadata["contact_id"] == str(contact)
    assert [m.chat_id for m in w.platform.sent] == ["chat-1", "chat-1", "chat-2"]


async def test_contacts_are_kept_with_their_names_and_times() -> None:
    w = await channel_world()
    c = await w.channel()
    await answered(w, c, "e1", sender_name="Ann", sender_username="ann")
    w.turn.clock.advance(60)
    await answered(w, c, "e2")
    contacts, more = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=10)
    assert not more
    (ann,) = contacts
    assert (ann.external_id, ann.display_name, ann.username, ann.status) == (
        "u1",
        "Ann",
        "ann",
        "approved",
    )
    assert ann.last_message_at == ann.first_seen_at + timedelta(seconds=60)
    assert ann.thread_id == await w.thread_of(c)


async def test_contacts_page_newest_first() -> None:
    w = await channel_world()
    c = await w.channel()
    for i in range(3):
        await answered(w, c, f"e{i}", sender_id=f"u{i}", chat_id=f"c{i}")
        w.turn.clock.advance(1)
    page, more = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=2)
    assert more
    assert [p.external_id for p in page] == ["u2", "u1"]
    last = page[-1]
    rest, more = await w.channels.contacts(
        WHO, w.turn.agent.id, c.id, before=(last.first_seen_at, last.id), limit=2
    )
    assert not more
    assert [p.external_id for p in rest] == ["u0"]


# --- policies ------------------------------------------------------------------------------


async def test_a_disabled_dm_policy_stores_and_does_not_answer() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="disabled")
    await answered(w, c, "e1", "kept")
    assert w.platform.sent == []
    assert (await w.event(c, "e1")).state == "skipped"
    history, _ = await w.turn.storage.conversations.history(
        c.org_id, await w.thread_of(c), offset=0, limit=10
    )
    assert [(m.role, m.content) for m in history] == [("user", "kept")]


async def test_the_allowlist_answers_only_those_it_names() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="allowlist", allow_from=["u1", "bob"])
    await answered(w, c, "e1")
    await answered(w, c, "e2", sender_id="u2", chat_id="c2")
    await answered(w, c, "e3", sender_id="u3", chat_id="c3", sender_username="bob")
    assert [m.chat_id for m in w.platform.sent] == ["chat-1", "c3"]


async def test_pairing_sends_one_code_and_waits_for_approval() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="pairing")
    await answered(w, c, "e1", "hello?")
    (contact,), _ = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=5)
    assert contact.status == "pending"
    assert contact.pairing_code is not None
    assert [m.text for m in w.platform.sent] == [pairing_text(contact.pairing_code)]
    await answered(w, c, "e2", "still there?")
    assert len(w.platform.sent) == 1  # no second code, no answer
    approved = await w.channels.set_contact(WHO, w.turn.agent.id, c.id, contact.id, "approved")
    assert (approved.status, approved.pairing_code) == ("approved", None)
    await answered(w, c, "e3", "now?")
    assert [m.text for m in w.platform.sent][1:] == ["hello there"]


async def test_a_blocked_contact_is_stored_and_not_answered() -> None:
    w = await channel_world()
    c = await w.channel()
    await answered(w, c, "e1")
    (contact,), _ = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=5)
    await w.channels.set_contact(WHO, w.turn.agent.id, c.id, contact.id, "blocked")
    await answered(w, c, "e2")
    assert len(w.platform.sent) == 1
    assert (await w.event(c, "e2")).state == "skipped"


@pytest.mark.parametrize(
    ("policy", "mentioned", "answers"),
    [
        ("mention", False, False),
        ("mention", True, True),
        ("all", False, True),
        ("disabled", True, False),
    ],
)
async def test_group_policies(policy: str, mentioned: bool, answers: bool) -> None:
    w = await channel_world()
    c = await w.channel(group_policy=policy, dm_policy="disabled")
    await answered(w, c, "e1", chat_id="g1", is_group=True, mentioned=mentioned)
    assert bool(w.platform.sent) is answers
    (contact,), _ = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=5)
    assert contact.thread_id is None  # a group chat is not the contact's own


async def test_a_busy_thread_waits_for_the_earlier_answer() -> None:
    w = await channel_world()
    c = await w.channel()
    await answered(w, c, "e1")
    thread = await w.turn.storage.threads.get(c.org_id, await w.thread_of(c))
    # the chat's thread answers something else (a reply still running)
    now = w.turn.clock.now()
    run = a_run(thread, started_at=now, heartbeat_at=now)
    await w.turn.store.begin_turn(run, [], now - timedelta(seconds=30))
    await w.message(c, "e2")
    assert await w.run_jobs() == [Again(2.0)]
    assert (await w.event(c, "e2")).state == "admitted"
    assert len(w.platform.sent) == 1


# --- delivery ------------------------------------------------------------------------------


async def test_a_long_reply_goes_in_parts_and_a_busy_platform_never_gets_a_part_twice() -> None:
    w = await channel_world(says("abcdefghij"))
    w.platform.part_len = 4
    c = await w.channel()
    w.platform.outcomes = [None, busy(7.5)]
    await w.message(c, "e1")
    assert await w.run_jobs() == [Again(7.5)]
    assert [m.text for m in w.platform.sent] == ["abcd"]
    event = await w.event(c, "e1")
    assert (event.state, event.parts_sent, event.attempts) == ("replied", 1, 1)
    assert await w.run_event(c, "e1") is None
    assert [m.text for m in w.platform.sent] == ["abcd", "efgh", "ij"]
    assert len(w.turn.model.requests) == 1  # the turn ran once
    assert (await w.event(c, "e1")).state == "done"


async def test_a_transient_failure_backs_off_and_attempts_are_capped() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)] * MAX_ATTEMPTS
    await w.message(c, "e1")
    waits = [await w.run_event(c, "e1") for _ in range(MAX_ATTEMPTS)]
    assert waits == [Again(2.0), Again(4.0), Again(8.0), Again(16.0), None]
    event = await w.event(c, "e1")
    assert event.state == "failed"
    assert "after 5 attempts" in (event.error or "")
    stored = await w.fresh(c)
    assert stored.status == "error"
    assert "down" in (stored.status_reason or "")
    assert w.platform.sent == []


async def test_a_permanent_failure_is_recorded_at_once() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [DeliveryFailed("chat not found", permanent=True)]
    await w.message(c, "e1")
    assert await w.run_jobs() == [None]
    event = await w.event(c, "e1")
    assert (event.state, event.error, event.attempts) == ("failed", "chat not found", 0)
    assert (await w.fresh(c)).status_reason == "a reply could not be delivered: chat not found"
    assert await w.run_event(c, "e1") is None
    assert w.platform.sent == []


async def test_a_reply_delivered_after_a_failure_connects_the_channel_again() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [DeliveryFailed("chat not found", permanent=True)]
    await w.message(c, "e1", chat_id="gone")
    await w.run_jobs()
    assert (await w.fresh(c)).status == "error"
    await w.message(c, "e2", chat_id="here")
    await w.run_jobs()
    again = await w.fresh(c)
    assert (again.status, again.status_reason) == ("connected", None)
    assert [e.data["status"] for e in w.events.events] == ["error", "connected"]
    assert (await w.event(c, "e1")).state == "failed"  # the failure stays on its message


async def test_a_message_says_failed_or_done_only_once_its_channel_says_so_too() -> None:
    """Whoever reads a message's final state reads its channel's status of that
    outcome too: the channel is written first."""
    w = await channel_world()
    c = await w.channel()
    seen: list[tuple[str, str]] = []
    save_event = w.store.save_event

    async def watched(event: ChannelEvent) -> None:
        if event.state in ("failed", "done"):
            seen.append((event.state, (await w.fresh(c)).status))
        await save_event(event)

    w.store.save_event = watched  # type: ignore[method-assign]
    w.platform.outcomes = [DeliveryFailed("blocked by the user", permanent=True)]
    await w.message(c, "e1", chat_id="gone")
    await w.run_jobs()
    await w.message(c, "e2", chat_id="here")
    await w.run_jobs()
    assert seen == [("failed", "error"), ("done", "connected")]


async def test_a_job_rerun_after_its_turn_started_reads_the_stored_reply() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)]
    await w.run_jobs()
    event = await w.event(c, "e1")
    # as if the job died after the turn began: back to answering
    await w.store.save_event(msgspec.structs.replace(event, state="answering", reply_text=None))
    assert await w.run_event(c, "e1") is None
    assert [m.text for m in w.platform.sent] == ["hello there"]
    assert len(w.turn.model.requests) == 1


# --- QR pairing -------------------------------------------------------------------------


async def test_the_qr_of_a_paired_platform() -> None:
    w = await channel_world(kind="whatsapp_web")
    w.platform.credential_fields = ()
    agent = w.turn.agent.id
    with pytest.raises(NotFound):
        await w.channels.pairing(WHO, agent, "whatsapp_web")
    w.platform.connected = msgspec.structs.replace(w.platform.connected, status="connecting")
    await w.channels.create(WHO, agent, ChannelDraft(type="whatsapp_web"))
    later = w.turn.clock.now() + timedelta(seconds=40)
    w.platform.pair_state = PairingState(
        status="connecting", qr_png=b"PNG", qr_expires_at=later, pairing_code="ABCD"
    )
    view = await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert view.qr_data_url == "data:image/png;base64," + base64.b64encode(b"PNG").decode()
    assert (view.status, view.qr_expires_at, view.pairing_code) == ("connecting", later, "ABCD")
    w.turn.clock.advance(41)
    expired = await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert (expired.status, expired.qr_data_url) == ("connecting", None)  # not a failure
    w.platform.pair_state = PairingState(status="connected")
    with pytest.raises(Conflict) as caught:
        await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert caught.value.code == "ALREADY_CONNECTED"
    with pytest.raises(Conflict):
        await w.channels.pairing(WHO, agent, "whatsapp_web")  # stored connected now
    with pytest.raises(InvalidInput):
        await w.channels.pairing(WHO, agent, "telegram")
