from __future__ import annotations

import time
from uuid import UUID

from agentsvc_core.entities import ApiKey, Organization, Principal
from agentsvc_core.errors import InvalidInput, Unauthenticated
from agentsvc_core.ports import (
    ApiKeyRepository,
    Clock,
    OrganizationRepository,
    Revocations,
    TokenVerifier,
)
from agentsvc_core.rules import check_org_id
from agentsvc_core.use_cases.api_keys import hash_api_key, looks_like_api_key


class Authenticator:
    """Turns a bearer token into a ``Principal``, or raises ``Unauthenticated``.

    API keys are looked up by hash; a valid key is then remembered in-process for
    ``key_cache_s`` seconds (0: look up every request), so a busy client costs no
    storage round trip per request. Revocation reaches every process's cache
    through ``revocations`` (at once in the revoking process, a notification away
    in the others; a process that may have missed notices drops its whole cache),
    so the cache time only bounds how long a key can outlive its revocation when
    notices are lost. Unknown and revoked keys are never cached.

    A JWT's organization is created on first sight; the ids already ensured are
    remembered in-process so that costs one write per organization and process,
    not one per request.
    """

    MAX_CACHED_KEYS = 10_000

    def __init__(
        self,
        keys: ApiKeyRepository,
        orgs: OrganizationRepository,
        clock: Clock,
        verifier: TokenVerifier | None,
        *,
        key_cache_s: float = 0.0,
        revocations: Revocations | None = None,
    ) -> None:
        self._keys = keys
        self._orgs = orgs
        self._clock = clock
        self._verifier = verifier
        self._known_orgs: set[str] = set()
        self._key_cache_s = key_cache_s if revocations is not None else 0.0
        self._cached: dict[str, tuple[float, ApiKey]] = {}  # hash -> (expiry, key)
        self._generation = 0  # bumped by every revocation notice
        if revocations is not None:
            revocations.on_revoked(self._forget)

    def _forget(self, key_id: UUID | None) -> None:
        # A lookup in flight when a notice arrives must not store what it read.
        self._generation += 1
        if key_id is None:
            self._cached.clear()
            return
        for key_hash in [h for h, (_, k) in self._cached.items() if k.id == key_id]:
            del self._cached[key_hash]

    async def _api_key(self, token: str) -> ApiKey | None:
        key_hash = hash_api_key(token)
        hit = self._cached.get(key_hash)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        generation = self._generation
        key = await self._keys.find_by_hash(key_hash)
        if key is None or key.revoked or self._key_cache_s <= 0:
            self._cached.pop(key_hash, None)
            return key
        if generation == self._generation:
            if len(self._cached) >= self.MAX_CACHED_KEYS:
                del self._cached[next(iter(self._cached))]  # the oldest entry
            self._cached[key_hash] = (now + self._key_cache_s, key)
        return key

    async def authenticate(self, token: str) -> Principal:
        if not token:
            raise Unauthenticated("missing bearer token")
        if looks_like_api_key(token):
            key = await self._api_key(token)
            if key is None:
                raise Unauthenticated("unknown API key")
            if key.revoked:
                raise Unauthenticated("this API key has been revoked")
            return Principal(org_id=key.org_id, method="api_key", key_id=key.id)
        if self._verifier is None:
            raise Unauthenticated("not an API key, and JWT authentication is not configured")
        verified = await self._verifier.verify(token)
        try:
            check_org_id("org", verified.org_id)
        except InvalidInput as exc:
            raise Unauthenticated("the token's organization claim is not a valid id") from exc
        if verified.org_id not in self._known_orgs:
            await self._orgs.ensure(Organization(id=verified.org_id, created_at=self._clock.now()))
            self._known_orgs.add(verified.org_id)
        return Principal(
            org_id=verified.org_id, method="jwt", role=verified.role, user_id=verified.subject
        )
