"""``make lint``'s size rule (tests/house_rules.py) on a tree of its own."""

from __future__ import annotations

from pathlib import Path

from tests import house_rules


def _tree(tmp_path: Path, files: dict[str, int]) -> Path:
    for rel, lines in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n" * lines)
    return tmp_path


def test_a_file_over_the_limit_is_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"src/a/long.py": 501, "src/a/fine.py": 500})
    found = house_rules.offences(root, allowed={})
    assert found == ["src/a/long.py: 501 lines, over 500: split it by meaning"]


def test_an_allowed_file_passes_and_leaves_the_list_when_it_shrinks_or_goes(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path, {"src/big.py": 800, "src/small.py": 20})
    allowed = {"src/big.py": "why", "src/small.py": "why", "src/gone.py": "why"}
    assert house_rules.offences(root, allowed=allowed) == [
        "src/gone.py: on the allow-list of tests/house_rules.py but gone: remove it",
        "src/small.py: 20 lines, within 500: take it off the allow-list",
    ]


def test_the_repository_keeps_the_rule() -> None:
    assert house_rules.offences() == []
