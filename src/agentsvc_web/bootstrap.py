"""The composition root: the one module that builds adapters and wires them to use cases."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentsvc_adapters.auth import JwtConfigError, JwtVerifier
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import Storage, SystemClock, TokenVerifier
from agentsvc_core.use_cases import Agents, ApiKeys, Authenticator
from agentsvc_web.settings import Settings, SettingsError

log = logging.getLogger("agentsvc")


class Services:
    """The use cases the web layer may call, built once per process."""

    def __init__(
        self, settings: Settings, storage: Storage, verifier: TokenVerifier | None
    ) -> None:
        clock = SystemClock()
        self.settings = settings
        self.storage = storage
        self.verifier = verifier
        self.agents = Agents(storage.agents, clock, settings.default_model)
        self.api_keys = ApiKeys(storage.api_keys, storage.organizations, clock)
        self.authenticator = Authenticator(storage.api_keys, storage.organizations, clock, verifier)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Services]:
        """Open connections, ensure the bootstrap key, and close everything after."""
        try:
            if self.settings.bootstrap_api_key:
                try:
                    await self.api_keys.ensure(
                        self.settings.bootstrap_org, self.settings.bootstrap_api_key
                    )
                except InvalidInput as exc:
                    raise SettingsError(exc.detail) from None
                log.info(
                    "bootstrap API key is valid for organization %r", self.settings.bootstrap_org
                )
            yield self
        finally:
            if isinstance(self.verifier, JwtVerifier):
                await self.verifier.aclose()


def _verifier(settings: Settings) -> TokenVerifier | None:
    if not settings.jwt_secret and not settings.jwt_jwks_url:
        return None
    try:
        return JwtVerifier(
            algorithms=settings.jwt_algorithms,
            secret=settings.jwt_secret,
            jwks_url=settings.jwt_jwks_url,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            org_claim=settings.jwt_org_claim,
        )
    except JwtConfigError as exc:
        raise SettingsError(str(exc)) from None


def _storage(settings: Settings) -> Storage:
    if settings.storage == "memory":
        return MemoryStorage()
    raise SettingsError(
        "AGENTSVC_STORAGE=postgres is not available yet in this build; use AGENTSVC_STORAGE=memory"
    )


def build_services(settings: Settings) -> Services:
    return Services(settings, _storage(settings), _verifier(settings))
