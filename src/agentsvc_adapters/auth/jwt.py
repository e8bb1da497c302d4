from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import jwt

from agentsvc_core.entities import OrgRole
from agentsvc_core.errors import Unauthenticated
from agentsvc_core.ports import TokenVerifier, VerifiedToken

_HMAC = frozenset({"HS256", "HS384", "HS512"})
_ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_MIN_SECRET_BYTES = 32
# Which algorithms a key type may sign with (by prefix).
_FAMILY = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}
# A JWKS is fetched again at most this often when a token names an unknown kid,
# so forged kids cannot turn the service into a request amplifier.
_JWKS_MIN_REFRESH_S = 30.0
_JWKS_MAX_AGE_S = 600.0
_JWKS_MAX_BYTES = 256 * 1024


class JwtConfigError(ValueError):
    """The JWT settings contradict each other (raised at start-up, never per request)."""


class JwtVerifier(TokenVerifier):
    """Verifies JWTs. The algorithm allow-list comes from configuration, never from
    the token: HMAC algorithms only with a shared secret, asymmetric ones only with
    a JWKS, so a public key can never be used as an HMAC secret."""

    def __init__(
        self,
        *,
        algorithms: Sequence[str],
        secret: str | None = None,
        jwks_url: str | None = None,
        issuer: str | None = None,
        audience: str | None = None,
        org_claim: str = "org_id",
        role_claim: str = "role",
        admin_role: str = "admin",
        leeway_s: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        if (secret is None) == (jwks_url is None):
            raise JwtConfigError("configure exactly one of AGENTSVC_JWT_SECRET and _JWKS_URL")
        if secret is not None and len(secret.encode()) < _MIN_SECRET_BYTES:
            raise JwtConfigError(
                f"AGENTSVC_JWT_SECRET must be at least {_MIN_SECRET_BYTES} bytes: a guessable "
                "secret lets anyone sign tokens for any organization"
            )
        algs = list(dict.fromkeys(a.strip() for a in algorithms if a.strip()))
        allowed = _HMAC if secret is not None else _ASYMMETRIC
        bad = [a for a in algs if a not in allowed]
        if not algs or bad:
            kind = "an HMAC secret" if secret is not None else "a JWKS"
            raise JwtConfigError(
                f"AGENTSVC_JWT_ALGORITHMS {bad or algs} cannot be used with {kind}; "
                f"choose from {sorted(allowed)}"
            )
        self._algorithms = algs
        self._secret = secret
        self._jwks_url = jwks_url
        self._issuer = issuer
        self._audience = audience
        self._org_claim = org_claim
        self._role_claim = role_claim
        self._admin_role = admin_role
        self._leeway = leeway_s
        self._http = http
        self._owns_http = http is None and jwks_url is not None
        self._jwks: dict[str, jwt.PyJWK] = {}
        self._jwks_fetched_at = -1e9
        self._jwks_lock = anyio.Lock()

    async def aclose(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.aclose()

    async def verify(self, token: str) -> VerifiedToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("malformed bearer token") from None
        alg = header.get("alg")
        if alg not in self._algorithms:
            raise Unauthenticated("token algorithm is not allowed")
        key: Any = self._secret if self._secret is not None else await self._jwk(header)
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=self._algorithms,
                issuer=self._issuer,
                audience=self._audience,
                leeway=self._leeway,
                options={
                    "require": ["exp", "sub"],
                    "verify_aud": self._audience is not None,
                    "verify_iss": self._issuer is not None,
                },
            )
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("token has expired") from None
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthenticated(f"token lacks the {exc.claim!r} claim") from None
        except (jwt.PyJWTError, TypeError, ValueError):
            # TypeError/ValueError: a JWKS key of another type than the token's
            # algorithm (an RSA kid under "alg": "ES256"): a bad token, not our fault.
            raise Unauthenticated("invalid token") from None
        sub = claims.get("sub")
        org = claims.get(self._org_claim)
        if not isinstance(sub, str) or not sub:
            raise Unauthenticated("token subject must be a non-empty string")
        if not isinstance(org, str) or not org:
            raise Unauthenticated(f"token lacks the {self._org_claim!r} claim")
        return VerifiedToken(subject=sub, org_id=org, role=self._role(claims.get(self._role_claim)))

    def _role(self, claim: object) -> OrgRole:
        """``admin`` when the role claim is the admin role, or a list holding it;
        anything else (absent, another value, another type) is ``member``."""
        if claim == self._admin_role:
            return "admin"
        if isinstance(claim, list) and self._admin_role in claim:
            return "admin"
        return "member"

    async def _jwk(self, header: dict[str, Any]) -> Any:
        kid = header.get("kid")
        now = time.monotonic()
        if now - self._jwks_fetched_at > _JWKS_MAX_AGE_S:
            await self._refresh(now, force=True)
        found = self._pick(kid)
        if found is None and now - self._jwks_fetched_at > _JWKS_MIN_REFRESH_S:
            await self._refresh(now, force=False)
            found = self._pick(kid)
        if found is None:
            raise Unauthenticated("token signed with an unknown key")
        alg = str(header.get("alg", ""))
        if not alg.startswith(_FAMILY.get(found.key_type or "", ("\0",))):
            raise Unauthenticated("token algorithm does not match its key")
        return found.key

    def _pick(self, kid: object) -> jwt.PyJWK | None:
        if isinstance(kid, str):
            return self._jwks.get(kid)
        # No kid: acceptable only when the set holds exactly one key.
        return next(iter(self._jwks.values())) if len(self._jwks) == 1 else None

    async def _refresh(self, now: float, *, force: bool) -> None:
        async with self._jwks_lock:
            # Checked again under the lock: requests that queued behind a fetch
            # use its result instead of fetching once each.
            age = time.monotonic() - self._jwks_fetched_at
            if age <= (_JWKS_MAX_AGE_S if force else _JWKS_MIN_REFRESH_S):
                return
            assert self._jwks_url is not None
            if self._http is None:
                self._http = httpx.AsyncClient(timeout=5.0, follow_redirects=False)
            try:
                resp = await self._http.get(self._jwks_url)
                resp.raise_for_status()
                if len(resp.content) > _JWKS_MAX_BYTES:
                    raise ValueError("JWKS too large")
                keys = jwt.PyJWKSet.from_dict(resp.json()).keys
            except (httpx.HTTPError, ValueError, jwt.PyJWTError):
                # Keep the keys we had; the next request may try again later.
                self._jwks_fetched_at = now
                if not self._jwks:
                    raise Unauthenticated("signing keys are unavailable") from None
                return
            self._jwks = {k.key_id or f"#{i}": k for i, k in enumerate(keys)}
            self._jwks_fetched_at = now
