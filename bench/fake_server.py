"""The scripted fake provider (``tests.fakes.providers``) in a process of its own.

``python -m bench.fake_server --tokens 50 [--token-delay S] [--first-token-delay S]``
prints ``URL http://127.0.0.1:PORT`` once serving and runs until SIGTERM. Every request
gets the same reply: ``--tokens`` text deltas (`` t0``, `` t1``, ...) in the OpenAI Chat
Completions stream format (the service's ``beta`` family). Requests are counted, not
kept (the test fake records every body, which would grow for the whole run).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.providers import FakeProvider, RecordedRequest, Reply

API_KEY = "sk-bench-0123456789abcdef"


def tokens(n: int) -> list[str]:
    return [f" t{i}" for i in range(n)]


class CountingFake(FakeProvider):
    """A fake that forgets requests once counted."""

    def __init__(self) -> None:
        super().__init__("beta", api_key=API_KEY)
        self.count = 0

    def _record(self, request: RecordedRequest) -> None:
        self.count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--token-delay", type=float, default=0.0)
    parser.add_argument("--first-token-delay", type=float, default=0.0)
    args = parser.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    fake = CountingFake()
    fake.default = Reply(
        tokens=tokens(args.tokens),
        token_delay=args.token_delay,
        first_token_delay=args.first_token_delay,
    )
    with fake:
        print(f"URL {fake.base_url}", flush=True)
        while not stop.wait(1.0):
            pass
    print(f"served {fake.count} requests", flush=True)


if __name__ == "__main__":
    main()
