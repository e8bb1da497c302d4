"""Run mutmut with one of the project's test selections (``make mutation``).

mutmut 3 reads a single selection, ``[tool.mutmut]`` in pyproject.toml, and has no
option to choose another. ``unit`` runs it as it is: the fast unit tests. Any other
name takes ``only_mutate`` (the modules it mutates) and
``pytest_add_cli_args_test_selection`` (the tests it runs) from
``[tool.agentsvc.mutation.<name>]`` instead, for the adapters whose guarantees only a
real server shows (``postgres``: the database integrations' read-only guard).

A selection with ``postgres = true`` needs a PostgreSQL server: the one
``AGENTSVC_TEST_DATABASE_URL`` names, or else one embedded server started for the
whole run (mutmut runs each mutant's tests as a pytest session of its own in a
forked process, which would otherwise start a server each). It runs in a process of
its own: this one must not import the service's modules, or every forked test run
would use them instead of mutmut's mutated copies.

mutmut keeps its copy of the sources, and what it learnt and found, in ``mutants/``,
and cannot share it between selections (a file it mutated for one is a plain copy
for the other, and a changed selection resets every result). Each selection keeps
its own: the one in ``mutants/`` is named in ``mutants/.selection``, the others wait
in ``mutants.<name>/``, and asking for a selection moves its folder into place.
Usage, with any mutmut command:

    python tests/mutation_run.py SELECTION run [--max-children N] [MUTANT NAMES]
    python tests/mutation_run.py postgres results
    python tests/mutation_run.py postgres show MUTANT_NAME
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from mutmut.__main__ import cli
from mutmut.configuration import config

DEFAULT = "unit"
HERE = Path("mutants")
MARKER = HERE / ".selection"
# the test server (tests/pg.py), until this process closes its standard input
_SERVER = (
    "import sys\n"
    "from tests.pg import test_server\n"
    "with test_server() as url:\n"
    "    print(url, flush=True)\n"
    "    sys.stdin.read()\n"
)


@contextmanager
def embedded_server() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        url = server.stdout.readline().strip()
        if not url:
            raise RuntimeError("the embedded PostgreSQL did not start")
        yield url
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


def held() -> str | None:
    """The selection whose results are in ``mutants/`` (one made by mutmut alone
    is the default's)."""
    if MARKER.exists():
        return MARKER.read_text().strip()
    return DEFAULT if HERE.exists() else None


def use(name: str) -> None:
    """Put the selection's own ``mutants/`` in place, the other one aside."""
    current = held()
    if current != name:
        if current is not None:
            HERE.rename(f"mutants.{current}")
        kept = Path(f"mutants.{name}")
        if kept.exists():
            kept.rename(HERE)
    HERE.mkdir(exist_ok=True)
    MARKER.write_text(f"{name}\n")


def main(argv: list[str]) -> int:
    # run as a script, Python put tests/ first on the import path; mutmut's own
    # command has no such entry, and the tests must import mutmut's copies
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    if not argv:
        print(__doc__)
        return 2
    name, *args = argv
    tool = tomllib.loads(Path("pyproject.toml").read_text())["tool"]
    selections = tool.get("agentsvc", {}).get("mutation", {})
    if name != DEFAULT and name not in selections:
        known = ", ".join([DEFAULT, *selections])
        print(f"no test selection {name!r} (known: {known})", file=sys.stderr)
        return 2
    use(name)
    with ExitStack() as stack:
        if name != DEFAULT:
            selection = selections[name]
            settings = config()
            settings.only_mutate = list(selection["only_mutate"])
            settings.pytest_add_cli_args_test_selection = list(
                selection["pytest_add_cli_args_test_selection"]
            )
            running = args[:1] == ["run"]
            if (
                running
                and selection.get("postgres")
                and not os.environ.get("AGENTSVC_TEST_DATABASE_URL")
            ):
                print("starting an embedded PostgreSQL for the run")
                os.environ["AGENTSVC_TEST_DATABASE_URL"] = stack.enter_context(embedded_server())
        try:
            cli.main(args=args, prog_name="mutmut")
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
