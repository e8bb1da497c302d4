"""What a code session hands back: the files it changed (``changed_files``: their
hashes in the sandbox, by ``sha1sum`` run there, against those of the files as
checked out), and its trace record (``session_trace``).

Files the repository ignores are not handed back: a root ``.gitignore``'s
patterns (plain patterns, a trailing ``/`` for folders; ``!`` negations are not
read) and the usual by-products (``__pycache__``, ``.pytest_cache``,
``node_modules``, ``*.pyc``)."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec

from agentsvc_core.entities import StoredSpan, TraceRecord, TraceSummary
from agentsvc_core.entities.code_session import CodeSession
from agentsvc_core.ports.sandboxes import ExecOutput, SandboxProvider, SandboxSpec

__all__ = [
    "DEFAULT_IGNORED",
    "HASH_COMMAND",
    "changed_files",
    "ignored",
    "parse_hashes",
    "session_trace",
    "sha1",
    "span",
]

HASH_COMMAND = "find . -type f -not -path './.git/*' -print0 | xargs -0 -r sha1sum"
HASH_OUTPUT_MAX = 8_000_000
DEFAULT_IGNORED = ("__pycache__/", ".pytest_cache/", "node_modules/", "*.pyc", ".git/")


def sha1(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def parse_hashes(output: str) -> dict[str, str]:
    """``sha1sum``'s lines (``<hash>  ./<path>``) as path -> hash; a line it
    escaped (a name with a newline or a backslash) is left out."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        digest, sep, path = line.partition("  ")
        if not sep or len(digest) != 40 or line.startswith("\\"):
            continue
        found[path.removeprefix("./")] = digest
    return found


def _patterns(gitignore: str) -> list[str]:
    lines = (line.strip() for line in gitignore.splitlines())
    return [p for p in lines if p and not p.startswith(("#", "!"))]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether ``path`` (``/``-separated, relative) falls under one of ``patterns``."""
    parts = path.split("/")
    for pattern in patterns:
        folder = pattern.endswith("/")
        bare = pattern.strip("/")
        if "/" in bare:  # anchored to the root
            if fnmatch.fnmatch(path, bare) or path.startswith(bare + "/"):
                return True
            continue
        names = parts[:-1] if folder else parts
        if any(fnmatch.fnmatch(name, bare) for name in names):
            return True
    return False


async def changed_files(
    provider: SandboxProvider,
    ref: str,
    spec: SandboxSpec,
    before: Mapping[str, str],
) -> dict[str, bytes | None]:
    """What differs from ``before`` (path -> sha1 as checked out): a changed or
    new file's content, or None for a file deleted. Raises ``ValueError`` when the
    list of files cannot be read whole."""
    output: list[str] = []
    code: int | None = None
    stream = provider.exec(ref, spec, HASH_COMMAND, timeout_s=120.0, max_output=HASH_OUTPUT_MAX)
    async for item in stream:
        if isinstance(item, ExecOutput):
            if item.stream == "stdout":
                output.append(item.data)
        elif item.truncated or item.timed_out:
            raise ValueError("the repository has too many files to compare")
        else:
            code = item.exit_code
    if code != 0:
        raise ValueError("the files could not be listed in the sandbox")
    now = parse_hashes("".join(output))
    patterns = list(DEFAULT_IGNORED)
    if ".gitignore" in now:
        text = (await provider.read_file(ref, ".gitignore")).decode("utf-8", "replace")
        patterns += _patterns(text)
    changes: dict[str, bytes | None] = {}
    for path, digest in sorted(now.items()):
        if before.get(path) != digest and not ignored(path, patterns):
            changes[path] = await provider.read_file(ref, path, max_bytes=50_000_000)
    for path in sorted(before):
        if path not in now:
            changes[path] = None
    return changes


def span(
    name: str,
    kind: Any,
    started: datetime,
    ended: datetime,
    *,
    ok: bool = True,
    error: str | None = None,
    attributes: dict[str, Any] | None = None,
    **fields: Any,
) -> StoredSpan:
    return StoredSpan(
        span_id=sha1(f"{name}:{started.isoformat()}:{ended.isoformat()}".encode())[:16],
        parent_span_id=None,
        name=name,
        kind=kind,
        status="ok" if ok else "error",
        started_at=started,
        duration_ms=max(0.0, (ended - started).total_seconds() * 1000),
        attributes=attributes or {},
        error=error,
        **fields,
    )


def session_trace(s: CodeSession, keep_until: datetime) -> TraceRecord:
    """The session's trace: its own span (kind ``chain``) over the model calls,
    commands and git operations it recorded."""
    work = s.work
    started = work.started_at or s.created_at
    ended = work.ended_at or s.updated_at
    ok = s.status == "finished"
    root = sha1(f"code-session:{s.id}".encode())[:16]
    spans = [
        span(
            f"code_session {s.title[:60]}",
            "chain",
            started,
            ended,
            ok=ok,
            error=None if ok else (s.error or s.status),
            attributes={
                "agentsvc.code_session.id": str(s.id),
                "agentsvc.code_agent.id": str(s.code_agent_id),
                "agentsvc.code_session.status": s.status,
            },
            cost_usd=s.usage.cost_usd,
        )
    ]
    spans[0] = _with_id(spans[0], root, None)
    for i, child in enumerate(work.spans):
        spans.append(_with_id(child, sha1(f"{root}:{i}".encode())[:16], root))
    llm = [x for x in work.spans if x.kind == "llm"]
    summary = TraceSummary(
        id=work.trace_id,
        org_id=s.org_id,
        kind="code_session",
        name=s.title[:200],
        status="ok" if ok else "error",
        run_status=s.status,
        started_at=started,
        ended_at=ended,
        duration_ms=int(max(0.0, (ended - started).total_seconds() * 1000)),
        model=work.model,
        input_tokens=s.usage.input_tokens,
        output_tokens=s.usage.output_tokens,
        cost_usd=s.usage.cost_usd,
        model_calls=len(llm),
        tool_calls=sum(1 for x in work.spans if x.kind == "tool"),
        tool_errors=sum(1 for x in work.spans if x.kind == "tool" and x.status == "error"),
        error=None if ok else s.status.upper(),
    )
    return TraceRecord(
        summary=summary, root_span_id=root, spans=spans, evaluations=[], keep_until=keep_until
    )


def _with_id(x: StoredSpan, span_id: str, parent: str | None) -> StoredSpan:
    return msgspec.structs.replace(x, span_id=span_id, parent_span_id=parent)
