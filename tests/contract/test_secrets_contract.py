"""The sealed record store: single-use take, compare-and-set swap, batched reads."""

from __future__ import annotations

import asyncio

from agentsvc_core.ports import SealedRecord
from tests.contract.conftest import Backend


def test_put_get_many_take_swap(backend: Backend) -> None:
    store = backend.storage.secrets
    org, other = backend.fresh_org(), backend.fresh_org()
    backend.run(store.put, org, "a", "1", SealedRecord(value="v1"))
    backend.run(store.put, org, "b", "2", SealedRecord(value="v2"))
    backend.run(store.put, other, "a", "1", SealedRecord(value="theirs"))
    found = backend.run(store.get_many, org, [("a", "1"), ("b", "2"), ("c", "3")])
    assert {k: v.value for k, v in found.items()} == {("a", "1"): "v1", ("b", "2"): "v2"}
    assert backend.run(store.get_many, org, []) == {}
    assert backend.run(store.swap, org, "a", "1", "stale", SealedRecord(value="x")) is False
    assert backend.run(store.swap, org, "a", "1", "v1", SealedRecord(value="v1b")) is True
    record = backend.run(store.get, org, "a", "1")
    assert record is not None
    assert record.value == "v1b"
    assert backend.run(store.get, other, "a", "1").value == "theirs"  # type: ignore[union-attr]


def test_of_concurrent_takers_exactly_one_gets_the_record(backend: Backend) -> None:
    store = backend.storage.secrets
    org = backend.fresh_org()
    backend.run(store.put, org, "oauth_state", "s", SealedRecord(value="once"))

    async def race() -> list[SealedRecord | None]:
        return await asyncio.gather(*(store.take(org, "oauth_state", "s") for _ in range(10)))

    results = backend.run(race)
    assert [r.value for r in results if r is not None] == ["once"]


def test_delete_prefix_takes_the_prefix_literally_and_stays_in_its_org(backend: Backend) -> None:
    store = backend.storage.secrets
    org, other = backend.fresh_org(), backend.fresh_org()
    for key in ("m1:user:a", "m1:org", "m1_x", "m10:org", "m2:org"):
        backend.run(store.put, org, "oauth_token", key, SealedRecord(value=key))
    backend.run(store.put, org, "oauth_client", "m1:issuer", SealedRecord(value="c"))
    backend.run(store.put, other, "oauth_token", "m1:org", SealedRecord(value="theirs"))
    backend.run(store.put, org, "oauth_token", "m%:org", SealedRecord(value="pct"))

    assert backend.run(store.delete_prefix, org, "oauth_token", "m1:") == 2
    left = backend.run(
        store.get_many,
        org,
        [("oauth_token", k) for k in ("m1:user:a", "m1:org", "m1_x", "m10:org", "m2:org")],
    )
    assert sorted(k for _, k in left) == ["m10:org", "m1_x", "m2:org"]
    assert backend.run(store.get, org, "oauth_client", "m1:issuer") is not None  # other kind
    assert backend.run(store.get, other, "oauth_token", "m1:org") is not None  # other org
    # pattern characters are plain characters
    assert backend.run(store.delete_prefix, org, "oauth_token", "m%") == 1
    assert backend.run(store.get, org, "oauth_token", "m2:org") is not None


def test_prefixed_says_which_prefixes_start_a_key_of_the_kind(backend: Backend) -> None:
    store = backend.storage.secrets
    org, other = backend.fresh_org(), backend.fresh_org()
    for key in ("m1:issuer", "m10:issuer", "m%x"):
        backend.run(store.put, org, "oauth_client", key, SealedRecord(value=key))
    backend.run(store.put, org, "oauth_token", "m2:user", SealedRecord(value="t"))
    backend.run(store.put, other, "oauth_client", "m3:issuer", SealedRecord(value="theirs"))
    asked = ["m1:", "m2:", "m3:", "m4:", "m%", "m_"]
    assert backend.run(store.prefixed, org, "oauth_client", asked) == {"m1:", "m%"}
    assert backend.run(store.prefixed, org, "oauth_token", asked) == {"m2:"}
    assert backend.run(store.prefixed, other, "oauth_client", asked) == {"m3:"}
    assert backend.run(store.prefixed, org, "oauth_client", []) == set()


def test_every_lists_one_organization_or_all_and_rotation_reseals_them(backend: Backend) -> None:
    from agentsvc_adapters.crypto import AesGcmBox  # noqa: PLC0415
    from agentsvc_core.use_cases.sealed import SealedRecords  # noqa: PLC0415

    store = backend.storage.secrets
    org, other = backend.fresh_org(), backend.fresh_org()
    old = SealedRecords(store, AesGcmBox([("k1", b"\x01" * 32)]))
    for o in (org, other):
        backend.run(old.put, o, "delegated", "agent-1", SealedRecord(value="x"))
    mine = backend.run(store.every, org)
    assert [(o, k, key) for o, k, key, _ in mine] == [(org, "delegated", "agent-1")]
    every = {(o, k, key) for o, k, key, _ in backend.run(store.every, None)}
    assert {(org, "delegated", "agent-1"), (other, "delegated", "agent-1")} <= every
    # k2 now seals; k1 still opens: rotation re-seals this organization's record only
    new = SealedRecords(store, AesGcmBox([("k2", b"\x02" * 32), ("k1", b"\x01" * 32)]))
    assert backend.run(new.rotate, org) == 1
    assert backend.run(new.rotate, org) == 0
    assert backend.run(store.get, org, "delegated", "agent-1").value.startswith("v1.k2.")  # type: ignore[union-attr]
    assert backend.run(store.get, other, "delegated", "agent-1").value.startswith("v1.k1.")  # type: ignore[union-attr]
    only_k2 = SealedRecords(store, AesGcmBox([("k2", b"\x02" * 32)]))
    assert backend.run(only_k2.get, org, "delegated", "agent-1", SealedRecord) == SealedRecord(
        value="x"
    )


def test_concurrent_changes_of_one_record_are_all_kept(backend: Backend) -> None:
    """``SealedRecords.change``: ten writers each add their number to a list that
    does not exist yet; none is lost (the first writes race on the absent record)."""
    import msgspec  # noqa: PLC0415

    from agentsvc_adapters.crypto import AesGcmBox  # noqa: PLC0415
    from agentsvc_core.use_cases.sealed import SealedRecords  # noqa: PLC0415

    class Numbers(msgspec.Struct, frozen=True):
        items: tuple[int, ...] = ()

    records = SealedRecords(backend.storage.secrets, AesGcmBox([("k1", b"\x01" * 32)]))
    org = backend.fresh_org()

    async def add(n: int) -> Numbers:
        return await records.change(
            org, "numbers", "list", Numbers, lambda cur: Numbers((*(cur or Numbers()).items, n))
        )

    async def race() -> list[Numbers]:
        return await asyncio.gather(*(add(n) for n in range(10)))

    backend.run(race)
    final = backend.run(records.get, org, "numbers", "list", Numbers)
    assert final is not None
    assert sorted(final.items) == list(range(10))


def test_of_concurrent_first_writers_one_puts_the_record(backend: Backend) -> None:
    store = backend.storage.secrets
    org = backend.fresh_org()

    async def race() -> list[bool]:
        return await asyncio.gather(
            *(store.put_new(org, "k", "first", SealedRecord(value=f"v{n}")) for n in range(8))
        )

    won = backend.run(race)
    assert won.count(True) == 1
    stored = backend.run(store.get, org, "k", "first")
    assert stored is not None
    assert stored.value == f"v{won.index(True)}"
