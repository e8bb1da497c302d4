"""The keyring and the sealed format, pinned: what an operator sees when a key is
wrong, the generated key file, and the refusals of ``open``. Written to kill the
mutants `make mutation` found alive in ``agentsvc_adapters.crypto.aesgcm``
(docs/development.md)."""

from __future__ import annotations

import base64
import logging
import stat
from pathlib import Path

import pytest

from agentsvc_adapters.crypto import AesGcmBox, KeyringError, load_keyring
from agentsvc_adapters.crypto.aesgcm import parse_keys
from agentsvc_core.ports import SecretUnreadable

RAW = bytes(range(32))
URLSAFE = base64.urlsafe_b64encode(RAW).decode()
STANDARD = base64.b64encode(bytes([250] * 32)).decode()  # has '+' and '/'


def test_keys_are_read_with_or_without_padding_in_either_alphabet() -> None:
    assert URLSAFE.endswith("=")
    assert parse_keys(f"k1:{URLSAFE}") == [("k1", RAW)]
    assert parse_keys(f"k1:{URLSAFE.rstrip('=')}") == [("k1", RAW)]
    assert "/" in STANDARD or "+" in STANDARD
    assert parse_keys(f"k1:{STANDARD}") == [("k1", bytes([250] * 32))]
    assert parse_keys(f" k1:{URLSAFE} , k2:{STANDARD.rstrip('=')} ,") == [
        ("k1", RAW),
        ("k2", bytes([250] * 32)),
    ]


def test_a_wrong_key_is_named_by_its_id_and_never_shown() -> None:
    short = base64.urlsafe_b64encode(b"x" * 31).decode()
    with pytest.raises(KeyringError) as raised:
        parse_keys(f"k1:{URLSAFE},second:{short}")
    assert str(raised.value) == "encryption key 'second' is not 32 bytes of base64"
    assert short not in str(raised.value)


@pytest.mark.parametrize(
    "spec", [URLSAFE, f":{URLSAFE}", f"{'k' * 33}:{URLSAFE}", f"k.1:{URLSAFE}"]
)
def test_malformed_entries_say_what_an_entry_is(spec: str) -> None:
    with pytest.raises(KeyringError) as raised:
        parse_keys(spec)
    assert "AGENTSVC_ENCRYPTION_KEYS entries are id:base64key" in str(raised.value)
    assert URLSAFE not in str(raised.value)


def test_a_32_character_id_is_allowed() -> None:
    assert parse_keys(f"{'k' * 32}:{URLSAFE}")[0][0] == "k" * 32


@pytest.mark.parametrize("spec", ["", " , ,"])
def test_an_empty_keyring_is_refused(spec: str) -> None:
    with pytest.raises(KeyringError, match=r"^AGENTSVC_ENCRYPTION_KEYS holds no key$"):
        parse_keys(spec)


def test_without_keys_or_a_data_folder_there_is_nothing_to_do() -> None:
    with pytest.raises(KeyringError, match=r"^set AGENTSVC_ENCRYPTION_KEYS$"):
        load_keyring(None, None)
    with pytest.raises(KeyringError, match=r"^set AGENTSVC_ENCRYPTION_KEYS$"):
        load_keyring("", None)
    with pytest.raises(KeyringError, match=r"^no encryption key$"):
        AesGcmBox([])


def test_the_generated_key_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data_dir = tmp_path / "not" / "yet"  # the folder and its parent are created
    caplog.set_level(logging.WARNING, "agentsvc.crypto")
    keys = load_keyring(None, data_dir)
    path = data_dir / "encryption-keys"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert text.endswith("\n")
    assert text.count("\n") == 1
    assert text.startswith("k1:")
    [(kid, key)] = keys
    assert (kid, len(key)) == ("k1", 32)
    assert load_keyring(None, data_dir) == keys  # created once, then read
    [record] = caplog.records
    assert str(path) in record.getMessage()
    assert "no AGENTSVC_ENCRYPTION_KEYS" in record.getMessage()
    assert "back it up" in record.getMessage()
    assert text.strip() not in caplog.text


def test_configured_keys_win_over_the_file(tmp_path: Path) -> None:
    assert load_keyring(f"k9:{URLSAFE}", tmp_path) == [("k9", RAW)]
    assert not (tmp_path / "encryption-keys").exists()


def test_the_sealed_format() -> None:
    box = AesGcmBox([("k1", RAW)])
    for size in range(4):  # every padding length of base64
        sealed = box.seal(b"x" * size, "ctx")
        version, kid, body = sealed.split(".")
        assert (version, kid) == ("v1", "k1")
        assert "=" not in body
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        assert len(raw) == 12 + size + 16  # nonce, ciphertext, tag
        assert box.open(sealed, "ctx") == b"x" * size


def test_every_sealed_body_opens() -> None:
    """Thousands of seals: every last base64 character turns up, so a seal that
    trims more than the padding would be caught."""
    box = AesGcmBox([("k1", RAW)])
    last_characters = set()
    for i in range(3000):
        sealed = box.seal(i.to_bytes(2, "big"), "ctx")
        last_characters.add(sealed[-1])
        assert box.open(sealed, "ctx") == i.to_bytes(2, "big")
    assert "X" in last_characters


def test_open_refusals_say_which_kind() -> None:
    box = AesGcmBox([("k1", RAW)])
    sealed = box.seal(b"secret", "org/table/row")
    with pytest.raises(SecretUnreadable, match=r"^a stored secret is damaged$"):
        box.open("v1.k1", "org/table/row")
    with pytest.raises(SecretUnreadable, match=r"^a stored secret is damaged$"):
        box.open("v1.k1.a", "org/table/row")  # one base64 character is no byte
    with pytest.raises(SecretUnreadable, match=r"^a stored secret was sealed with an unknown key$"):
        box.open(sealed.replace("v1.", "v2.", 1), "org/table/row")
    with pytest.raises(SecretUnreadable, match=r"^a stored secret was sealed with an unknown key$"):
        box.open(sealed.replace(".k1.", ".k2.", 1), "org/table/row")
    expected = r"^a stored secret does not belong here or is damaged$"
    with pytest.raises(SecretUnreadable, match=expected) as caught:
        box.open(sealed, "org/table/other-row")
    assert caught.value.key_id is None
    with pytest.raises(SecretUnreadable, match=expected):
        box.open("v1.k1.AAAA", "org/table/row")  # shorter than a nonce


def test_an_unknown_key_is_named_when_it_is_a_key_id() -> None:
    """The id a value names, for the operator (``secrets rotate``): only an id of
    the v1 format, never other text of a damaged value."""
    box = AesGcmBox([("k1", RAW)])
    sealed = box.seal(b"secret", "org/table/row")
    for value, named in (
        (sealed.replace(".k1.", ".old-key_2.", 1), "old-key_2"),
        (sealed.replace(".k1.", f".{'k' * 32}.", 1), "k" * 32),
        (sealed.replace(".k1.", f".{'k' * 33}.", 1), None),
        (sealed.replace(".k1.", ".k 2.", 1), None),
        (sealed.replace("v1.", "v2.", 1), None),  # its id is another format's
    ):
        with pytest.raises(SecretUnreadable) as caught:
            box.open(value, "org/table/row")
        assert caught.value.key_id == named, value


def test_is_current_needs_the_whole_prefix() -> None:
    old, new = AesGcmBox([("k1", RAW)]), AesGcmBox([("k2", RAW), ("k1", RAW)])
    sealed = old.seal(b"s", "c")
    assert old.is_current(sealed)
    assert not new.is_current(sealed)
    assert new.is_current(new.seal(b"s", "c"))
    assert not AesGcmBox([("k", RAW)]).is_current(sealed)  # "v1.k" is a prefix of "v1.k1."
    assert new.current_key_id == "k2"
