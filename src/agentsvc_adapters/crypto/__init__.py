"""AES-256-GCM secret sealing with key ids and rotation."""

from agentsvc_adapters.crypto.aesgcm import AesGcmBox, KeyringError, load_keyring

__all__ = ["AesGcmBox", "KeyringError", "load_keyring"]
