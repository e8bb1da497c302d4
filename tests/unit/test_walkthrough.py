"""The walk-through harness (tests/e2e/walkthrough.py) reads pages and answers as
its docstring says: a harness that accepted anything would prove nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.walkthrough import (
    Command,
    Outcome,
    PageError,
    check,
    commands,
    expected,
    mismatch,
    prepare,
    run,
)

PAGE = """# A page

```sh
KEY=ask_...; BASE=http://127.0.0.1:8000

# create one
ID=$(curl -s $BASE/api/things -d '{"name": "it'"'"'s"}' \\
  | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
# 201 {"id": ..., "name": "it's",
#      "tags": [...]}

curl -s $BASE/api/things   # list
```

<!-- not run: needs a real Slack -->
```sh
slack-cli post
```

```json
{"not": "a command"}
```
"""


def test_a_page_splits_into_its_commands_with_the_answers_under_them() -> None:
    cmds = commands(PAGE)
    assert [c.text.split("\n")[0] for c in cmds] == [
        "KEY=ask_...; BASE=http://127.0.0.1:8000",
        """ID=$(curl -s $BASE/api/things -d '{"name": "it'"'"'s"}' \\""",
        "curl -s $BASE/api/things   # list",
    ]
    assert [c.line for c in cmds] == [4, 7, 12]
    assert expected(cmds[1].answer).status == 201
    assert cmds[0].answer == cmds[2].answer == ""


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ('{"id": ..., "name": "Support"}', {"id": "x", "name": "Support"}),
        ('{"name": "Support", ...}', {"id": "x", "name": "Support"}),
        ('{"content": "You said: ...", ...}', {"content": "You said: hi", "id": 1}),
        ('[..., {"a": 1}, ...]', [{"a": 0}, {"a": 1}, {"a": 2}]),
        ('["...", "..."]', ["a", "b"]),
        ('{"n": 0.5, "ok": true, "x": null}', {"n": 0.5, "ok": True, "x": None}),
    ],
)
def test_patterns_that_fit(pattern: str, value: object) -> None:
    assert mismatch(expected(pattern).body, value) is None


@pytest.mark.parametrize(
    ("pattern", "value", "why"),
    [
        ('{"id": ...}', {"id": "x", "name": "Support"}, "members the page does not list"),
        ('{"name": "Support", ...}', {"id": "x"}, "no member 'name'"),
        ('{"name": "Support", ...}', {"name": "Chat"}, "'Chat' is not 'Support'"),
        ('["...", "..."]', ["a"], "the page lists more"),
        ('["..."]', ["a", "b"], "1 elements more"),
        ('{"ok": true}', {"ok": 1}, "1 is not True"),
        ('{"content": "You said: ..."}', {"content": "I said: hi"}, "does not fit"),
        ('[..., {"a": 1}, ...]', [{"a": 0}, {"a": 2}], "is not 1"),
    ],
)
def test_patterns_that_do_not_fit(pattern: str, value: object, why: str) -> None:
    found = mismatch(expected(pattern).body, value)
    assert found is not None
    assert why in found


def outcome(answer: str, body: str, statuses: list[int], exit_status: int = 0) -> Outcome:
    return Outcome(Command(1, 1, "curl", answer), exit_status, statuses, body)


def test_status_exit_and_event_streams_are_checked() -> None:
    stream = (
        'id: 1\nevent: meta\ndata: {"runId": "r"}\n\n'
        'id: 2\nevent: token\ndata: {"delta": "Hi"}\n\n'
        'id: 3\nevent: done\ndata: {"ok": true, "content": "Hi"}\n\n'
    )
    events = '200 event: meta ... event: done data: {"ok": true, ...}'
    assert check(outcome(events, stream, [200])) is None
    assert check(outcome("200 event: meta event: done", stream, [200])) is not None
    assert check(outcome("200 event: meta ... event: error", stream, [200])) is not None
    assert check(outcome('201 {"a": 1}', '{"a": 1}', [200])) == "status 200, the page says 201"
    assert check(outcome("", "{}", [401])) is not None  # no answer given: 2xx wanted
    assert check(outcome("", "{}", [401, 200])) is not None  # every curl of the command
    assert check(outcome("", "", [], exit_status=1)) == "exited with 1"


def test_prose_under_a_command_is_refused() -> None:
    with pytest.raises(PageError, match="move prose above the command"):
        expected("the id from the answer")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("AGENT=6f1c...", "a placeholder nothing fills"),
        ("curl -s https://api.example.net/x", "neither loopback nor in the host table"),
        ("curl -s http://127.0.0.1:8000@evil.example/x", "neither loopback nor in the host"),
        ("pip install ./clients/python", "does not run `pip`"),
        ("make run", "does not run `make`"),
    ],
)
def test_commands_the_harness_refuses(text: str, why: str) -> None:
    with pytest.raises(PageError, match=why):
        prepare(Command(1, 1, text), [], set())


def test_the_table_maps_page_hosts_to_loopback() -> None:
    table = [("https://example.com", "http://127.0.0.1:1234"), ("ask_...", "ask_real")]
    cmd = Command(1, 1, "KEY=ask_...; curl -s https://example.com/hooks")
    assert prepare(cmd, table, set()) == "KEY=ask_real; curl -s http://127.0.0.1:1234/hooks"


def test_a_session_keeps_its_variables_and_records_each_curl(tmp_path: Path) -> None:
    cmds = commands(
        """```sh
X=4
echo $((X + 1)) > out.txt
curl -s http://127.0.0.1:1/closed
python3 -c 'import sys; sys.exit(3)'
```"""
    )
    outcomes, _ = run(cmds, [], cwd=tmp_path)
    assert (tmp_path / "out.txt").read_text() == "5\n"
    assert [o.exit for o in outcomes] == [0, 0, 7, 3]  # curl: 7, could not connect
    assert outcomes[2].statuses == [0]
