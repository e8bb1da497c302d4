"""A minimal agentsvc chat client: create an agent and a thread, then stream replies.

    python docs/examples/chat.py http://127.0.0.1:8000 ask_... "Hello!" "And again?"

Needs only httpx (pip install httpx).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import httpx


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    """(event name, data) for each Server-Sent Event; comment lines are keep-alives."""
    event, data = "message", []
    for line in lines:
        if line == "":  # a blank line ends an event
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def main(base: str, key: str, messages: list[str]) -> None:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as c:
        agent = c.post("/api/agents", json={"name": "Guide", "stablePreamble": "Be brief."}).json()
        thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
        for text in messages:
            print(f"> {text}")
            with c.stream(
                "POST", f"/api/threads/{thread['id']}/messages", json={"content": text}
            ) as r:
                if r.status_code != 200:  # 4xx errors come before the stream, as JSON
                    r.read()
                    raise SystemExit(f"{r.status_code}: {r.json()}")
                for name, data in sse_events(r.iter_lines()):
                    if name == "token":
                        print(data["delta"], end="", flush=True)
                    elif name == "done":
                        print(
                            f"\n[done: message {data.get('messageId')}, usage {data.get('usage')}]"
                        )
                    elif name == "error":
                        print(f"\n[error {data['code']}: {data.get('detail')}]")
        history = c.get(f"/api/threads/{thread['id']}/messages").json()
        print(f"history: {history['total']} messages")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:] or ["Hello!"])
