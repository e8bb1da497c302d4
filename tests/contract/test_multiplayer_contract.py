"""Multiplayer on both storages: the agents' multiplayer configurations (sealed
records), a message stored outside a turn (even while a reply runs, in history
order) and thread news between two processes' buses (PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.postgres import PostgresStopBus, PostgresStorage
from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases.multiplayer.config import MultiplayerConfig, MultiplayerSettings
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_message, a_run, stored_thread

BOX = AesGcmBox([("k1", b"\x01" * 32)])


def _settings(backend: Backend) -> tuple[MultiplayerSettings, Principal, UUID]:
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    settings = MultiplayerSettings(backend.storage.secrets, backend.storage.agents, BOX)
    return settings, Principal.organization(org), agent.id


@given(
    enabled=st.booleans(),
    respond_to=st.sampled_from(["all", "mentions", "owners"]),
    display_name=st.one_of(
        st.none(),
        st.text(
            st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=100
        ).filter(lambda s: s.strip()),
    ),
    max_participants=st.integers(2, 100),
)
def test_a_configuration_round_trips_exactly(
    backend: Backend,
    enabled: bool,
    respond_to: str,
    display_name: str | None,
    max_participants: int,
) -> None:
    settings, who, agent = _settings(backend)
    default = backend.run(settings.get, who, agent)
    assert default == MultiplayerConfig(agent_id=agent, org_id=who.org_id)
    changes = {
        "enabled": enabled,
        "respond_to": respond_to,
        "display_name": display_name,
        "max_participants": max_participants,
    }
    stored = backend.run(settings.update, who, agent, changes)
    assert stored == MultiplayerConfig(agent_id=agent, org_id=who.org_id, **changes)  # type: ignore[arg-type]
    assert backend.run(settings.get, who, agent) == stored


def test_a_change_keeps_the_other_fields_and_a_refused_one_stores_nothing(
    backend: Backend,
) -> None:
    settings, who, agent = _settings(backend)
    backend.run(settings.update, who, agent, {"respond_to": "mentions"})
    got = backend.run(settings.update, who, agent, {"max_participants": 2})
    assert (got.respond_to, got.max_participants, got.enabled) == ("mentions", 2, True)
    for bad in ({"max_participants": 1}, {"max_participants": 101}, {"display_name": " "}):
        with pytest.raises(InvalidInput):
            backend.run(settings.update, who, agent, bad)
    assert backend.run(settings.get, who, agent) == got
    with pytest.raises(NotFound):
        backend.run(settings.get, who, uuid.uuid4())
    # another organization's agent is not found either
    other = Principal.organization(backend.fresh_org())
    with pytest.raises(NotFound):
        backend.run(settings.update, other, agent, {"enabled": False})


def test_a_message_stored_outside_a_turn_takes_its_place_in_the_history(
    backend: Backend,
) -> None:
    t = stored_thread(backend, kind="multiplayer")
    store = backend.storage.conversations
    run = a_run(t)
    backend.run(
        store.begin_turn, run, [a_message(t, content="asks")], now() - timedelta(seconds=45)
    )
    # a reply runs: a message that does not call the agent is stored all the same
    aside = a_message(t, content="aside", sender_id="bob", sender_name="Bob")
    backend.run(store.add_message, aside)
    backend.run(
        store.finish_turn,
        msgspec.structs.replace(run, status="completed", finished_at=now()),
        [a_message(t, "assistant", "answer", run_id=run.id)],
        [],
    )
    page, total = backend.run(lambda: store.history(t.org_id, t.id, offset=0, limit=10))
    assert [m.content for m in page] == ["asks", "aside", "answer"]
    assert total == 3
    assert page[1] == aside
    # the next turn reads it with the rest
    inputs = backend.run(backend.storage.turn_reader.turn_inputs, t.org_id, t.id, [])
    assert [m.content for m in inputs.history] == ["asks", "aside", "answer"]


# one process for memory: its news is in-process (the unit tests have it)
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_thread_news_reaches_another_process(backend: Backend) -> None:
    assert isinstance(backend.storage, PostgresStorage)
    other = PostgresStorage(backend.storage.conninfo, min_size=1, max_size=2)
    mine = PostgresStopBus(backend.storage.conninfo, backend.storage.pool, backend.storage.owner)
    theirs = PostgresStopBus(other.conninfo, other.pool, other.owner)
    backend.run(other.open)
    backend.run(theirs.start)
    heard: list[UUID] = []
    theirs.on_news(heard.append)
    thread = uuid.uuid4()

    async def tell_and_wait() -> None:
        await mine.publish_news(thread)
        for _ in range(200):
            if heard:
                return
            await asyncio.sleep(0.02)

    try:
        backend.run(tell_and_wait)
    finally:
        backend.run(theirs.close)
        backend.run(other.close)
    assert heard == [thread]
