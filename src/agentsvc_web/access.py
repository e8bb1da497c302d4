"""Who may call what: the one role policy of the HTTP API (docs/security.md).

Every route needs a role, ``admin`` or ``member``, and the rule is deny by
default: a route that reads (GET) is open to members, a route that writes needs
an admin, unless the route says otherwise with ``opt={"access": ...}``:

- ``MEMBER``: a write a member makes for itself (its own threads and messages, its
  own OAuth authorization of an MCP server); the use case checks whose thread it is;
- ``ADMIN``: a read an admin alone may make (API keys, organization settings with
  the signing secret).

A new route therefore needs an admin until somebody decides otherwise. The
``access_guard`` enforces the rule on every request (an app-level guard), and
``document_roles`` writes the same rule into the OpenAPI document as the bearer
scheme's role (``security: [{"BearerToken": ["admin"]}]``, OpenAPI 3.1's role
names for non-OAuth schemes), with a 403 answer, so that clients and the standing
role matrix test (tests/e2e/test_access_matrix.py) read the policy from the document.

Organization scoping is another matter: every use case reads and writes under the
caller's organization, so another organization's id is 404 whatever the role.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler, HTTPRouteHandler
from litestar.openapi.spec import OpenAPI, OpenAPIResponse
from litestar.routes import HTTPRoute

from agentsvc_core.entities import Principal
from agentsvc_core.errors import PermissionDenied
from agentsvc_web.openapi import operations

__all__ = ["ADMIN", "MEMBER", "access_guard", "document_roles", "required_role"]

Access = Literal["admin", "member"]
ADMIN: dict[str, Access] = {"access": "admin"}
MEMBER: dict[str, Access] = {"access": "member"}
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


def required_role(handler: BaseRouteHandler, method: str) -> Access:
    declared = handler.opt.get("access")
    if declared in ("admin", "member"):
        return declared  # type: ignore[no-any-return]
    return "member" if method.upper() in _READS else "admin"


def access_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuses (403) a member's call of an admin route. Routes the authentication
    middleware leaves public (the OpenAPI document, /healthz, the OAuth callback)
    carry no principal and are not this guard's business."""
    who = connection.scope.get("user")
    if not isinstance(who, Principal) or who.is_admin:
        return
    method = str(connection.scope.get("method", ""))  # none: not a read, so admin
    if required_role(handler, method) == "admin":
        raise PermissionDenied("this needs the organization's admin role")


def _operations(app: Litestar) -> dict[str, Access | None]:
    """operationId -> role (None: public, no bearer token), from the route handlers."""
    roles: dict[str, Access | None] = {}
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if not isinstance(handler, HTTPRouteHandler):
                continue
            op_id = handler.operation_id
            if isinstance(op_id, str):
                method = next(iter(handler.http_methods))
                public = handler.security is not None and len(handler.security) == 0
                roles[op_id] = None if public else required_role(handler, method)
    return roles


def document_roles(app: Litestar, document: OpenAPI) -> None:
    """Write each operation's role (from ``app``'s routes) into its OpenAPI document."""
    roles = _operations(app)
    for op in operations(document):
        if op.operation_id not in roles:
            continue
        role = roles[op.operation_id]
        if role is None:
            # public (the OAuth callback): Litestar drops an empty list, which
            # would leave the document's global bearer requirement in force
            op.security = []
            continue
        if role != "admin":
            continue
        op.security = [{"BearerToken": ["admin"]}]
        responses = op.responses or {}
        if "403" not in responses and isinstance(responses.get("401"), OpenAPIResponse):
            forbidden = copy.copy(responses["401"])
            forbidden.description = "The caller's role may not do this (FORBIDDEN)"
            responses["403"] = forbidden
