"""Log lines: one format for every logger of the process, each naming its request.

``REQUEST_ID`` is a context variable the request layer (``agentsvc_web.observe``)
sets for the time it serves a request. Tasks started while serving it (the reply
of a send) copy the context, so their lines name the request that started them,
even after its answer has ended. ``RequestIdFilter``, on the handler, puts the id
on every record as ``request_id`` (``None`` outside a request).

``AGENTSVC_LOG_FORMAT`` chooses the format of the one handler on the root logger
(standard error):

- ``text`` (default): ``LEVEL logger: message [request_id=...]``;
- ``json``: one JSON object per line: ``time`` (UTC, ISO 8601), ``level``,
  ``logger``, ``message``, ``request_id`` and, when there is one, ``exception``
  (the formatted traceback). uvicorn's loggers (``uvicorn.error``, the access log
  ``uvicorn.access``) have no handlers of their own (``cli`` runs uvicorn with
  ``log_config=None``) and reach the same handler, and Python's warnings are
  logged too, so nothing else is written to standard error.

``configure_logging`` installs the handler only on a root logger that has none
(or has ours: then it changes the format): a host that configured logging itself
(pytest, an embedding application) keeps its handlers.
"""

from __future__ import annotations

import logging
import sys
import time
from contextvars import ContextVar
from typing import Any, TextIO

import msgspec

from agentsvc_web.access_log import redact_access_log

__all__ = [
    "REQUEST_ID",
    "JsonFormatter",
    "RequestIdFilter",
    "TextFormatter",
    "configure_logging",
]

REQUEST_ID: ContextVar[str | None] = ContextVar("agentsvc_request_id", default=None)

_encoder = msgspec.json.Encoder()


class RequestIdFilter(logging.Filter):
    """Puts the current request's id on every record (``record.request_id``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message``, then `` [request_id=...]`` inside a request."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = getattr(record, "request_id", None)
        if rid is None:
            return line
        head, newline, trace = line.partition("\n")  # the id on the first line
        return f"{head} [request_id={rid}]{newline}{trace}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback is a field)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return _encoder.encode(entry).decode()


def _iso(created: float) -> str:
    """``2026-01-02T03:04:05.678Z``."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{whole}.{int(created % 1 * 1000):03d}Z"


class _Handler(logging.StreamHandler[TextIO]):
    """The one handler this module installs (recognised by its class)."""


def configure_logging(level: str, fmt: str = "text", stream: TextIO | None = None) -> None:
    """Our handler on the root logger (see the module docstring); the level of the
    ``agentsvc`` loggers; the access log's redaction. Idempotent."""
    root = logging.getLogger()
    ours = next((h for h in root.handlers if isinstance(h, _Handler)), None)
    if ours is None and not root.handlers:
        ours = _Handler(stream or sys.stderr)
        ours.addFilter(RequestIdFilter())
        root.addHandler(ours)
    if ours is not None:
        ours.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
        if fmt == "json":
            logging.captureWarnings(True)  # "py.warnings" lines, as JSON
    logging.getLogger("agentsvc").setLevel(level)
    # httpx logs each request's URL at INFO, and some URLs carry a secret (the
    # Telegram Bot API's token is in its path): never below WARNING, whatever
    # level the root logger is given
    logging.getLogger("httpx").setLevel(logging.WARNING)
    redact_access_log()
