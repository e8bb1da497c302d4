"""use_cases/idempotency.py: the key's form, its 24 hours, and a POST's claim,
complete and release over the memory store (mutation tests, docs/development.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.errors import IdempotencyKeyInUse, IdempotencyKeyReused, InvalidInput
from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyRecord
from agentsvc_core.use_cases.idempotency import (
    KEEP,
    MAX_KEY,
    Idempotency,
    Replay,
    RequestKey,
    check_key,
)
from tests.unit.turn_world import BOX, T0, Clock

ORG = "org-idem"
KEY = RequestKey(key="key-1", fingerprint=b"fp-1")


def setup() -> tuple[Idempotency, MemoryStorage, Clock]:
    storage = MemoryStorage()
    clock = Clock()
    return Idempotency(storage.idempotency, BOX, clock), storage, clock


@pytest.mark.parametrize("raw", ["a", "!", "~", "!~", "x" * 255, "550e8400-e29b-41d4-a716-4466"])
def test_a_key_of_1_to_255_visible_ascii_characters_is_taken_as_it_is(raw: str) -> None:
    assert check_key(raw) == raw


@pytest.mark.parametrize("raw", ["", "x" * 256, "a b", " ", "a\x7f", "a\x1f", "clé", "a\tb"])
def test_an_empty_long_or_invisible_key_is_refused_naming_the_header(raw: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_key(raw)
    assert err.value.field == "Idempotency-Key"
    assert err.value.problem == "must be 1 to 255 visible ASCII characters (a UUID will do)"


def test_the_limits_are_255_characters_and_24_hours() -> None:
    assert MAX_KEY == 255
    assert timedelta(hours=24) == KEEP


def test_a_claim_is_held_from_now_for_24_hours() -> None:
    clock = Clock()
    assert KEY.claim(clock) == IdempotencyClaim(
        key="key-1", fingerprint=b"fp-1", at=T0, expires_at=T0 + timedelta(hours=24)
    )


async def test_the_first_claim_is_the_requests_and_a_second_while_running_is_in_use() -> None:
    idem, _, _ = setup()
    assert await idem.claim(ORG, KEY) is None
    with pytest.raises(IdempotencyKeyInUse):
        await idem.claim(ORG, KEY)


async def test_the_same_key_with_another_request_is_refused_as_reused() -> None:
    idem, _, _ = setup()
    await idem.claim(ORG, KEY)
    with pytest.raises(IdempotencyKeyReused):
        await idem.claim(ORG, RequestKey(key="key-1", fingerprint=b"fp-2"))
    await idem.complete(ORG, KEY, 201, "application/json", b"{}")
    with pytest.raises(IdempotencyKeyReused):
        await idem.claim(ORG, RequestKey(key="key-1", fingerprint=b"fp-2"))


async def test_a_completed_request_is_replayed_as_it_was_answered() -> None:
    idem, _, _ = setup()
    await idem.claim(ORG, KEY)
    await idem.complete(ORG, KEY, 201, "application/json", b'{"id": 7}')
    assert await idem.claim(ORG, KEY) == Replay(
        status=201, content_type="application/json", body=b'{"id": 7}'
    )


async def test_the_answer_is_kept_sealed_to_its_organization_and_key() -> None:
    idem, storage, clock = setup()
    await idem.claim(ORG, KEY)
    await idem.complete(ORG, KEY, 200, "text/plain", b"the body 81c2")
    held = await storage.idempotency.find(ORG, "key-1", clock.now())
    assert held is not None
    assert held.body is not None
    assert "81c2" not in held.body
    assert BOX.open(held.body, "idempotency:org-idem:key-1") == b"the body 81c2"
    with pytest.raises(Exception):  # noqa: B017, PT011 - another key's context does not open it
        BOX.open(held.body, "idempotency:org-idem:key-2")


async def test_a_released_key_is_claimed_again() -> None:
    idem, _, _ = setup()
    await idem.claim(ORG, KEY)
    await idem.release(ORG, KEY)
    assert await idem.claim(ORG, KEY) is None
    with pytest.raises(IdempotencyKeyInUse):
        await idem.claim(ORG, KEY)


async def test_keys_are_scoped_to_the_organization() -> None:
    idem, _, _ = setup()
    await idem.claim(ORG, KEY)
    await idem.complete(ORG, KEY, 200, "text/plain", b"mine")
    assert await idem.claim("org-other", KEY) is None
    await idem.release("org-other", KEY)
    assert await idem.claim(ORG, KEY) == Replay(200, "text/plain", b"mine")


async def test_a_key_is_held_24_hours_then_free() -> None:
    idem, _, clock = setup()
    await idem.claim(ORG, KEY)
    await idem.complete(ORG, KEY, 200, "text/plain", b"first")
    clock.advance(24 * 3600)
    assert await idem.claim(ORG, KEY) == Replay(200, "text/plain", b"first")
    clock.advance(1)
    assert await idem.claim(ORG, KEY) is None


class Held:
    """A store that answers ``record`` to every claim."""

    def __init__(self, record: IdempotencyRecord) -> None:
        self.record = record

    async def claim(self, org_id: str, claim: IdempotencyClaim) -> IdempotencyRecord | None:
        return self.record


@pytest.mark.parametrize(
    "missing",
    [
        {"status": None, "content_type": "t", "body": "b"},
        {"status": 200, "content_type": None, "body": "b"},
        {"status": 200, "content_type": "t", "body": None},
    ],
)
async def test_an_answer_not_fully_recorded_is_still_in_progress(
    missing: dict[str, object],
) -> None:
    record = IdempotencyRecord(fingerprint=b"fp-1", **missing)  # type: ignore[arg-type]
    idem = Idempotency(Held(record), BOX, Clock())  # type: ignore[arg-type]
    with pytest.raises(IdempotencyKeyInUse):
        await idem.claim(ORG, KEY)
