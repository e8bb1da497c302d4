"""Channels: the memory and PostgreSQL adapters agree on the ChannelStore contract
(agentsvc_core/ports/channels.py): a channel's fields round-trip and change
atomically, one whatsapp_web per agent, another organization's id is not found,
a channel goes with its agent and takes its contacts, chats and events along;
contacts upsert on (channel, external id) and page newest first; a chat claims
one thread (the first claim wins, the mapping goes with its thread); an event is
stored once per (channel, event id), however many times it is recorded at once."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.channel import Channel, ChannelEvent, Contact
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread


def _agent(backend: Backend, org: str | None = None) -> tuple[str, uuid.UUID]:
    org = org or backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return org, agent.id


def a_channel(org: str, agent: uuid.UUID, **over: object) -> Channel:
    t = now()
    base = Channel(
        id=uuid.uuid4(),
        org_id=org,
        agent_id=agent,
        type="webhook",
        name="Support",
        status="connected",
        status_reason=None,
        config={"target_url": "https://hooks.example.com/in", "n": 3, "on": True},
        credentials_sealed="v1.k.sealed",
        dm_policy="allowlist",
        allow_from=("u1", "bob"),
        group_policy="mention",
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def a_contact(channel: Channel, external_id: str = "u1", **over: object) -> Contact:
    t = now()
    base = Contact(
        id=uuid.uuid4(),
        org_id=channel.org_id,
        channel_id=channel.id,
        external_id=external_id,
        display_name="Ann",
        username="ann",
        thread_id=None,
        status="pending",
        pairing_code="123456",
        first_seen_at=t,
        last_message_at=t,
    )
    return msgspec.structs.replace(base, **over)


def an_event(channel: Channel, event_id: str = "e1", **over: object) -> ChannelEvent:
    t = now()
    base = ChannelEvent(
        org_id=channel.org_id,
        channel_id=channel.id,
        event_id=event_id,
        chat_id="chat-1",
        sender_id="u1",
        sender_name="Ann",
        text="hello",
        is_group=True,
        mentioned=True,
        reply_to="ts.1",
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def _stored_channel(backend: Backend, **over: object) -> Channel:
    org, agent = _agent(backend)
    return backend.run(backend.storage.channels.add, a_channel(org, agent, **over))


def test_a_channel_round_trips_and_changes(backend: Backend) -> None:
    store = backend.storage.channels
    org, agent = _agent(backend)
    channel = a_channel(org, agent)
    assert backend.run(store.add, channel) == channel
    assert backend.run(store.get, org, channel.id) == channel
    assert backend.run(store.find, channel.id) == channel
    assert backend.run(store.of_agent, org, agent) == [channel]
    changed = backend.run(
        store.modify,
        org,
        channel.id,
        lambda c: msgspec.structs.replace(c, status="error", status_reason="x", config={"a": "b"}),
    )
    assert backend.run(store.get, org, channel.id) == changed
    assert changed.config == {"a": "b"}
    with pytest.raises(NotFound):
        backend.run(store.get, backend.fresh_org(), channel.id)
    with pytest.raises(NotFound):
        backend.run(store.modify, backend.fresh_org(), channel.id, lambda c: c)
    assert backend.run(store.find, uuid.uuid4()) is None


def test_channels_list_oldest_first_and_one_whatsapp_web_per_agent(backend: Backend) -> None:
    store = backend.storage.channels
    org, agent = _agent(backend)
    t = now()
    later = backend.run(store.add, a_channel(org, agent, created_at=t + timedelta(seconds=1)))
    first = backend.run(store.add, a_channel(org, agent, type="whatsapp_web", created_at=t))
    assert [c.id for c in backend.run(store.of_agent, org, agent)] == [first.id, later.id]
    with pytest.raises(Conflict) as caught:
        backend.run(store.add, a_channel(org, agent, type="whatsapp_web"))
    assert caught.value.code == "CHANNEL_TYPE_TAKEN"
    _, other = _agent(backend, org)
    backend.run(store.add, a_channel(org, other, type="whatsapp_web"))  # another agent may


def test_a_channel_needs_its_agent_and_goes_with_it(backend: Backend) -> None:
    store = backend.storage.channels
    org, agent = _agent(backend)
    with pytest.raises(NotFound):
        backend.run(store.add, a_channel(org, uuid.uuid4()))
    channel = backend.run(store.add, a_channel(org, agent))
    backend.run(store.upsert_contact, a_contact(channel))
    backend.run(store.record_event, an_event(channel))
    backend.run(backend.storage.agents.delete, org, agent)
    assert backend.run(store.find, channel.id) is None
    assert backend.run(store.event, org, channel.id, "e1") is None


def test_delete_takes_contacts_chats_and_events(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    org = channel.org_id
    contact, _ = backend.run(store.upsert_contact, a_contact(channel))
    thread = backend.run(backend.storage.threads.add, a_thread(org, channel.agent_id))
    backend.run(store.claim_chat, org, channel.id, "chat-1", thread.id)
    backend.run(store.record_event, an_event(channel))
    assert not backend.run(store.delete, backend.fresh_org(), channel.id)
    assert backend.run(store.delete, org, channel.id)
    assert not backend.run(store.delete, org, channel.id)
    with pytest.raises(NotFound):
        backend.run(store.contact, org, channel.id, contact.id)
    assert backend.run(store.chat_thread, org, channel.id, "chat-1") is None
    assert backend.run(store.event, org, channel.id, "e1") is None


def test_contacts_upsert_on_their_external_id(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    first = a_contact(channel)
    stored, created = backend.run(store.upsert_contact, first)
    assert (stored, created) == (first, True)
    later = first.first_seen_at + timedelta(minutes=5)
    again, created = backend.run(
        store.upsert_contact,
        a_contact(
            channel,
            display_name=None,
            username="ann2",
            status="approved",
            pairing_code="999999",
            first_seen_at=later,
            last_message_at=later,
        ),
    )
    assert not created
    assert again == msgspec.structs.replace(first, username="ann2", last_message_at=later)
    assert backend.run(store.contact, channel.org_id, channel.id, first.id) == again
    with pytest.raises(NotFound):
        backend.run(store.contact, channel.org_id, uuid.uuid4(), first.id)


def test_concurrent_first_messages_make_one_contact(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)

    async def race() -> list[tuple[Contact, bool]]:
        return list(
            await asyncio.gather(*(store.upsert_contact(a_contact(channel)) for _ in range(5)))
        )

    results = backend.run(race)
    assert sum(created for _, created in results) == 1
    assert len({c.id for c, _ in results}) == 1


def test_contacts_page_newest_first_and_change(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    t = now()
    made = [
        backend.run(
            store.upsert_contact,
            a_contact(channel, f"u{i}", first_seen_at=t + timedelta(seconds=i)),
        )[0]
        for i in range(3)
    ]
    page = backend.run(lambda: store.contacts(channel.org_id, channel.id, before=None, limit=2))
    assert [c.external_id for c in page] == ["u2", "u1"]
    rest = backend.run(
        lambda: store.contacts(
            channel.org_id, channel.id, before=(page[-1].first_seen_at, page[-1].id), limit=5
        )
    )
    assert [c.external_id for c in rest] == ["u0"]
    blocked = backend.run(
        store.modify_contact,
        channel.org_id,
        channel.id,
        made[0].id,
        lambda c: msgspec.structs.replace(c, status="blocked", pairing_code=None),
    )
    assert backend.run(store.contact, channel.org_id, channel.id, made[0].id) == blocked
    with pytest.raises(NotFound):
        backend.run(store.modify_contact, channel.org_id, channel.id, uuid.uuid4(), lambda c: c)


def test_a_chat_claims_one_thread(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    org = channel.org_id
    one = backend.run(backend.storage.threads.add, a_thread(org, channel.agent_id))
    two = backend.run(backend.storage.threads.add, a_thread(org, channel.agent_id))
    assert backend.run(store.chat_thread, org, channel.id, "c") is None
    assert backend.run(store.claim_chat, org, channel.id, "c", one.id) == one.id
    assert backend.run(store.claim_chat, org, channel.id, "c", two.id) == one.id
    assert backend.run(store.chat_thread, org, channel.id, "c") == one.id
    assert backend.run(store.chat_thread, backend.fresh_org(), channel.id, "c") is None
    with pytest.raises(NotFound):
        backend.run(store.claim_chat, org, channel.id, "d", uuid.uuid4())


def test_an_event_is_stored_once(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    event = an_event(channel)

    async def race() -> list[bool]:
        return list(await asyncio.gather(*(store.record_event(event) for _ in range(5))))

    assert sorted(backend.run(race)) == [False, False, False, False, True]
    assert backend.run(store.event, channel.org_id, channel.id, "e1") == event
    assert backend.run(store.event, backend.fresh_org(), channel.id, "e1") is None
    progressed = msgspec.structs.replace(
        event,
        state="replied",
        contact_id=uuid.uuid4(),
        thread_id=uuid.uuid4(),
        run_id=uuid.uuid4(),
        reply_message_id=uuid.uuid4(),
        reply_text="answer",
        parts_sent=2,
        attempts=1,
        error="was busy",
    )
    backend.run(store.save_event, progressed)
    assert backend.run(store.event, channel.org_id, channel.id, "e1") == progressed
    assert not backend.run(store.record_event, an_event(channel, text="other"))
    assert backend.run(store.event, channel.org_id, channel.id, "e1") == progressed
    with pytest.raises(NotFound):
        backend.run(store.record_event, an_event(a_channel(channel.org_id, channel.agent_id)))


def test_events_page_newest_first_by_state(backend: Backend) -> None:
    store = backend.storage.channels
    channel = _stored_channel(backend)
    other = _stored_channel(backend)
    t = now()
    states = ["done", "failed", "done", "skipped"]
    for i, state in enumerate(states):
        event = an_event(channel, f"Ev{i}", created_at=t + timedelta(seconds=i), state=state)
        backend.run(store.record_event, event)
    # a tie on the time is ordered by the event id
    backend.run(store.record_event, an_event(channel, "Ev3b", created_at=t + timedelta(seconds=3)))
    backend.run(store.record_event, an_event(other, "Ev9", created_at=t + timedelta(seconds=9)))

    def page(**kw: object) -> list[str]:
        found = backend.run(lambda: store.events(channel.org_id, channel.id, **kw))  # type: ignore[arg-type]
        return [e.event_id for e in found]

    assert page(before=None, limit=3) == ["Ev3b", "Ev3", "Ev2"]
    assert page(before=(t + timedelta(seconds=3), "Ev3"), limit=5) == ["Ev2", "Ev1", "Ev0"]
    assert page(before=None, limit=5, state="done") == ["Ev2", "Ev0"]
    assert page(before=(t + timedelta(seconds=2), "Ev2"), limit=5, state="done") == ["Ev0"]
    assert page(before=None, limit=5, state="received") == ["Ev3b"]
    stranger = backend.fresh_org()
    assert backend.run(lambda: store.events(stranger, channel.id, before=None, limit=5)) == []
