"""The JWT adapter: JWKS fetching over httpx (MockTransport as the seam), key confusion."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from agentsvc_adapters.auth import JwtConfigError, JwtVerifier
from agentsvc_core.errors import Unauthenticated

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    algo = jwt.get_algorithm_by_name(alg)
    d: dict[str, Any] = json.loads(algo.to_jwk(key.public_key()))
    d.update(kid=kid, alg=alg, use="sig")
    return d


def claims(**extra: Any) -> dict[str, Any]:
    return {"sub": "u1", "org_id": "acme", "exp": int(time.time()) + 60, **extra}


class Jwks:
    def __init__(self, *keys: dict[str, Any]) -> None:
        self.keys = list(keys)
        self.calls = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return httpx.Response(200, json={"keys": self.keys})


def verifier(jwks: Jwks, algs: tuple[str, ...] = ("RS256", "ES256")) -> JwtVerifier:
    client = httpx.AsyncClient(transport=httpx.MockTransport(jwks.handler))
    return JwtVerifier(algorithms=algs, jwks_url="https://idp.test/jwks.json", http=client)


async def test_rs256_and_es256_tokens_verify_against_the_jwks() -> None:
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"), jwk(EC_KEY, "e1", "ES256"))
    v = verifier(jwks)
    rs = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "r1"})
    es = jwt.encode(claims(sub="u2"), EC_KEY, algorithm="ES256", headers={"kid": "e1"})
    assert (await v.verify(rs)).subject == "u1"
    assert (await v.verify(es)).subject == "u2"
    assert jwks.calls == 1  # cached


async def test_unknown_kid_refetches_at_most_once_per_interval() -> None:
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"))
    v = verifier(jwks)
    forged = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "nope"})
    await v.verify(jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "r1"}))
    for _ in range(5):
        with pytest.raises(Unauthenticated, match="unknown key"):
            await v.verify(forged)
    assert jwks.calls == 1


async def test_rotated_key_is_picked_up() -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"))
    v = verifier(jwks)
    await v.verify(jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "r1"}))
    jwks.keys.append(jwk(other, "r2", "RS256"))
    v._jwks_fetched_at -= 60  # the minimum refresh interval has passed
    assert (
        await v.verify(jwt.encode(claims(), other, algorithm="RS256", headers={"kid": "r2"}))
    ).org_id == "acme"


async def test_public_key_used_as_hmac_secret_is_refused() -> None:
    """The classic key-confusion attack: HS256 signed with the public key bytes."""
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"))
    v = verifier(jwks)
    header = {"alg": "HS256", "typ": "JWT", "kid": "r1"}

    def b64(b: bytes) -> bytes:
        return base64.urlsafe_b64encode(b).rstrip(b"=")

    signing = b64(json.dumps(header).encode()) + b"." + b64(json.dumps(claims()).encode())
    pub = json.dumps(jwks.keys[0]).encode()
    token = (signing + b"." + b64(hmac.new(pub, signing, hashlib.sha256).digest())).decode()
    with pytest.raises(Unauthenticated, match="algorithm"):
        await v.verify(token)


async def test_unreachable_jwks_is_401_not_500() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    v = JwtVerifier(
        algorithms=("RS256",),
        jwks_url="https://idp.test/jwks.json",
        http=httpx.AsyncClient(transport=httpx.MockTransport(down)),
    )
    token = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "r1"})
    with pytest.raises(Unauthenticated, match="unavailable"):
        await v.verify(token)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algorithms": ("RS256",), "secret": "s" * 32}, "cannot be used"),
        ({"algorithms": ("HS256",), "jwks_url": "https://x"}, "cannot be used"),
        ({"algorithms": ("HS256",)}, "exactly one"),
        ({"algorithms": (), "secret": "s" * 32}, "cannot be used"),
        ({"algorithms": ("none",), "secret": "s" * 32}, "cannot be used"),
        ({"algorithms": ("HS256",), "secret": "short-secret"}, "at least 32 bytes"),
    ],
)
def test_contradictory_configuration_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(JwtConfigError, match=message):
        JwtVerifier(**kwargs)


async def test_key_of_another_family_than_the_algorithm_is_401_not_500() -> None:
    """An RSA kid under "alg": "ES256" (the kid is public): refused, never a crash."""
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"), jwk(EC_KEY, "e1", "ES256"))
    v = verifier(jwks)
    forged = jwt.encode(claims(), EC_KEY, algorithm="ES256", headers={"kid": "r1"})
    with pytest.raises(Unauthenticated, match="does not match"):
        await v.verify(forged)
    # RSA keys with no "alg" still verify RS384 and PS256 tokens
    plain = jwk(RSA_KEY, "r2", "RS256")
    del plain["alg"]
    v2 = verifier(Jwks(plain), algs=("RS384", "PS256"))
    for alg in ("RS384", "PS256"):
        token = jwt.encode(claims(), RSA_KEY, algorithm=alg, headers={"kid": "r2"})
        assert (await v2.verify(token)).subject == "u1"


async def test_concurrent_requests_share_one_jwks_fetch() -> None:
    jwks = Jwks(jwk(RSA_KEY, "r1", "RS256"))
    v = verifier(jwks)
    token = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "r1"})
    forged = jwt.encode(claims(), RSA_KEY, algorithm="RS256", headers={"kid": "unknown"})

    async def attempt(t: str) -> bool:
        try:
            await v.verify(t)
        except Unauthenticated:
            return False
        return True

    results = await asyncio.gather(*(attempt(token if i % 2 else forged) for i in range(50)))
    assert results.count(True) == 25
    assert jwks.calls == 1


@pytest.mark.parametrize(
    ("role_claim", "expected"),
    [
        ({}, "member"),
        ({"role": "admin"}, "admin"),
        ({"role": ["viewer", "admin"]}, "admin"),
        ({"role": "Admin"}, "member"),
        ({"role": "administrator"}, "member"),
        ({"role": ["admins"]}, "member"),
        ({"role": True}, "member"),
        ({"roles": "admin"}, "member"),  # another claim than the configured one
    ],
)
async def test_the_role_comes_from_the_configured_claim(
    role_claim: dict[str, Any], expected: str
) -> None:
    secret = "s" * 40
    v = JwtVerifier(algorithms=("HS256",), secret=secret)
    token = jwt.encode(claims(**role_claim), secret, algorithm="HS256")
    assert (await v.verify(token)).role == expected


async def test_role_claim_and_admin_value_are_configurable() -> None:
    secret = "s" * 40
    v = JwtVerifier(algorithms=("HS256",), secret=secret, role_claim="grp", admin_role="owners")
    admin = jwt.encode(claims(grp=["owners"]), secret, algorithm="HS256")
    member = jwt.encode(claims(role="admin"), secret, algorithm="HS256")
    assert (await v.verify(admin)).role == "admin"
    assert (await v.verify(member)).role == "member"
