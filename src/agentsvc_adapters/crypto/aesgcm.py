"""AES-256-GCM sealing (``cryptography``) of the secrets the service keeps at rest.

A sealed value is ``v1.<key id>.<base64url(nonce || ciphertext+tag)>``: it names
the key that sealed it, so keys can be rotated; the associated data is the
caller's context (organization, table, row), so a value copied to another row or
organization fails to open. Nonces are 96 random bits per seal.

Keys come from ``AGENTSVC_ENCRYPTION_KEYS``: ``id:base64key,id2:base64key`` (each
key 32 bytes, base64 or base64url); the first seals, all open. Without it the
embedded default keeps a generated key in ``<data dir>/encryption-keys`` (mode
0600) and says so in the log.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentsvc_core.ports.secrets import SecretBox, SecretUnreadable

log = logging.getLogger("agentsvc.crypto")
_VERSION = "v1"
_KID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_NONCE = 12


class KeyringError(ValueError):
    """The configured keys are malformed (the message never contains a key)."""


def _decode_key(kid: str, text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            raw = decode(padded)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == 32:
            return raw
    raise KeyringError(f"encryption key {kid!r} is not 32 bytes of base64")


def parse_keys(spec: str) -> list[tuple[str, bytes]]:
    keys: list[tuple[str, bytes]] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        kid, sep, text = item.partition(":")
        if not sep or not _KID.fullmatch(kid):
            raise KeyringError(
                "AGENTSVC_ENCRYPTION_KEYS entries are id:base64key (id: 1-32 of A-Z a-z 0-9 _ -)"
            )
        if any(k == kid for k, _ in keys):
            raise KeyringError(f"encryption key id {kid!r} appears twice")
        keys.append((kid, _decode_key(kid, text.strip())))
    if not keys:
        raise KeyringError("AGENTSVC_ENCRYPTION_KEYS holds no key")
    return keys


def new_key_spec(kid: str = "k1") -> str:
    return f"{kid}:{base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}"


def load_keyring(configured: str | None, data_dir: Path | None) -> list[tuple[str, bytes]]:
    """The configured keys, else the data folder's generated key (created once)."""
    if configured:
        return parse_keys(configured)
    if data_dir is None:
        raise KeyringError("set AGENTSVC_ENCRYPTION_KEYS")
    path = data_dir / "encryption-keys"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(new_key_spec() + "\n")
        log.warning(
            "no AGENTSVC_ENCRYPTION_KEYS: generated an encryption key in %s; back it up "
            "(stored secrets cannot be read without it) and set the variable in production",
            path,
        )
    return parse_keys(path.read_text())


class AesGcmBox(SecretBox):
    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        if not keys:
            raise KeyringError("no encryption key")
        self._current = keys[0][0]
        self._ciphers = {kid: AESGCM(key) for kid, key in keys}

    @property
    def current_key_id(self) -> str:
        return self._current

    def seal(self, plaintext: bytes, context: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        ct = self._ciphers[self._current].encrypt(nonce, plaintext, context.encode())
        body = base64.urlsafe_b64encode(nonce + ct).decode().rstrip("=")
        return f"{_VERSION}.{self._current}.{body}"

    def open(self, sealed: str, context: str) -> bytes:
        try:
            version, kid, body = sealed.split(".", 2)
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, binascii.Error):
            raise SecretUnreadable("a stored secret is damaged") from None
        cipher = self._ciphers.get(kid)
        if version != _VERSION or cipher is None:
            raise SecretUnreadable(
                "a stored secret was sealed with an unknown key",
                key_id=kid if version == _VERSION and _KID.fullmatch(kid) else None,
            )
        try:
            return cipher.decrypt(raw[:_NONCE], raw[_NONCE:], context.encode())
        except (InvalidTag, ValueError):
            raise SecretUnreadable("a stored secret does not belong here or is damaged") from None

    def is_current(self, sealed: str) -> bool:
        return sealed.startswith(f"{_VERSION}.{self._current}.")
