"""AES-256-GCM sealing: round trips, binding to the row, key ids and rotation."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.crypto import AesGcmBox, KeyringError, load_keyring
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_core.ports import SecretUnreadable

K1 = new_key_spec("k1")
K2 = new_key_spec("k2")


@given(plain=st.binary(max_size=2000), context=st.text(max_size=100))
def test_round_trip(plain: bytes, context: str) -> None:
    box = AesGcmBox(parse_keys(K1))
    sealed = box.seal(plain, context)
    assert box.open(sealed, context) == plain
    if len(plain) >= 8:  # shorter inputs can turn up in random bytes by chance
        body = sealed.split(".", 2)[2]
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        assert plain not in raw
        assert plain.hex() not in sealed


def test_a_value_moved_to_another_row_or_org_does_not_open() -> None:
    box = AesGcmBox(parse_keys(K1))
    sealed = box.seal(b"secret", "org-a:mcp_servers:1")
    for context in ("org-b:mcp_servers:1", "org-a:mcp_servers:2", ""):
        with pytest.raises(SecretUnreadable):
            box.open(sealed, context)


def test_damaged_or_foreign_values_are_unreadable_not_crashes() -> None:
    box = AesGcmBox(parse_keys(K1))
    sealed = box.seal(b"secret", "c")
    for bad in (
        "",
        "v1.k1",
        "v1.k1.!!!",
        "v2.k1." + sealed.split(".")[2],
        "v1.zz." + sealed.split(".")[2],
        sealed[:-4] + "AAAA",
    ):
        with pytest.raises(SecretUnreadable):
            box.open(bad, "c")


def test_rotation_newest_key_seals_all_keys_open() -> None:
    old = AesGcmBox(parse_keys(K1))
    sealed = old.seal(b"s", "c")
    rotated = AesGcmBox(parse_keys(f"{K2},{K1}"))
    assert rotated.open(sealed, "c") == b"s"
    assert not rotated.is_current(sealed)
    resealed = rotated.seal(b"s", "c")
    assert resealed.startswith("v1.k2.")
    assert rotated.is_current(resealed)
    with pytest.raises(SecretUnreadable):
        AesGcmBox(parse_keys(K1)).open(resealed, "c")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no key"),
        ("k1", "id:base64key"),
        ("k1:short", "32 bytes"),
        (f"{K1},{K1}", "twice"),
        ("bad id!:" + K1.split(":")[1], "id:base64key"),
    ],
    # ids of their own: K1 is random, and parallel workers must collect the same names
    ids=["empty", "no-key", "short-key", "twice", "bad-id"],
)
def test_malformed_keys_are_refused_without_echoing_them(spec: str, message: str) -> None:
    with pytest.raises(KeyringError, match=message) as err:
        parse_keys(spec)
    if ":" in spec:
        assert spec.split(":", 1)[1][:10] not in str(err.value) or not spec.split(":", 1)[1]


def test_data_folder_key_is_created_once_with_mode_600(tmp_path: Path) -> None:
    first = load_keyring(None, tmp_path)
    again = load_keyring(None, tmp_path)
    assert first == again
    assert oct((tmp_path / "encryption-keys").stat().st_mode & 0o777) == "0o600"
    assert load_keyring(K2, tmp_path)[0][0] == "k2"  # configured keys win
