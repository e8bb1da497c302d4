"""Channels' use cases at their edges (the mutants' places): refusals' fields and
wording, bounds and defaults, what goes to storage and to the turn (the thread's
title and metadata, the sender), the pairing code's form, the turn's other ends
(an empty reply, a refused message, a failed model call) and the channel or
platform that went away."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities import Message
from agentsvc_core.errors import Conflict, DomainError, InvalidInput, NotFound, Upstream
from agentsvc_core.ports import TextDelta
from agentsvc_core.ports.channel_platforms import (
    Connected,
    DeliveryFailed,
    Inbound,
    PairingState,
    PlatformNotConfigured,
)
from agentsvc_core.use_cases.channels import ChannelChanges, ChannelDraft
from agentsvc_core.use_cases.channels import answer as answer_module
from agentsvc_core.use_cases.channels.answer import pairing_text
from agentsvc_core.use_cases.channels.inbound import (
    ANSWER_JOB,
    MAX_ID,
    MAX_TEXT,
    AnswerJob,
    job_key,
)
from agentsvc_core.use_cases.channels.manage import (
    MAX_FIELD,
    inbound_url,
    open_credentials,
    snake_keys,
)
from agentsvc_core.use_cases.channels.transitions import MAX_ATTEMPTS
from tests.unit.channels_world import busy, channel_world
from tests.unit.turn_world import BOX, HANG, WHO, Script, says

pytestmark = pytest.mark.anyio


async def test_refusals_name_the_field_and_what_it_takes() -> None:
    w = await channel_world()
    agent = w.turn.agent.id
    with pytest.raises(InvalidInput) as caught:
        await w.channels.create(
            WHO, agent, ChannelDraft(type="telegram", credentials={"token": "a", "x": "b"})
        )
    assert (caught.value.field, caught.value.problem) == (
        "credentials.x",
        "not a field of this channel type (token)",
    )
    with pytest.raises(InvalidInput) as caught:
        await w.channels.create(
            WHO, agent, ChannelDraft(type="telegram", credentials={"token": "a"}, config={"y": 1})
        )
    assert caught.value.problem == "not a field of this channel type (none)"
    with pytest.raises(InvalidInput) as caught:
        await w.channels.create(WHO, agent, ChannelDraft(type="telegram"))
    assert (caught.value.field, caught.value.problem) == (
        "credentials.token",
        "required for this channel type",
    )
    with pytest.raises(InvalidInput) as caught:
        await w.channels.create(WHO, agent, ChannelDraft(type="slack"))
    assert (caught.value.field, caught.value.problem) == (
        "type",
        "this deployment has no slack channels",
    )


@pytest.mark.parametrize("value", ["", "   ", "a\x00b", "x" * (MAX_FIELD + 1)])
async def test_a_credential_must_be_text_of_bounded_length(value: str) -> None:
    w = await channel_world()
    with pytest.raises(InvalidInput) as caught:
        await w.channels.create(
            WHO, w.turn.agent.id, ChannelDraft(type="telegram", credentials={"token": value})
        )
    assert caught.value.field == "credentials.token"


async def test_a_credential_at_the_bound_is_taken() -> None:
    w = await channel_world()
    made = await w.channels.create(
        WHO, w.turn.agent.id, ChannelDraft(type="telegram", credentials={"token": "x" * MAX_FIELD})
    )
    assert made.channel.name == "telegram"  # no name: the type's


async def test_names_default_to_the_type_and_are_checked() -> None:
    w = await channel_world()
    c = await w.channel(name="Bot")
    view = await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(name=""))
    assert view.channel.name == "telegram"
    with pytest.raises(InvalidInput):
        await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(name="a\x00"))
    view = await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(group_policy="all"))
    assert (view.channel.group_policy, view.channel.name) == ("all", "telegram")
    assert view.channel.updated_at == w.turn.clock.now()


def test_camel_case_field_names_are_the_platforms_snake_case() -> None:
    given = {"botToken": "a", "phone_number_id": "b", "appSecret2": "c", "x": "d", "aB": "e"}
    assert snake_keys(given) == {
        "bot_token": "a",
        "phone_number_id": "b",
        "app_secret2": "c",
        "x": "d",
        "a_b": "e",
    }


def test_the_inbound_url() -> None:
    cid = uuid.uuid4()
    assert inbound_url("https://a.example/", cid) == f"https://a.example/api/channels/{cid}/webhook"
    assert inbound_url("https://a.example", cid) == f"https://a.example/api/channels/{cid}/webhook"


async def test_credentials_a_platform_makes_on_connect_are_sealed_with_the_given() -> None:
    w = await channel_world()
    w.platform.connected = Connected(status="connecting", credentials={"hook_secret": "made"})
    made = await w.channels.create(
        WHO, w.turn.agent.id, ChannelDraft(type="telegram", credentials={"token": "t"})
    )
    c = made.channel
    assert c.status == "connecting"
    assert open_credentials(BOX, c) == {"token": "t", "hook_secret": "made"}
    assert "made" not in (c.credentials_sealed or "")
    stored = await w.store.get(c.org_id, c.id)
    assert open_credentials(BOX, stored) == {"token": "t", "hook_secret": "made"}
    # a reconnect that makes nothing keeps what was made before
    w.platform.connected = Connected(status="connected")
    view = await w.channels.update(
        WHO, w.turn.agent.id, c.id, ChannelChanges(credentials={"token": "t2"})
    )
    assert open_credentials(BOX, view.channel) == {"token": "t2", "hook_secret": "made"}


async def test_a_deployment_setting_a_platform_lacks_is_a_422_naming_it() -> None:
    w = await channel_world()

    async def unset(*_: Any) -> Connected:
        raise PlatformNotConfigured("AGENTSVC_X_URL is not set")

    w.platform.connect = unset  # type: ignore[method-assign,assignment]
    with pytest.raises(InvalidInput) as refused:
        await w.channels.create(
            WHO, w.turn.agent.id, ChannelDraft(type="telegram", credentials={"token": "t"})
        )
    assert (refused.value.field, refused.value.problem) == ("type", "AGENTSVC_X_URL is not set")


async def test_update_of_config_only_reconnects_with_the_stored_credentials() -> None:
    w = await channel_world()
    w.platform.config_fields = ("phone",)
    made = await w.channels.create(
        WHO,
        w.turn.agent.id,
        ChannelDraft(type="telegram", credentials={"token": "t"}, config={"phone": "1"}),
    )
    view = await w.channels.update(
        WHO, w.turn.agent.id, made.channel.id, ChannelChanges(config={"phone": "2"})
    )
    assert w.platform.connects[-1] == ({"token": "t"}, made.inbound_url)
    assert view.channel.config == {"phone": "2", "bot": "@agent_bot"}
    with pytest.raises(InvalidInput):
        await w.channels.update(
            WHO, w.turn.agent.id, made.channel.id, ChannelChanges(config={"other": "x"})
        )


async def test_delete_goes_whatever_the_platform_says() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.disconnect_error = DomainError("the platform is down")
    await w.channels.delete(WHO, w.turn.agent.id, c.id)
    assert w.platform.disconnects == 1
    assert await w.channels.of_agent(WHO, w.turn.agent.id) == []


async def test_a_channel_of_a_type_gone_from_the_deployment() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.answers._platforms = {}
    assert await w.run_jobs() == [None]
    event = await w.event(c, "e1")
    assert (event.state, event.error) == ("failed", "this deployment has no telegram channels")
    stored = await w.fresh(c)
    assert stored.status == "error"
    assert (
        stored.status_reason
        == "a reply could not be delivered: this deployment has no telegram channels"
    )
    w.inbound._platforms = {}
    with pytest.raises(Exception, match="channel not found"):
        await w.inbound.channel(c.id)
    await w.channels.delete(WHO, w.turn.agent.id, c.id)  # no platform to disconnect


async def test_what_an_event_keeps_is_cleaned_and_bounded() -> None:
    w = await channel_world()
    c = await w.channel()
    long_id = "e" * (MAX_ID + 5)
    await w.message(
        c, long_id, "a\x00b" + "t" * MAX_TEXT, sender_name="A\x00nn", chat_id="c" * (MAX_ID + 1)
    )
    event = await w.event(c, "e" * MAX_ID)
    assert event.text == "ab" + "t" * (MAX_TEXT - 2)
    assert event.sender_name == "Ann"
    assert event.chat_id == "c" * MAX_ID
    assert event.state == "received"
    assert (event.sender_username, event.reply_to) == (None, None)
    ((kind, payload, key),) = w.jobs.queued
    assert kind == ANSWER_JOB
    assert msgspec.json.decode(payload, type=AnswerJob) == AnswerJob(c.org_id, c.id, "e" * MAX_ID)
    assert key == job_key(c.id, "e" * MAX_ID) == f"channel:{c.id}:{'e' * MAX_ID}"


async def test_a_status_and_messages_in_one_request() -> None:
    w = await channel_world()
    c = await w.channel()
    read = await w.post(c, status="connecting")
    assert isinstance(read, Inbound)
    assert w.jobs.queued == []
    stored = await w.fresh(c)
    assert (stored.status, stored.status_reason, stored.updated_at) == (
        "connecting",
        None,
        w.turn.clock.now(),
    )


async def test_the_thread_and_the_stored_message_name_the_channel_and_sender() -> None:
    w = await channel_world()
    c = await w.channel(name="Bot", dm_policy="disabled")
    await w.message(c, "e1", "kept", sender_name="Ann", sender_username="ann")
    await w.run_jobs()
    thread = await w.turn.storage.threads.get(c.org_id, await w.thread_of(c))
    assert thread.title == "Bot · Ann"
    assert thread.metadata == {
        "channel_id": str(c.id),
        "channel_type": "telegram",
        "channel_chat_id": "chat-1",
    }
    assert thread.agent_id == w.turn.agent.id
    (message,), _ = await w.turn.storage.conversations.history(
        c.org_id, thread.id, offset=0, limit=5
    )
    assert (message.sender_id, message.sender_name, message.role) == ("telegram:u1", "Ann", "user")
    await w.message(c, "e2", "again", chat_id="chat-2", sender_id="u2", sender_username="bob")
    await w.run_jobs()
    second = await w.turn.storage.threads.get(c.org_id, await w.thread_of(c, "chat-2"))
    assert second.title == "Bot · chat-2"
    (message,), _ = await w.turn.storage.conversations.history(
        c.org_id, second.id, offset=0, limit=5
    )
    assert (message.sender_id, message.sender_name) == ("telegram:u2", "bob")


async def test_an_answered_message_carries_its_sender() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1", "hello", sender_name="Ann")
    await w.run_jobs()
    history, _ = await w.turn.storage.conversations.history(
        c.org_id, await w.thread_of(c), offset=0, limit=5
    )
    assert [(m.role, m.sender_id, m.sender_name) for m in history] == [
        ("user", "telegram:u1", "Ann"),
        ("assistant", None, None),
    ]
    event = await w.event(c, "e1")
    assert event.reply_text == "hello there"
    assert event.reply_message_id == history[1].id
    assert event.run_id == history[1].run_id


async def test_the_pairing_code_is_six_digits_and_kept_until_approval() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="pairing")
    await w.message(c, "e1")
    await w.run_jobs()
    (contact,), more = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=1)
    assert not more
    code = contact.pairing_code
    assert code is not None
    assert len(code) == 6
    assert code.isdigit()
    assert code in w.platform.sent[0].text
    event = await w.event(c, "e1")
    assert (event.state, event.reply_message_id) == ("done", None)
    waiting = await w.channels.set_contact(WHO, w.turn.agent.id, c.id, contact.id, "pending")
    assert waiting.pairing_code == code
    blocked = await w.channels.set_contact(WHO, w.turn.agent.id, c.id, contact.id, "blocked")
    assert (blocked.status, blocked.pairing_code) == ("blocked", code)
    with pytest.raises(Exception, match="not found"):
        await w.channels.set_contact(WHO, uuid.uuid4(), c.id, contact.id, "approved")


async def test_a_group_message_under_pairing_is_not_paired() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="pairing", group_policy="all")
    await w.message(c, "e1", chat_id="g", is_group=True)
    await w.run_jobs()
    (contact,), _ = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=5)
    assert (contact.status, contact.pairing_code) == ("approved", None)
    assert [m.text for m in w.platform.sent] == ["hello there"]


async def test_a_contacts_page_exactly_full_has_no_more() -> None:
    w = await channel_world()
    c = await w.channel()
    for i in range(2):
        await w.message(c, f"e{i}", sender_id=f"u{i}", chat_id=f"c{i}")
        await w.run_jobs()
        w.turn.clock.advance(1)
    page, more = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=2)
    assert (len(page), more) == (2, False)
    page, more = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=1)
    assert (len(page), more) == (1, True)


async def test_the_messages_page_newest_first_by_state_and_owner() -> None:
    w = await channel_world()
    c = await w.channel()
    for i in range(3):
        await w.message(c, f"e{i}", sender_id=f"u{i}", chat_id=f"c{i}")
        w.turn.clock.advance(1)
    await w.run_jobs()
    agent = w.turn.agent.id
    page, more = await w.channels.messages(WHO, agent, c.id, before=None, limit=2)
    assert ([e.event_id for e in page], more) == (["e2", "e1"], True)
    page, more = await w.channels.messages(WHO, agent, c.id, before=None, limit=3)
    assert ([e.event_id for e in page], more) == (["e2", "e1", "e0"], False)
    rest, more = await w.channels.messages(
        WHO, agent, c.id, before=(page[0].created_at, "e2"), limit=5
    )
    assert ([e.event_id for e in rest], more) == (["e1", "e0"], False)
    assert {e.state for e in page} == {"done"}
    none, _ = await w.channels.messages(WHO, agent, c.id, before=None, limit=5, state="failed")
    assert none == []
    done, _ = await w.channels.messages(WHO, agent, c.id, before=None, limit=5, state="done")
    assert len(done) == 3
    with pytest.raises(NotFound):
        await w.channels.messages(WHO, uuid.uuid4(), c.id, before=None, limit=5)


async def test_an_empty_reply_is_done_without_sending() -> None:
    w = await channel_world(says(" "))
    c = await w.channel()
    await w.message(c, "e1")
    assert await w.run_jobs() == [None]
    assert (await w.event(c, "e1")).state == "done"
    assert w.platform.sent == []


async def test_a_message_the_turn_refuses_fails_without_a_reply() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1", "   ")
    assert await w.run_jobs() == [None]
    event = await w.event(c, "e1")
    assert (event.state, event.error) == ("failed", "content: must not be empty")
    assert w.platform.sent == []


async def test_a_failed_model_call_fails_without_a_reply() -> None:
    w = await channel_world([Upstream("the provider is down")])
    c = await w.channel()
    await w.message(c, "e1")
    assert await w.run_jobs() == [None]
    event = await w.event(c, "e1")
    assert event.state == "failed"
    assert (event.error or "").startswith("no reply: ")
    assert w.platform.sent == []
    assert (await w.fresh(c)).status == "connected"  # the platform is not to blame


async def test_a_stored_turn_without_a_reply_is_not_run_again() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)]
    await w.run_jobs()
    event = await w.event(c, "e1")
    await w.store.save_event(msgspec.structs.replace(event, state="answering", run_id=uuid.uuid4()))
    assert await w.run_event(c, "e1") is None
    event = await w.event(c, "e1")
    assert (event.state, event.error) == ("failed", "the turn ended without a reply")
    assert len(w.turn.model.requests) == 1


async def test_nothing_happens_for_a_gone_event_or_channel() -> None:
    w = await channel_world()
    c = await w.channel()
    assert await w.run_event(c, "never") is None
    await w.message(c, "e1")
    await w.channels.delete(WHO, w.turn.agent.id, c.id)
    assert await w.run_jobs() == [None]
    assert w.platform.sent == []


async def test_a_long_failure_reason_is_cut() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [DeliveryFailed("x" * 2000, permanent=True)]
    await w.message(c, "e1")
    await w.run_jobs()
    reason = (await w.fresh(c)).status_reason or ""
    assert len(reason) == 1000
    assert reason.startswith("a reply could not be delivered: xxx")


async def test_the_qr_without_an_expiry_and_the_status_it_stores() -> None:
    w = await channel_world(kind="whatsapp_web")
    w.platform.credential_fields = ()
    w.platform.connected = msgspec.structs.replace(w.platform.connected, status="pending")
    made = await w.channels.create(WHO, w.turn.agent.id, ChannelDraft(type="whatsapp_web"))
    w.platform.pair_state = PairingState(status="connecting", qr_png=b"Q", reason="scan it")
    view = await w.channels.pairing(WHO, w.turn.agent.id, "whatsapp_web")
    assert view.qr_data_url == "data:image/png;base64,UQ=="
    assert (view.qr_expires_at, view.pairing_code) == (None, None)
    stored = await w.fresh(made.channel)
    assert (stored.status, stored.status_reason) == ("connecting", "scan it")
    w.platform.pair_state = PairingState(status="connecting")
    empty = await w.channels.pairing(WHO, w.turn.agent.id, "whatsapp_web")
    assert (empty.qr_data_url, empty.status) == (None, "connecting")
    assert (await w.fresh(made.channel)).status_reason is None


async def test_a_turn_error_on_a_script_that_raises() -> None:
    # the model answers the second message after failing the first
    w = await channel_world([Upstream("down")], says("fine"))
    c = await w.channel()
    await w.message(c, "e1")
    await w.run_jobs()
    await w.message(c, "e2")
    await w.run_jobs()
    assert [m.text for m in w.platform.sent] == ["fine"]
    assert isinstance(w.turn.model, Script)


# --- the mutants' second round: what each step stores, in order ---------------------


class Steps:
    """Records the state of every event write (the store's ``save_event``)."""

    def __init__(self, w: Any) -> None:
        self.states: list[str] = []
        store = w.turn.storage.channels
        save = store.save_event

        async def recording(event: Any) -> None:
            self.states.append(event.state)
            await save(event)

        store.save_event = recording


async def test_each_step_is_stored_before_the_next() -> None:
    w = await channel_world()
    c = await w.channel()
    steps = Steps(w)
    w.turn.clock.advance(5)
    await w.message(c, "e1", reply_to="r-1")
    await w.run_jobs()
    assert steps.states == ["admitted", "answering", "replied", "replied", "done"]
    event = await w.event(c, "e1")
    assert event.updated_at == w.turn.clock.now()
    assert [m.reply_to for m in w.platform.sent] == ["r-1"]
    assert w.platform.seen[-1] == ("send", {"token": "t0k"}, {"bot": "@agent_bot"})


async def test_a_refused_send_is_stored_failed_once() -> None:
    w = await channel_world()
    c = await w.channel()
    steps = Steps(w)
    await w.message(c, "e1", "   ")
    await w.run_jobs()
    assert steps.states == ["admitted", "failed"]


async def test_a_skipped_or_paired_event_keeps_its_contact_and_thread() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="pairing")
    await w.message(c, "e1")
    await w.message(c, "e2")
    await w.run_jobs()
    paired, skipped = await w.event(c, "e1"), await w.event(c, "e2")
    thread = await w.thread_of(c)
    assert (paired.thread_id, skipped.thread_id) == (thread, thread)
    assert paired.contact_id is not None
    assert skipped.contact_id == paired.contact_id
    assert skipped.state == "skipped"


def test_the_pairing_text() -> None:
    assert pairing_text("012345") == (
        "Hello! Before I can answer, my owner has to approve this chat. "
        "Your pairing code is 012345: send it to them."
    )


async def test_one_thread_for_a_chat_and_the_stored_message_s_fields() -> None:
    w = await channel_world()
    c = await w.channel(dm_policy="disabled")
    w.turn.clock.advance(7)
    for i in range(3):
        await w.message(c, f"e{i}")
    await w.run_jobs()
    listed = await w.turn.storage.threads.list_for_agent(
        c.org_id, w.turn.agent.id, before=None, limit=50
    )
    channel_threads = [t for t in listed if t.metadata.get("channel_id") == str(c.id)]
    assert len(channel_threads) == 1
    history, _ = await w.turn.storage.conversations.history(
        c.org_id, channel_threads[0].id, offset=0, limit=5
    )
    assert len({m.id for m in history}) == 3
    assert all(isinstance(m.id, uuid.UUID) for m in history)
    assert {m.created_at for m in history} == {w.turn.clock.now()}


async def test_a_turn_error_is_named() -> None:
    w = await channel_world([Upstream("the provider is down")])
    c = await w.channel()
    await w.message(c, "e1")
    await w.run_jobs()
    event = await w.event(c, "e1")
    assert event.error == "no reply: UPSTREAM_ERROR"


async def test_the_reply_of_a_lost_job_must_be_the_agent_s_complete_answer() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)]
    await w.run_jobs()
    event = await w.event(c, "e1")
    thread = await w.thread_of(c)
    run = uuid.uuid4()
    now = w.turn.clock.now()
    for role, status in (("user", "complete"), ("assistant", "failed")):
        await w.turn.store.add_message(
            Message(
                id=uuid.uuid4(),
                org_id=c.org_id,
                thread_id=thread,
                role=role,  # type: ignore[arg-type]
                content="words",
                created_at=now,
                status=status,  # type: ignore[arg-type]
                run_id=run,
            )
        )
    await w.store.save_event(msgspec.structs.replace(event, state="answering", run_id=run))
    assert await w.run_event(c, "e1") is None
    event = await w.event(c, "e1")
    assert (event.state, event.error) == ("failed", "the turn ended without a reply")


async def test_a_rerun_takes_the_stored_reply_and_its_id() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)]
    await w.run_jobs()
    first = await w.event(c, "e1")
    await w.store.save_event(
        msgspec.structs.replace(first, state="answering", reply_text=None, reply_message_id=None)
    )
    await w.run_event(c, "e1")
    again = await w.event(c, "e1")
    assert again.reply_message_id == first.reply_message_id
    assert again.reply_message_id is not None


async def test_a_busy_platform_to_the_end_records_why() -> None:
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [busy(3.0)] * MAX_ATTEMPTS
    await w.message(c, "e1")
    await w.run_jobs()
    for _ in range(MAX_ATTEMPTS - 1):
        w.turn.clock.advance(3)
        await w.run_event(c, "e1")
    event = await w.event(c, "e1")
    assert (event.state, event.error, event.attempts) == (
        "failed",
        f"slow down (after {MAX_ATTEMPTS} attempts)",
        MAX_ATTEMPTS,
    )
    assert event.updated_at == w.turn.clock.now()
    stored = await w.fresh(c)
    assert (
        stored.status_reason
        == f"a reply could not be delivered: slow down (after {MAX_ATTEMPTS} attempts)"
    )
    assert stored.updated_at == w.turn.clock.now()


async def test_the_channel_not_found_and_names_checked_on_update() -> None:
    w = await channel_world()
    c = await w.channel()
    with pytest.raises(NotFound) as missing:
        await w.channels.update(WHO, uuid.uuid4(), c.id, ChannelChanges(name="x"))
    assert missing.value.detail == "channel not found"
    with pytest.raises(InvalidInput) as caught:
        await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(name="a\x00"))
    assert caught.value.field == "name"
    w.turn.clock.advance(9)
    view = await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(dm_policy="open"))
    assert view.channel.updated_at == w.turn.clock.now()
    with pytest.raises(InvalidInput) as caught:
        await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(credentials={"no": "x"}))
    assert caught.value.field == "credentials.no"
    with pytest.raises(InvalidInput) as caught:
        await w.channels.update(WHO, w.turn.agent.id, c.id, ChannelChanges(config={"no": "x"}))
    assert caught.value.field == "config.no"


async def test_delete_hands_the_platform_the_channel_s_credentials() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.channels.delete(WHO, w.turn.agent.id, c.id)
    assert w.platform.seen == [("disconnect", {"token": "t0k"}, {"bot": "@agent_bot"})]


async def test_the_qr_route_s_refusals_and_what_it_stores() -> None:
    w = await channel_world(kind="whatsapp_web")
    w.platform.credential_fields = ()
    agent = w.turn.agent.id
    with pytest.raises(InvalidInput) as caught:
        await w.channels.pairing(WHO, agent, "telegram")
    assert (caught.value.field, caught.value.problem) == (
        "type",
        "telegram channels are not paired by QR code",
    )
    with pytest.raises(NotFound) as missing:
        await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert missing.value.detail == "the agent has no whatsapp_web channel"
    w.platform.connected = msgspec.structs.replace(w.platform.connected, status="pending")
    made = await w.channels.create(WHO, agent, ChannelDraft(type="whatsapp_web"))
    # the status changes, the reason does not: stored
    w.turn.clock.advance(3)
    w.platform.pair_state = PairingState(status="connecting")
    await w.channels.pairing(WHO, agent, "whatsapp_web")
    stored = await w.fresh(made.channel)
    assert (stored.status, stored.updated_at) == ("connecting", w.turn.clock.now())
    assert w.platform.seen[-1] == ("pairing", {}, {"bot": "@agent_bot"})
    # a QR that expires now is expired
    now = w.turn.clock.now()
    w.platform.pair_state = PairingState(status="connecting", qr_png=b"Q", qr_expires_at=now)
    expired = await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert (expired.qr_data_url, expired.qr_expires_at) == (None, None)
    # connected as stored: 409 without asking the platform
    await w.store.modify(
        c_org(made), made.channel.id, lambda c: msgspec.structs.replace(c, status="connected")
    )
    w.platform.pair_state = PairingState(status="connecting")
    asked = len(w.platform.seen)
    with pytest.raises(Conflict) as caught_conflict:
        await w.channels.pairing(WHO, agent, "whatsapp_web")
    assert (caught_conflict.value.code, caught_conflict.value.detail) == (
        "ALREADY_CONNECTED",
        "the channel is connected already",
    )
    assert len(w.platform.seen) == asked


async def test_the_platform_saying_connected_is_409_too() -> None:
    w = await channel_world(kind="whatsapp_web")
    w.platform.credential_fields = ()
    w.platform.connected = msgspec.structs.replace(w.platform.connected, status="connecting")
    made = await w.channels.create(WHO, w.turn.agent.id, ChannelDraft(type="whatsapp_web"))
    w.platform.pair_state = PairingState(status="connected")
    with pytest.raises(Conflict) as caught:
        await w.channels.pairing(WHO, w.turn.agent.id, "whatsapp_web")
    assert (caught.value.code, caught.value.detail) == (
        "ALREADY_CONNECTED",
        "the channel is connected already",
    )
    assert (await w.fresh(made.channel)).status == "connected"


def c_org(view: Any) -> str:
    return str(view.channel.org_id)


async def test_what_the_inbound_endpoint_hands_over_and_keeps() -> None:
    w = await channel_world()
    c = await w.channel()
    w.turn.clock.advance(11)
    with pytest.raises(NotFound) as missing:
        await w.inbound.channel(uuid.uuid4())
    assert missing.value.detail == "channel not found"
    await w.message(
        c,
        "e1",
        reply_to="r" * (MAX_ID + 3),
        sender_id="s" * (MAX_ID + 1),
        sender_name="n" * (MAX_ID + 1),
        sender_username="u" * (MAX_ID + 1),
    )
    assert w.platform.seen[-1] == ("read", {"token": "t0k"}, {"bot": "@agent_bot"})
    assert w.platform.read_at == [w.turn.clock.now()]
    event = await w.event(c, "e1")
    assert (event.reply_to, event.sender_id) == ("r" * MAX_ID, "s" * MAX_ID)
    assert (event.sender_name, event.sender_username) == ("n" * MAX_ID, "u" * MAX_ID)
    assert event.created_at == event.updated_at == w.turn.clock.now()


async def test_a_redelivery_queues_again_only_what_was_never_taken() -> None:
    w = await channel_world()
    c = await w.channel()
    await w.message(c, "e1")
    w.jobs.queued.clear()  # the queue lost it (it failed once the event was stored)
    await w.message(c, "e1")
    assert [key for _, _, key in w.jobs.queued] == [f"channel:{c.id}:e1"]
    await w.run_jobs()
    await w.message(c, "e1")
    assert w.jobs.queued == []
    assert len(w.platform.sent) == 1


# --- the dates each write carries, a channel changed meanwhile, a stopped turn -------


async def test_each_write_is_dated_when_it_is_made() -> None:
    w = await channel_world()
    c = await w.channel()
    clock = w.turn.clock
    w.platform.outcomes = [DeliveryFailed("down", permanent=False)]
    await w.message(c, "e1")
    clock.advance(60)
    await w.run_jobs()  # answered, then a delivery to try again
    assert (await w.event(c, "e1")).updated_at == clock.now()
    w.platform.outcomes = [DeliveryFailed("gone", permanent=True)]
    clock.advance(60)
    await w.run_event(c, "e1")
    assert (await w.event(c, "e1")).updated_at == clock.now()
    assert (await w.fresh(c)).updated_at == clock.now()  # the channel's error
    await w.message(c, "e2", chat_id="here")
    clock.advance(60)
    await w.run_jobs()  # delivered: the channel connected again
    assert (await w.event(c, "e2")).updated_at == clock.now()
    again = await w.fresh(c)
    assert (again.status, again.updated_at) == ("connected", clock.now())


async def test_a_channel_whose_status_changed_meanwhile_keeps_it() -> None:
    """A reply delivered after a failure connects the channel again only if it
    still says ``error``: a status set meanwhile (here by hand) stays."""
    w = await channel_world()
    c = await w.channel()
    w.platform.outcomes = [DeliveryFailed("gone", permanent=True)]
    await w.message(c, "e1")
    await w.run_jobs()
    send = w.platform.send

    async def sending(*args: Any) -> Any:
        await w.store.modify(
            c.org_id,
            c.id,
            lambda ch: msgspec.structs.replace(ch, status="disconnected", status_reason="by hand"),
        )
        return await send(*args)

    w.platform.send = sending  # type: ignore[method-assign,assignment]
    await w.message(c, "e2")
    await w.run_jobs()
    assert (await w.event(c, "e2")).state == "done"
    kept = await w.fresh(c)
    assert (kept.status, kept.status_reason) == ("disconnected", "by hand")


async def test_a_stopped_turn_fails_its_message_saying_so() -> None:
    w = await channel_world([TextDelta("so far"), HANG])
    c = await w.channel()
    await w.message(c, "e1")
    job = asyncio.create_task(w.run_jobs())
    await asyncio.wait_for(w.turn.model.waiting.wait(), 5)
    assert await w.turn.conversation.stop(WHO, await w.thread_of(c)) is True
    assert await asyncio.wait_for(job, 5) == [None]
    event = await w.event(c, "e1")
    assert (event.state, event.error) == ("failed", "no reply: the turn was stopped")
    assert w.platform.sent == []


async def test_a_pairing_code_is_six_digits_drawn_from_a_million(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bounds: list[int] = []

    def randbelow(bound: int) -> int:
        bounds.append(bound)
        return 4242

    monkeypatch.setattr(answer_module, "secrets", SimpleNamespace(randbelow=randbelow))
    w = await channel_world()
    c = await w.channel(dm_policy="pairing")
    await w.message(c, "e1", "hello?")
    await w.run_jobs()
    (contact,), _ = await w.channels.contacts(WHO, w.turn.agent.id, c.id, before=None, limit=5)
    assert (bounds, contact.pairing_code) == ([10**6], "004242")
