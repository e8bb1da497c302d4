from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, Request, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from agentsvc_core.use_cases import ApiKeys
from agentsvc_web.access import ADMIN
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import CREATE, errors
from agentsvc_web.schemas import IssuedKeyOut, KeyCreateBody, KeyOut, OkBody

Req = Request[Any, Any, Any]


class KeyController(Controller):
    """Organization API keys. Managed with an API key only (a JWT user gets 403)."""

    path = "/api/keys"
    tags = ["api keys"]

    @get(
        "/",
        operation_id="listKeys",
        opt=ADMIN,
        responses=errors(403),
        summary="List the organization's API keys (no secrets)",
    )
    async def list_keys(self, request: Req, api_keys: NamedDependency[ApiKeys]) -> list[KeyOut]:
        return [KeyOut.of(k) for k in await api_keys.list(principal_of(request))]

    @post(
        "/",
        operation_id="createKey",
        status_code=201,
        responses={**CREATE, **errors(403)},
        summary="Create an API key; its plaintext is in this answer only",
    )
    async def create_key(
        self, request: Req, api_keys: NamedDependency[ApiKeys], data: JSONBody[KeyCreateBody]
    ) -> IssuedKeyOut:
        issued = await api_keys.create(principal_of(request), data.name)
        return IssuedKeyOut.issued(issued.key, issued.token)

    @delete(
        "/{key_id:uuid}",
        operation_id="revokeKey",
        status_code=200,
        responses=errors(403, 404),
        summary="Revoke an API key (it gives 401 from then on)",
    )
    async def revoke_key(
        self, request: Req, api_keys: NamedDependency[ApiKeys], key_id: FromPath[UUID]
    ) -> OkBody:
        await api_keys.revoke(principal_of(request), key_id)
        return OkBody(ok=True)
