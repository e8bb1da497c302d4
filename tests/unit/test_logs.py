"""Log lines (agentsvc_web/logs.py): JSON and text formats, the request id."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from agentsvc_web.logs import REQUEST_ID, JsonFormatter, TextFormatter, configure_logging


@contextmanager
def bare_root() -> Iterator[logging.Logger]:
    """The root logger without pytest's handlers, as in a fresh process (entered
    in the test's body: pytest adds its handlers after the fixtures' setup)."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers = []
    try:
        yield root
    finally:
        root.handlers = saved
        root.setLevel(level)
        logging.captureWarnings(False)


def test_json_lines_carry_the_fields_and_the_request_id() -> None:
    out = io.StringIO()
    with bare_root():
        configure_logging("INFO", "json", stream=out)
        log = logging.getLogger("agentsvc.test")
        log.info("outside %s", "a request")
        token = REQUEST_ID.set("req-7")
        try:
            log.warning("inside\nwith a newline")
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("failed")
        finally:
            REQUEST_ID.reset(token)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # one line per record, tracebacks included
    first, second, third = (json.loads(line) for line in lines)
    assert first["message"] == "outside a request"
    assert first["request_id"] is None
    assert first["level"] == "INFO"
    assert first["logger"] == "agentsvc.test"
    assert first["time"].endswith("Z")
    assert second["message"] == "inside\nwith a newline"
    assert second["request_id"] == "req-7"
    assert "exception" not in second
    assert third["request_id"] == "req-7"
    assert "ValueError: boom" in third["exception"]


def test_uvicorn_lines_go_through_the_same_handler() -> None:
    """As ``agentsvc serve`` runs it (``log_config=None``): uvicorn's loggers have
    no handlers and propagate. (A uvicorn another test started with its default
    configuration leaves ``uvicorn`` with a handler and no propagation: undone here.)"""
    out = io.StringIO()
    uvicorn_logger = logging.getLogger("uvicorn")
    saved = uvicorn_logger.handlers[:], uvicorn_logger.propagate
    uvicorn_logger.handlers, uvicorn_logger.propagate = [], True
    try:
        with bare_root():
            configure_logging("INFO", "json", stream=out)
            logging.getLogger("uvicorn.error").warning("from uvicorn")
    finally:
        uvicorn_logger.handlers, uvicorn_logger.propagate = saved
    assert json.loads(out.getvalue())["logger"] == "uvicorn.error"


def test_configuring_again_changes_the_format_not_the_handlers() -> None:
    out = io.StringIO()
    with bare_root() as root:
        configure_logging("INFO", "json", stream=out)
        configure_logging("INFO", "text")
        assert len(root.handlers) == 1
        token = REQUEST_ID.set("abc")
        try:
            logging.getLogger("agentsvc.x").warning("hello")
        finally:
            REQUEST_ID.reset(token)
    assert out.getvalue() == "WARNING agentsvc.x: hello [request_id=abc]\n"


def test_a_host_with_its_own_handlers_keeps_them() -> None:
    root = logging.getLogger()
    before = root.handlers[:]
    configure_logging("INFO", "json")
    assert root.handlers == before


def test_text_format_puts_the_id_on_the_first_line() -> None:
    record = logging.LogRecord("agentsvc", logging.ERROR, __file__, 1, "bad", None, None)
    record.request_id = "r1"
    record.exc_text = "Traceback...\nValueError"
    assert (
        TextFormatter().format(record)
        == "ERROR agentsvc: bad [request_id=r1]\nTraceback...\nValueError"
    )
    record.request_id = None
    assert TextFormatter().format(record).startswith("ERROR agentsvc: bad\n")
    assert json.loads(JsonFormatter().format(record))["exception"] == "Traceback...\nValueError"


def test_httpx_request_lines_stay_out_even_with_the_root_logger_at_info() -> None:
    """httpx logs each request's URL at INFO; a Telegram URL holds the bot token."""
    out = io.StringIO()
    with bare_root() as root:
        configure_logging("DEBUG", "text", stream=out)
        root.setLevel(logging.INFO)
        logging.getLogger("httpx").info("HTTP Request: POST https://api.telegram.org/bot123:ABC/x")
        logging.getLogger("httpx").warning("a warning still shows")
    assert "bot123:ABC" not in out.getvalue()
    assert "a warning still shows" in out.getvalue()
