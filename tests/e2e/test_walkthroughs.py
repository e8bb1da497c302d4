"""The walk-throughs stay true: the shell blocks of README.md,
docs/client-guide.md, docs/tools.md, docs/runners.md, docs/projects.md,
docs/templates.md, docs/marketplace.md, docs/skills.md, docs/publishing.md,
docs/multiplayer.md, docs/channels.md, docs/webhooks.md and docs/computer.md run in
order against the real service,
and every answer fits what the page says under its command (tests/e2e/walkthrough.py has the
conventions). Public hosts the pages name are loopback stand-ins, through HOSTS."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from tests.e2e.receivers import SignedReceiver
from tests.e2e.service import free_port, running
from tests.e2e.walkthrough import check, commands, run
from tests.fakes.git import GitServer, serve_git
from tests.fakes.web import FakeSite
from tests.pg import fresh_database, reader_role
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "README.md",
    "docs/client-guide.md",
    "docs/tools.md",
    "docs/runners.md",
    "docs/projects.md",
    "docs/templates.md",
    "docs/marketplace.md",
    "docs/skills.md",
    "docs/publishing.md",
    "docs/multiplayer.md",
    "docs/channels.md",
    "docs/webhooks.md",
    pytest.param(
        "docs/computer.md",
        marks=pytest.mark.skipif(
            os.geteuid() != 0 or shutil.which("bwrap") is None,
            reason="the local sandbox needs root and bubblewrap (apt-get install bubblewrap)",
        ),
    ),
]
KEY = "ask_walkthrough_key_0123456789abcdefghij"
# the database integration of docs/tools.md, as the page writes it
SHOP = "postgresql://reader:s3cret@db.example.com:5432/shop?sslmode=verify-full&sslrootcert=system"


def _house_repository() -> GitServer:
    """The repository docs/skills.md makes a skill of: ``skills/house-rules``."""
    git = GitServer()
    git.commit(
        {
            "skills/house-rules/SKILL.md": b"---\nname: house-rules\ndescription: The rules"
            b" of the house. Use before answering any customer.\n---\n# House rules\n"
            b"Greet by name. Never promise a delivery date.\n",
        }
    )
    return git


class Hosts(NamedTuple):
    table: list[tuple[str, str]]
    listens: list[int]


@pytest.fixture(scope="module")
def shop(pg_admin_url: str) -> Iterator[str]:
    """The customer's database of docs/tools.md on loopback: its two tables, and a
    role that may read them and nothing else."""
    with reader_role(pg_admin_url, "s3cret") as role, fresh_database(pg_admin_url) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL)")
            conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)")
            conn.execute(
                sql.SQL("GRANT SELECT ON orders, customers TO {}").format(sql.Identifier(role))
            )
        d = conninfo_to_dict(url)
        host = str(d.get("host", "127.0.0.1"))
        if host.startswith("/") or host == "localhost":
            host = "127.0.0.1"
        yield f"postgresql://{role}:s3cret@{host}:{d.get('port', '5432')}/{d['dbname']}"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[Hosts]:
    """Each page host or placeholder, and what stands in for it here; and the ports
    that the pages' background commands listen on."""
    closed = f"http://127.0.0.1:{free_port()}"  # providers and registry: nobody listens
    tmp = tmp_path_factory.mktemp("walkthroughs")
    # docs/computer.md's local sandboxes: a folder their unprivileged users can reach
    sandboxes = Path(tempfile.mkdtemp(prefix="agentsvc-walk-sandboxes-", dir="/var/tmp"))
    sandboxes.chmod(0o711)
    receiver_port = free_port()  # docs/tools.md starts its receiver on it
    receiver = SignedReceiver()  # runners.md's webhook step: it checks the signature
    env = {
        "AGENTSVC_STORAGE": "memory",
        "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
        "AGENTSVC_DATA_DIR": str(tmp / "data"),
        # as docs/tools.md asks: its receiver and its page are on loopback
        "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",
        "AGENTSVC_ALPHA_BASE_URL": closed,
        "AGENTSVC_BETA_BASE_URL": f"{closed}/v1",
        "AGENTSVC_MCP_REGISTRY_URL": closed,
        "AGENTSVC_SANDBOX_LOCAL_DIR": str(sandboxes),
    }
    with (
        serve(receiver) as example,
        serve(FakeSite()) as tea,
        serve_git(_house_repository()) as git,
        running(env, log=tmp / "service.log") as svc,
    ):
        settings = httpx.get(
            f"{svc.url}/api/orgs/settings", headers={"Authorization": f"Bearer {KEY}"}
        )
        receiver.secret = settings.json()["signing_secret"]
        yield Hosts(
            [
                ("ask_...", KEY),  # the key `make run` printed
                ("http://127.0.0.1:8000", svc.url),  # `make run`'s service
                ("https://example.com", example),  # a runner's webhook step
                ("https://tea.example", tea),  # the page web_fetch reads
                ("https://git.example", git),  # docs/skills.md's git repository
                (SHOP, shop),
                ("webhook_tool_receiver.py 9001", f"webhook_tool_receiver.py {receiver_port}"),
                ("127.0.0.1:9001", f"127.0.0.1:{receiver_port}"),
            ],
            [receiver_port],
        )
    shutil.rmtree(sandboxes, ignore_errors=True)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_is_true_when_pasted_in_order(page: str, hosts: Hosts) -> None:
    assert shutil.which("curl") is not None, "the walk-throughs need curl"
    cmds = commands((ROOT / page).read_text())
    assert cmds, f"{page} has no shell commands"
    outcomes, output = run(cmds, hosts.table, cwd=ROOT, listens=hosts.listens)
    wrong = []
    for outcome in outcomes:
        problem = check(outcome)
        if problem:
            cmd = outcome.command
            wrong.append(f"{page}:{cmd.line}: {problem}\n  {cmd.text}\n  answer: {outcome.body}")
    assert not wrong, "\n".join(wrong) + "\n--- the session's output:\n" + output[-3000:]
