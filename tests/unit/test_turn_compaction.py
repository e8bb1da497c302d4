"""Summary compaction in the turn (docs/compaction.md): the turn summarises only when
its context is above the agent's threshold."""

from __future__ import annotations

import uuid

from agentsvc_adapters.memory.storage import MemoryStorage
from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT, Checkpoint, Compactor
from tests.unit.test_turn_keys import Resolver, turn_with
from tests.unit.turn_world import BOX

# the history of ``turn_with(compact=True)``: 8 messages of ~1,010 characters and the
# new one, about 2,030 tokens by the estimate (4 characters a token)
CONTEXT_TOKENS = 2_030


async def test_no_summary_below_the_threshold() -> None:
    model, records = await turn_with(Resolver(), compact=True, threshold=CONTEXT_TOKENS + 400)
    assert [r for r in model.requests if r.system == SUMMARY_PROMPT] == []
    assert all(r.message_id is not None for r in records)  # no summary's usage record
    assert len(model.requests[0].messages) == 9  # the whole history went to the model


async def test_a_summary_above_the_threshold() -> None:
    model, records = await turn_with(Resolver(), compact=True, threshold=CONTEXT_TOKENS - 400)
    assert len([r for r in model.requests if r.system == SUMMARY_PROMPT]) == 1
    assert len([r for r in records if r.message_id is None]) == 1
    turn_calls = [r for r in model.requests if r.system != SUMMARY_PROMPT]
    assert len(turn_calls[0].messages) < 9  # the summary replaced the older messages
    assert "the summary" in turn_calls[0].system


async def test_a_deleted_threads_summary_goes_with_it() -> None:
    storage = MemoryStorage()
    compactor = Compactor(storage.secrets, BOX)
    thread, other = uuid.uuid4(), uuid.uuid4()
    await compactor.save("org", thread, Checkpoint(summary="what they said"))
    await compactor.save("org", other, Checkpoint(summary="kept"))
    assert await compactor.delete_for_thread("org", thread) == 1
    assert await compactor.checkpoint("org", thread) == Checkpoint()
    assert (await compactor.checkpoint("org", other)).summary == "kept"
    assert await compactor.delete_for_thread("org", thread) == 0  # safe to repeat
