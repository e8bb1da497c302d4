"""The thread search (``ThreadRepository.list_for_agent`` with ``words``): the memory
and PostgreSQL adapters find the same threads, scoped as the listing is."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_core.entities import Participant, Role, Thread, ToolCall
from agentsvc_core.ports.storage import SEARCH_CHARS
from tests.contract.conftest import Backend, now
from tests.contract.test_conversations_contract import a_message, a_thread


def _found(
    backend: Backend,
    org: str,
    agent: uuid.UUID,
    *words: str,
    before: datetime | None = None,
    visible_to: str | None = None,
) -> list[str]:
    """The titles of the threads the search lists, newest first."""
    listed = backend.run(
        lambda: backend.storage.threads.list_for_agent(
            org, agent, before=before, limit=50, visible_to=visible_to, words=words
        )
    )
    return [t.title or "" for t in listed]


def _thread(
    backend: Backend, org: str, agent: uuid.UUID, title: str, *said: str, **over: object
) -> Thread:
    t = backend.run(backend.storage.threads.add, a_thread(org, agent, title=title, **over))
    for i, text in enumerate(said):
        role: Role = "user" if i % 2 == 0 else "assistant"
        backend.run(backend.storage.conversations.add_message, a_message(t, role, text))
    return t


def test_titles_and_messages_are_searched_by_word_starts(backend: Backend) -> None:
    org, agent = backend.fresh_org(), uuid.uuid4()
    _thread(backend, org, agent, "Brewing Green Tea", "how hot?")
    _thread(backend, org, agent, "t2", "What about oolong?", "Oolong likes 90 degrees.")
    _thread(backend, org, agent, "t3", "nothing to see")
    assert _found(backend, org, agent, "green") == ["Brewing Green Tea"]
    assert _found(backend, org, agent, "gre", "te") == ["Brewing Green Tea"]  # starts, all
    assert _found(backend, org, agent, "oolong") == ["t2"]  # user and assistant text
    assert _found(backend, org, agent, "degrees", "likes") == ["t2"]
    assert _found(backend, org, agent, "reen") == []  # a word's start, not its middle
    assert _found(backend, org, agent, "green", "oolong") == []  # every word, in one place
    assert _found(backend, org, agent) == ["t3", "t2", "Brewing Green Tea"]  # no words: all


def test_words_spread_over_two_messages_do_not_match(backend: Backend) -> None:
    org, agent = backend.fresh_org(), uuid.uuid4()
    _thread(backend, org, agent, "spread", "green", "tea")
    _thread(backend, org, agent, "together", "green tea")
    assert _found(backend, org, agent, "green", "tea") == ["together"]


def test_only_shown_messages_and_their_first_characters_are_searched(backend: Backend) -> None:
    org, agent = backend.fresh_org(), uuid.uuid4()
    t = _thread(backend, org, agent, "tools", "hello")
    call = ToolCall(id="c1", name="lookup", arguments={})
    store = backend.storage.conversations
    backend.run(store.add_message, a_message(t, "assistant", "", tool_calls=(call,)))
    backend.run(store.add_message, a_message(t, "tool", "zanzibar", tool_call_id="c1"))
    assert _found(backend, org, agent, "zanzibar") == []  # a tool result is not shown
    _thread(backend, org, agent, "long", "x" * (SEARCH_CHARS - 6) + " tail far")
    assert _found(backend, org, agent, "tail") == ["long"]  # starts within the limit
    assert _found(backend, org, agent, "far") == []  # past it


def test_the_search_keeps_the_listing_scope(backend: Backend) -> None:
    org, agent = backend.fresh_org(), uuid.uuid4()
    _thread(backend, org, agent, "mine", "secret plan", created_by="u1")
    _thread(backend, org, agent, "theirs", "secret plan", created_by="u2")
    shared = _thread(
        backend, org, agent, "shared", "secret plan", created_by="u2", kind="multiplayer"
    )
    backend.run(
        backend.storage.threads.put_participant,
        Participant(
            org_id=org,
            thread_id=shared.id,
            user_id="u1",
            display_name=None,
            role="member",
            added_at=now(),
        ),
    )
    _thread(backend, org, uuid.uuid4(), "other agent", "secret plan")
    other_org = backend.fresh_org()
    _thread(backend, other_org, agent, "other org", "secret plan")
    assert _found(backend, org, agent, "secret", visible_to="u1") == ["shared", "mine"]
    assert _found(backend, org, agent, "secret", visible_to="u3") == []
    assert _found(backend, org, agent, "secret") == ["shared", "theirs", "mine"]
    # paged: strictly older than the cursor
    listed = backend.run(
        lambda: backend.storage.threads.list_for_agent(
            org, agent, before=None, limit=1, words=["secret"]
        )
    )
    assert [t.title for t in listed] == ["shared"]
    assert _found(backend, org, agent, "secret", before=listed[0].created_at) == ["theirs", "mine"]


VOCABULARY = ["tea", "teapot", "green", "Oolong", "kettle", "cup", "CUPS", "brew"]
phrase = st.lists(st.sampled_from(VOCABULARY), max_size=4).map(" ".join)


def _oracle(documents: Sequence[str], words: Sequence[str]) -> bool:
    """The port's rule, written out: one document holds every word as a word's start."""
    return any(
        all(any(h.lower().startswith(w) for h in doc.split()) for w in words) for doc in documents
    )


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    threads=st.lists(st.tuples(phrase, st.lists(phrase, max_size=3)), min_size=1, max_size=5),
    words=st.lists(
        st.sampled_from(["te", "tea", "green", "oolong", "cup", "cups", "k"]),
        min_size=1,
        max_size=3,
    ),
)
def test_the_search_finds_what_the_rule_says(
    backend: Backend, threads: list[tuple[str, list[str]]], words: list[str]
) -> None:
    org, agent = backend.fresh_org(), uuid.uuid4()
    made = []
    for i, (title, said) in enumerate(threads):
        made.append((f"{i} {title}", said))
        _thread(backend, org, agent, f"{i} {title}", *said)
    expected = [title for title, said in reversed(made) if _oracle([title, *said], words)]
    assert _found(backend, org, agent, *dict.fromkeys(words)) == expected
