"""A thread's branches through the Python client against the real service
(docs/threads.md): an edit and a regenerate stream like a send, the history by
branch, a switch and a fork."""

from __future__ import annotations

import pytest

from agentsvc_client import Client, Done
from tests.client.conftest import KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e


def test_edit_regenerate_switch_and_fork(memory_service: Service) -> None:
    with Client(memory_service.url, KEY) as c:
        agent = c.agents.create(name="Brancher")
        thread = c.threads.create(agent_id=agent.id)
        c.send_message(thread.id, "one").final()
        c.send_message(thread.id, "two").final()
        page = c.threads.messages.list(thread.id)
        second = page.messages[2]
        edited = c.threads.messages.edit(thread.id, second.id, content="two, edited").final()
        assert isinstance(edited, Done)
        assert edited.content.startswith('You said: "two, edited"')
        now = c.threads.messages.list(thread.id)
        assert [m.content for m in now.messages][::2] == ["one", "two, edited"]
        assert (now.messages[2].sibling_index, now.messages[2].sibling_count) == (2, 2)
        assert now.messages[2].prev_sibling_id == second.id
        again = c.threads.regenerate(thread.id).final()
        assert again.content.startswith('You said: "two, edited"')
        last = c.threads.messages.list(thread.id).messages[-1]
        assert (last.sibling_index, last.sibling_count) == (2, 2)
        old = c.threads.messages.list(thread.id, branch=second.id)
        assert [m.content for m in old.messages] == ["one", page.messages[1].content, "two"]
        switched = c.threads.switch_branch(thread.id, message_id=second.id)
        assert switched.head_id == page.messages[3].id
        forked = c.threads.fork(thread.id, message_id=page.messages[1].id)
        copy = c.threads.messages.list(forked.id)
        assert [m.content for m in copy.messages] == ["one", page.messages[1].content]
