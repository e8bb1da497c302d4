from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.clock import SystemClock
from agentsvc_core.entities import ApiKey
from agentsvc_core.errors import NotFound
from agentsvc_core.use_cases import ApiKeys
from agentsvc_core.use_cases.api_keys import hash_api_key
from tests.contract.conftest import Backend, now

names = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=256)


def make_key(org_id: str, name: str = "k") -> ApiKey:
    token = f"ask_{uuid.uuid4().hex}"
    return ApiKey(
        id=uuid.uuid4(),
        org_id=org_id,
        name=name,
        display_prefix=token[:10],
        key_hash=hash_api_key(token),
        created_at=now(),
    )


@given(name=names)
def test_keys_round_trip(backend: Backend, name: str) -> None:
    keys = backend.storage.api_keys
    org = backend.fresh_org()
    key = make_key(org, name)
    backend.run(keys.add, key)
    assert backend.run(keys.find_by_hash, key.key_hash) == key
    assert backend.run(keys.list, org) == [key]


def test_adding_a_known_hash_keeps_the_original(backend: Backend) -> None:
    keys = backend.storage.api_keys
    org = backend.fresh_org()
    key = make_key(org)
    backend.run(keys.add, key)
    duplicate = msgspec.structs.replace(key, id=uuid.uuid4(), name="dup", created_at=now())
    backend.run(keys.add, duplicate)
    assert backend.run(keys.find_by_hash, key.key_hash) == key
    assert backend.run(keys.list, org) == [key]


def test_revoke_is_idempotent_and_org_scoped(backend: Backend) -> None:
    keys = backend.storage.api_keys
    org, other = backend.fresh_org(), backend.fresh_org()
    key = make_key(org)
    backend.run(keys.add, key)
    with pytest.raises(NotFound):
        backend.run(keys.revoke, other, key.id, now())
    first = now()
    revoked = backend.run(keys.revoke, org, key.id, first)
    assert revoked.revoked_at == first
    again = backend.run(keys.revoke, org, key.id, first + timedelta(hours=1))
    assert again.revoked_at == first
    found = backend.run(keys.find_by_hash, key.key_hash)
    assert found is not None
    assert found.revoked_at == first
    with pytest.raises(NotFound):
        backend.run(keys.revoke, org, uuid.uuid4(), now())


def test_list_is_per_org_oldest_first(backend: Backend) -> None:
    keys = backend.storage.api_keys
    org, other = backend.fresh_org(), backend.fresh_org()
    made = [make_key(org, f"k{i}") for i in range(3)]
    for k in made:
        backend.run(keys.add, k)
    backend.run(keys.add, make_key(other))
    assert backend.run(keys.list, org) == made


def test_issue_and_ensure_through_the_use_case(backend: Backend) -> None:
    uc = ApiKeys(backend.storage.api_keys, backend.storage.organizations, SystemClock())
    org = f"new-{uuid.uuid4().hex[:8]}"
    issued = backend.run(uc.issue, org, "label")
    assert backend.run(backend.storage.organizations.get, org).id == org
    token = "ask_" + "b" * 20 + uuid.uuid4().hex
    first = backend.run(uc.ensure, org, token)
    assert backend.run(uc.ensure, org, token) == first
    listed = backend.run(backend.storage.api_keys.list, org)
    assert [k.id for k in listed] == [issued.key.id, first.id]
