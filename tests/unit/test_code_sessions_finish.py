"""What a code session hands back (use_cases/code_sessions/finish.py): the
``sha1sum`` listing read, the ignored files, the changed files against the
checked-out hashes, and the session's trace record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from agentsvc_core.use_cases.code_sessions.finish import (
    changed_files,
    ignored,
    parse_hashes,
    session_trace,
    sha1,
    span,
)
from tests.unit.code_sessions_world import FILES, call, step, world
from tests.unit.turn_world import WHO

A, B = "a" * 40, "b" * 40
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_sha1_is_the_files_git_free_hash() -> None:
    assert sha1(b"") == "da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_parse_hashes_reads_sha1sums_lines_and_skips_escaped_or_broken_ones() -> None:
    output = "\n".join(
        [
            f"{A}  ./app.py",
            f"{B}  ./dir/x y.txt",
            f"\\{A}  ./we\\nird",  # sha1sum escaped the name
            f"{A[:39]}  ./short",
            f"{A} ./one-space",
            "",
            f"{B}  ./two  spaces",  # read past the lines left out
        ]
    )
    assert parse_hashes(output) == {"app.py": A, "dir/x y.txt": B, "two  spaces": B}


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("build/out.js", ["build/"], True),
        ("build", ["build/"], False),  # a file named like the folder pattern
        ("src/build/x", ["build/"], True),
        ("src/app.pyc", ["*.pyc"], True),
        ("src/app.py", ["*.pyc"], False),
        ("docs/gen/a.md", ["docs/gen"], True),  # anchored to the root
        ("docs/gen", ["docs/gen"], True),
        ("other/docs/gen/a.md", ["docs/gen"], False),
        ("docs/general.md", ["docs/gen"], False),
        ("a/b.log", ["/a/*.log"], True),
        ("report.DOCX", ["*.DOCX"], True),  # only slashes are cut from a pattern's ends
        ("x.pyc", ["docs/gen", "*.pyc"], True),  # past an anchored pattern that misses
        ("keep.txt", [], False),
    ],
)
def test_ignored(path: str, patterns: list[str], expected: bool) -> None:
    assert ignored(path, patterns) is expected


def test_a_span_is_named_timed_and_ids_by_its_name_and_times() -> None:
    x = span("git push", "tool", T0, T0 + timedelta(seconds=1.5), attributes={"k": 1})
    assert x.status == "ok"
    assert x.duration_ms == 1500
    assert x.attributes == {"k": 1}
    assert x.parent_span_id is None
    assert len(x.span_id) == 16
    assert x.span_id == span("git push", "tool", T0, T0 + timedelta(seconds=1.5)).span_id
    assert x.span_id != span("git fetch", "tool", T0, T0 + timedelta(seconds=1.5)).span_id
    bad = span("exec", "tool", T0, T0 - timedelta(seconds=1), ok=False, error="boom")
    assert (bad.status, bad.error, bad.duration_ms, bad.attributes) == ("error", "boom", 0.0, {})


async def test_changed_files_hands_back_new_changed_and_deleted_files_not_ignored_ones() -> None:
    w = world(
        step(
            call(
                "exec",
                command=(
                    "printf 'out/\\n\\n#*#\\n!keep\\n\\377\\n' > .gitignore && mkdir -p out"
                    " && echo x > out/a && echo new > new.txt && rm README.md"
                    " && echo changed >> app.py && echo e > '#app.py#' && echo k > '!keep'"
                    " && mkdir __pycache__ && echo c > __pycache__/app.cpython-311.pyc"
                    " && head -c 2000000 /dev/zero > big.bin"
                ),
            )
        ),
        step(call("ask_user", question="?")),
    )
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.work.sandbox_ref is not None
    spec = w.engine._creating.spec(s)
    await w.sandbox.start(spec, resume=s.work.sandbox_ref)
    changes = await changed_files(w.sandbox, s.work.sandbox_ref, spec, s.work.hashes)
    # a comment (an editor's `#app.py#` under `#*#`) and a negation are no patterns; a
    # .gitignore that is not UTF-8 is read still; the usual by-products stay ignored
    # beside its patterns; a large file is handed back whole
    assert sorted(changes) == [
        "!keep",
        "#app.py#",
        ".gitignore",
        "README.md",
        "app.py",
        "big.bin",
        "new.txt",
    ]
    assert changes["big.bin"] == bytes(2_000_000)
    assert changes["README.md"] is None
    assert changes["new.txt"] == b"new\n"
    assert changes["app.py"] == FILES["app.py"] + b"changed\n"


async def test_a_finished_sessions_trace() -> None:
    w = world(step(call("read_file", "r1", path="nowhere")), step("done"))
    s = await w.start("trace me")
    await w.drain()
    s = await w.get(s.id)
    keep = T0 + timedelta(days=9)
    record = session_trace(s, keep)
    summary = record.summary
    assert record.keep_until == keep
    assert (summary.kind, summary.status, summary.run_status, summary.error) == (
        "code_session",
        "ok",
        "finished",
        None,
    )
    assert summary.id == s.work.trace_id
    assert summary.org_id == WHO.org_id
    assert summary.name == s.title
    assert summary.model == "local"
    assert summary.model_calls == 2
    assert summary.tool_calls == 2  # the fetch and the read
    assert summary.tool_errors == 1
    assert summary.input_tokens == s.usage.input_tokens == 20
    assert summary.output_tokens == 20
    root, *children = record.spans
    assert record.root_span_id == root.span_id
    assert root.parent_span_id is None
    assert root.kind == "chain"
    assert root.status == "ok"
    assert root.error is None
    assert root.attributes == {
        "agentsvc.code_session.id": str(s.id),
        "agentsvc.code_agent.id": str(s.code_agent_id),
        "agentsvc.code_session.status": "finished",
    }
    assert root.cost_usd == s.usage.cost_usd
    assert [c.parent_span_id for c in children] == [root.span_id] * len(children)
    assert len({c.span_id for c in record.spans}) == len(record.spans)
    assert s.work.started_at is not None
    assert s.work.ended_at is not None
    assert root.started_at == s.work.started_at
    assert summary.duration_ms == int((s.work.ended_at - s.work.started_at).total_seconds() * 1000)
    failed = msgspec.structs.replace(s, status="error", error="it broke")
    bad = session_trace(failed, keep)
    assert (bad.summary.status, bad.summary.error) == ("error", "ERROR")
    assert (bad.spans[0].status, bad.spans[0].error) == ("error", "it broke")
    cancelled = msgspec.structs.replace(s, status="cancelled", error=None)
    assert session_trace(cancelled, keep).spans[0].error == "cancelled"


async def test_a_trace_counts_each_kind_of_span_and_bounds_its_names() -> None:
    w = world()
    t1 = T0 + timedelta(seconds=1.5)

    def child(name: str, kind: str, ok: bool = True) -> Any:
        return span(name, kind, T0, t1, ok=ok)

    s = await w.start()
    work = msgspec.structs.replace(
        s.work,
        started_at=T0,
        ended_at=t1,
        spans=(
            child("chat local", "llm"),
            child("git fetch", "tool"),
            child("exec", "tool", ok=False),
            child("read_file", "tool"),
        ),
    )
    s = msgspec.structs.replace(s, title="t" * 250, work=work, updated_at=T0 + timedelta(hours=1))
    record = session_trace(s, T0)
    summary = record.summary
    assert (summary.model_calls, summary.tool_calls, summary.tool_errors) == (1, 3, 1)
    assert (summary.started_at, summary.ended_at, summary.duration_ms) == (T0, t1, 1500)
    assert summary.name == "t" * 200
    assert record.spans[0].name == "code_session " + "t" * 60
    assert record.root_span_id == sha1(f"code-session:{s.id}".encode())[:16]
    assert [len(x.span_id) for x in record.spans] == [16] * 5
    # a session not ended yet: its trace ends at its last change
    going = msgspec.structs.replace(s, work=msgspec.structs.replace(work, ended_at=None))
    assert session_trace(going, T0).summary.ended_at == T0 + timedelta(hours=1)
