"""README.md's configuration table names every ``AGENTSVC_*`` variable the service
reads, and nothing it does not read.

The variables read are found two ways, so that neither alone can miss one:
``Settings.from_env`` runs on a mapping that records every name it is asked for
(once with the single-machine defaults, once without them, which reads the
variables those defaults stand in for), and the sources are parsed for the
``AGENTSVC_*`` names ``settings.py`` spells out and for the direct
``os.environ`` reads, and the whole names (an adapter's ``environ.get(...)``)
elsewhere in ``src/``."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from agentsvc_web.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
NAME = re.compile(r"AGENTSVC_[A-Z0-9_]+")


class Recording(Mapping[str, str]):
    """An environment that notes each variable it is asked for."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        # a loader that walked the whole environment would read names we cannot see
        raise AssertionError("Settings.from_env should ask for variables by name")

    def __len__(self) -> int:
        return len(self._values)


def read_by_settings() -> set[str]:
    asked: set[str] = set()
    without_local_defaults = {
        "AGENTSVC_LOCAL_DEFAULTS": "false",
        "AGENTSVC_DATABASE_URL": "postgresql://agentsvc@127.0.0.1:5432/agentsvc",
        "AGENTSVC_ENCRYPTION_KEYS": "k1:" + "A" * 43 + "=",
    }
    for values in ({}, without_local_defaults):
        env = Recording(values)
        Settings.from_env(env)
        asked |= env.asked
    return asked


def named_in_source() -> set[str]:
    """Every string in ``src/`` that is a whole variable name: what ``settings.py``
    spells out, and the names the adapters read from the environment they are
    handed at start-up (``environ.get("AGENTSVC_E2B_API_KEY")``, or a module's
    constant holding the name). A prefix they complete (``AGENTSVC_SANDBOX_LOCAL_``)
    ends in ``_`` and is not a name."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and NAME.fullmatch(node.value)
                and not node.value.endswith("_")
            ):
                names.add(node.value)
    return names


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def read_from_os_environ() -> set[str]:
    """``os.environ.get("AGENTSVC_X")``, ``os.environ["AGENTSVC_X"]`` (read, not
    assigned) and ``os.getenv("AGENTSVC_X")`` anywhere in ``src/``."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            key: ast.expr | None = None
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                environ_get = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "get"
                    and _is_os_environ(func.value)
                )
                getenv = (
                    isinstance(func, ast.Attribute)
                    and func.attr == "getenv"
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "os"
                )
                if environ_get or getenv:
                    key = node.args[0]
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.ctx, ast.Load)
                and _is_os_environ(node.value)
            ):
                key = node.slice
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and NAME.fullmatch(key.value)
            ):
                names.add(key.value)
    return names


def variables_read() -> set[str]:
    return read_by_settings() | named_in_source() | read_from_os_environ()


def table_variables(readme: str) -> set[str]:
    """The ``AGENTSVC_*`` names in the first cell of each row of the table under
    "## Configuration" (a row may name several: `` `A`, `B` ``)."""
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        first = line.split("|")[1]
        names |= set(re.findall(r"`(AGENTSVC_[A-Z0-9_]+)`", first))
    return names


def test_the_loader_is_seen_reading() -> None:
    # the recording environment works: it saw the loader ask for these
    asked = read_by_settings()
    assert {"AGENTSVC_STORAGE", "AGENTSVC_DATABASE_URL", "AGENTSVC_WORKER"} <= asked


def test_every_variable_read_is_in_the_readme_table() -> None:
    documented = table_variables((ROOT / "README.md").read_text())
    missing = sorted(variables_read() - documented)
    assert not missing, f"README.md's configuration table lacks {missing}"


def test_the_readme_table_names_only_variables_read() -> None:
    documented = table_variables((ROOT / "README.md").read_text())
    unknown = sorted(documented - variables_read())
    assert not unknown, f"README.md's configuration table names {unknown}, never read"


def test_a_row_removed_from_the_table_is_missed() -> None:
    # the table parser sees rows by their first cell: drop one and it is gone
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `AGENTSVC_WORKER` |"))
    assert "AGENTSVC_WORKER" not in table_variables(readme.replace(row + "\n", ""))
    assert "AGENTSVC_WORKER" in table_variables(readme)
