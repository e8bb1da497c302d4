"""Bearer-token verification (JWT with an HMAC secret or a JWKS URL)."""

from agentsvc_adapters.auth.jwt import JwtConfigError, JwtVerifier

__all__ = ["JwtConfigError", "JwtVerifier"]
