"""The five-line example of the client's README and of docs/client-guide.md runs
against the real service and streams the reply."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentsvc_client import Client
from tests.client.conftest import KEY
from tests.e2e.service import Service

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["clients/python/README.md", "docs/client-guide.md"])
def test_the_five_lines_stream_a_reply(
    doc: str, memory_service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / doc).read_text()
    example = re.search(r"```python\n(from agentsvc_client import Client.*?)```", text, re.S)
    assert example is not None
    code = example.group(1)
    assert len([line for line in code.splitlines() if line.strip()]) == 5
    code = code.replace("http://127.0.0.1:8000", memory_service.url).replace("ask_...", KEY)
    exec(compile(code, doc, "exec"), {})  # noqa: S102 - the docs' own example
    assert capsys.readouterr().out.startswith('You said: "Hello!". This is message 1')


def test_the_guides_event_loop_runs(
    memory_service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (ROOT / "docs/client-guide.md").read_text()
    example = re.search(r"```python\n(from agentsvc_client import Done.*?)```", text, re.S)
    assert example is not None
    with Client(memory_service.url, KEY) as client:
        thread = client.threads.create(agent_id=client.agents.create(name="Loop").id)
        code = compile(example.group(1), "client-guide", "exec")
        exec(code, {"client": client, "thread": thread})  # noqa: S102 - the guide's own example
    out = capsys.readouterr().out
    assert out.startswith('You said: "What time is it in Lyon?"')
    assert "Usage(input_tokens=" in out
