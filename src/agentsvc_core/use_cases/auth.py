from __future__ import annotations

from agentsvc_core.entities import Organization, Principal
from agentsvc_core.errors import InvalidInput, Unauthenticated
from agentsvc_core.ports import ApiKeyRepository, Clock, OrganizationRepository, TokenVerifier
from agentsvc_core.rules import check_org_id
from agentsvc_core.use_cases.api_keys import hash_api_key, looks_like_api_key


class Authenticator:
    """Turns a bearer token into a ``Principal``, or raises ``Unauthenticated``.

    API keys are looked up by hash on every request, so a revoked key stops working
    at once, in every process. A JWT's organization is created on first sight; the
    ids already ensured are remembered in-process so that costs one write per
    organization and process, not one per request.
    """

    def __init__(
        self,
        keys: ApiKeyRepository,
        orgs: OrganizationRepository,
        clock: Clock,
        verifier: TokenVerifier | None,
    ) -> None:
        self._keys = keys
        self._orgs = orgs
        self._clock = clock
        self._verifier = verifier
        self._known_orgs: set[str] = set()

    async def authenticate(self, token: str) -> Principal:
        if not token:
            raise Unauthenticated("missing bearer token")
        if looks_like_api_key(token):
            key = await self._keys.find_by_hash(hash_api_key(token))
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
        return Principal(org_id=verified.org_id, method="jwt", user_id=verified.subject)
