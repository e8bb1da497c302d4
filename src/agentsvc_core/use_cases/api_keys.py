from __future__ import annotations

import hashlib
import secrets
import uuid
from uuid import UUID

import msgspec

from agentsvc_core.entities import API_KEY_PREFIX, ApiKey, Organization, Principal
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.ports import ApiKeyRepository, Clock, OrganizationRepository, Revocations
from agentsvc_core.rules import MAX_KEY_NAME, check_org_id, check_text

# 32 random bytes: brute force is out of reach, so a fast hash (SHA-256) is the
# right one for the stored form: a slow KDF would only slow every request down.
_TOKEN_BYTES = 32
_DISPLAY_CHARS = len(API_KEY_PREFIX) + 6


def hash_api_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def looks_like_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIX)


class IssuedKey(msgspec.Struct, frozen=True, kw_only=True):
    """A freshly created key with its plaintext, which is never available again."""

    key: ApiKey
    token: str


class ApiKeys:
    """Issue, list and revoke an organization's API keys."""

    def __init__(
        self,
        keys: ApiKeyRepository,
        orgs: OrganizationRepository,
        clock: Clock,
        revocations: Revocations | None = None,
    ) -> None:
        self._keys = keys
        self._orgs = orgs
        self._clock = clock
        self._revocations = revocations

    async def _store(self, org_id: str, name: str, token: str) -> ApiKey:
        check_org_id("org", org_id)
        check_text("name", name, max_len=MAX_KEY_NAME)
        now = self._clock.now()
        await self._orgs.ensure(Organization(id=org_id, created_at=now))
        key = ApiKey(
            id=uuid.uuid4(),
            org_id=org_id,
            name=name,
            display_prefix=token[:_DISPLAY_CHARS],
            key_hash=hash_api_key(token),
            created_at=now,
        )
        await self._keys.add(key)
        return key

    async def issue(self, org_id: str, name: str = "") -> IssuedKey:
        """Create a key for ``org_id`` (creating the organization on first sight)."""
        token = API_KEY_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
        return IssuedKey(key=await self._store(org_id, name, token), token=token)

    async def ensure(self, org_id: str, token: str, name: str = "bootstrap") -> ApiKey:
        """Make sure a given token is a valid key of ``org_id`` (development bootstrap)."""
        if not looks_like_api_key(token) or len(token) < len(API_KEY_PREFIX) + 16:
            raise InvalidInput(
                "AGENTSVC_BOOTSTRAP_API_KEY",
                f"must start with {API_KEY_PREFIX!r} and carry at least 16 more characters",
            )
        existing = await self._keys.find_by_hash(hash_api_key(token))
        if existing is not None:
            if existing.org_id != org_id:
                raise InvalidInput(
                    "AGENTSVC_BOOTSTRAP_API_KEY", "already belongs to another organization"
                )
            if existing.revoked:
                raise InvalidInput(
                    "AGENTSVC_BOOTSTRAP_API_KEY",
                    "has been revoked; choose another key (with `make run`: delete "
                    "the data folder's dev-api-key file and start again)",
                )
            return existing
        return await self._store(org_id, name, token)

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("API keys are managed by the organization's admins")

    async def create(self, who: Principal, name: str = "") -> IssuedKey:
        self._admin(who)
        return await self.issue(who.org_id, name)

    async def list(self, who: Principal) -> list[ApiKey]:
        self._admin(who)
        return await self._keys.list(who.org_id)

    async def revoke(self, who: Principal, key_id: UUID) -> ApiKey:
        self._admin(who)
        key = await self._keys.revoke(who.org_id, key_id, self._clock.now())
        if self._revocations is not None:
            # every process drops the key from its cache of recent lookups
            await self._revocations.publish_revoked(key.id)
        return key
