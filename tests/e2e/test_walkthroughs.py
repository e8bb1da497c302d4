"""The walk-throughs stay true: the shell blocks of README.md, docs/client-guide.md,
docs/tools.md, docs/runners.md, docs/projects.md, docs/templates.md,
docs/marketplace.md, docs/skills.md, docs/publishing.md, docs/multiplayer.md,
docs/channels.md, docs/threads.md, docs/webhooks.md, docs/privacy.md, docs/computer.md
and docs/code-agents.md run in order against the real service, and every answer fits what
the page says under its command (tests/e2e/walkthrough.py has the conventions). Public
hosts the pages name are loopback stand-ins, through the ``hosts`` fixture's table:
docs/code-agents.md's repository ``https://github.com/you/app.git`` is a loopback git
server (tests/fakes/git.py) that takes pushes, and GitHub's REST API the fake of
tests/fakes/github.py; after that page ran, the test checks that the fix was pushed on its
branch and the pull request opened."""

from __future__ import annotations

import os
import re
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
from tests.fakes.github import TOKEN, FakeGitHub
from tests.fakes.web import FakeSite
from tests.pg import fresh_database, reader_role
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
SANDBOXED = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="the local sandbox needs root and bubblewrap (apt-get install bubblewrap)",
)
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
    "docs/threads.md",
    "docs/webhooks.md",
    "docs/privacy.md",
    pytest.param("docs/computer.md", marks=SANDBOXED),
    pytest.param("docs/code-agents.md", marks=SANDBOXED),
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


# docs/code-agents.md's repository: an app whose add() subtracts, and its test
APP = {
    "README.md": b"# app\n\nAdds numbers. Run the tests with `python3 test_app.py`.\n",
    "app.py": b"def add(a, b):\n    return a - b\n",
    "test_app.py": b"from app import add\n\nassert add(2, 3) == 5\nprint('tests pass')\n",
}


class Hosts(NamedTuple):
    table: list[tuple[str, str]]
    listens: list[int]
    app: GitServer  # docs/code-agents.md's repository
    github: FakeGitHub  # and its pull requests


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
    app = GitServer(token=TOKEN)  # docs/code-agents.md's repository, on GitHub
    app.commit(dict(APP))
    github = FakeGitHub(app, owner="you", repo="app")  # its pull requests: github.com's
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
        serve_git(app) as app_git,
        serve(github) as github_api,
    ):
        # GitHub's web host is the stand-in git server's: its repositories get pull requests
        env["AGENTSVC_GITHUB_HOST"] = app_git.removeprefix("http://")
        env["AGENTSVC_GITHUB_API_URL"] = github_api
        with running(env, log=tmp / "service.log") as svc:
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
                    # docs/code-agents.md's repository on GitHub, and a token that may push
                    ("https://github.com/you/app.git", f"{app_git}/you/app.git"),
                    ("ghp_...", TOKEN),
                    (SHOP, shop),
                    ("webhook_tool_receiver.py 9001", f"webhook_tool_receiver.py {receiver_port}"),
                    ("127.0.0.1:9001", f"127.0.0.1:{receiver_port}"),
                ],
                [receiver_port],
                app,
                github,
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
    if page == "docs/code-agents.md":
        _the_fix_was_pushed_and_proposed(hosts)


def _the_fix_was_pushed_and_proposed(hosts: Hosts) -> None:
    """What docs/code-agents.md's session did reached the hosts: one new branch on the
    repository, holding the edited app.py and the rest as it was, and a pull request
    from it to main on GitHub."""
    refs = hosts.app.repo.refs
    branches = [r.decode() for r in refs.keys() if r.startswith(b"refs/heads/fixer/")]  # noqa: SIM118
    assert len(branches) == 1, branches
    branch = branches[0].removeprefix("refs/heads/")
    assert re.fullmatch(r"fixer/[0-9a-f]{8}", branch), branch
    files = {path: content for path, (_, content) in hosts.app.files(branch).items()}
    assert files == {**APP, "app.py": b"def add(a, b):\n    return a + b\n"}
    assert hosts.app.files("main") == {p: (0o100644, c) for p, c in APP.items()}
    [pull] = hosts.github.pulls
    assert (pull["head"]["ref"], pull["base"]["ref"], pull["state"]) == (branch, "main", "open")
    assert pull["html_url"] == f"https://github.com/you/app/pull/{pull['number']}"
