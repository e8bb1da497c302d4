"""``AGENTSVC_LOCAL_DEFAULTS=false`` (the container image): PostgreSQL storage needs
its server and its encryption keys named; nothing is made in the data folder."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from agentsvc_web.bootstrap import secret_box, start_embedded
from agentsvc_web.settings import Settings, SettingsError

KEYS = "k1:" + "A" * 43 + "="
URL = "postgresql://u:hunter2-secret@db.invalid:5432/agentsvc"


def test_on_by_default_and_nothing_is_required() -> None:
    settings = Settings.from_env({})
    assert settings.local_defaults is True
    assert settings.database_url is None


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({}, "AGENTSVC_DATABASE_URL and AGENTSVC_ENCRYPTION_KEYS must be set"),
        ({"AGENTSVC_DATABASE_URL": URL}, "AGENTSVC_ENCRYPTION_KEYS must be set"),
        ({"AGENTSVC_ENCRYPTION_KEYS": KEYS}, "AGENTSVC_DATABASE_URL must be set"),
        ({"AGENTSVC_DATABASE_URL": " ", "AGENTSVC_ENCRYPTION_KEYS": KEYS}, "DATABASE_URL must"),
    ],
)
def test_off_refuses_postgres_without_its_server_or_keys(env: dict[str, str], missing: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"AGENTSVC_LOCAL_DEFAULTS": "false", **env})
    message = str(caught.value)
    assert missing in message
    assert "hunter2" not in message
    assert "AGENTSVC_STORAGE=memory" in message


def test_off_with_both_set_or_with_memory_storage_is_fine() -> None:
    both = Settings.from_env(
        {
            "AGENTSVC_LOCAL_DEFAULTS": "false",
            "AGENTSVC_DATABASE_URL": URL,
            "AGENTSVC_ENCRYPTION_KEYS": KEYS,
        }
    )
    assert both.local_defaults is False
    memory = Settings.from_env({"AGENTSVC_LOCAL_DEFAULTS": "0", "AGENTSVC_STORAGE": "memory"})
    assert memory.local_defaults is False


def test_a_malformed_value_is_refused() -> None:
    with pytest.raises(SettingsError, match="AGENTSVC_LOCAL_DEFAULTS must be true or false"):
        Settings.from_env({"AGENTSVC_LOCAL_DEFAULTS": "maybe"})


def test_off_generates_no_key_and_starts_no_server(tmp_path: Path) -> None:
    """Settings made in code skip from_env's check: the two places that would
    write to the data folder refuse on their own."""
    settings = Settings(local_defaults=False, data_dir=tmp_path / "data")
    with pytest.raises(SettingsError, match="AGENTSVC_ENCRYPTION_KEYS"):
        secret_box(settings)
    with pytest.raises(SettingsError, match="AGENTSVC_DATABASE_URL must be set"):
        start_embedded(settings)
    assert not (tmp_path / "data").exists()
    # with keys, the box opens what it seals; with the defaults on, a key is made
    box = secret_box(msgspec.structs.replace(settings, encryption_keys=KEYS))
    assert box.open(box.seal(b"x", "ctx"), "ctx") == b"x"
    secret_box(msgspec.structs.replace(settings, local_defaults=True))
    assert (tmp_path / "data" / "encryption-keys").is_file()
