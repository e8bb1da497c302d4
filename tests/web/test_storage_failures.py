"""A database that goes away answers 503 UNAVAILABLE, with nothing secret in it."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
from litestar.testing import TestClient
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from agentsvc_adapters.postgres import migrate
from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.pg import fresh_database


def test_lost_database_is_503_and_says_nothing_secret(pg_admin_url: str) -> None:
    key = f"ask_fail_{uuid.uuid4().hex}"
    with fresh_database(pg_admin_url) as url:
        asyncio.run(migrate(url))
        settings = Settings(
            storage="postgres",
            database_url=url,
            bootstrap_api_key=key,
            db_pool_min=1,
            db_pool_max=2,
            db_pool_timeout_s=2,
        )
        with TestClient(create_app(settings)) as c:
            h = {"Authorization": f"Bearer {key}"}
            assert c.get("/api/agents", headers=h).status_code == 200
            dbname = conninfo_to_dict(url)["dbname"]
            with psycopg.connect(pg_admin_url, autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(dbname)))
                )
            r = c.get("/api/agents", headers=h)
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "UNAVAILABLE"
            assert r.headers["retry-after"]
            for secret in (key, url, str(dbname)):
                assert secret not in r.text
