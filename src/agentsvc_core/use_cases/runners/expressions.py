"""Runner steps' expressions: JMESPath over the run's context, never ``eval``.

The context of a step is ``{"input": <the run's input>, "steps": {<step id>:
{"status": ..., "output": ...}}}`` (the steps run so far). Expressions are used
three ways: an ``input_mapping`` (``{name: expression}``) builds a step's input
object; a ``condition`` step's ``expression`` is judged truthy or not (JMESPath's
truth: false, null, "", [] and {} are false); an agent step's ``prompt`` fills
``{{ expression }}`` placeholders. A leading ``$.`` or ``$`` (JSONPath's root,
which many pipeline tools write) is dropped, so ``$.input.topic`` and
``input.topic`` are the same.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jmespath
import msgspec
from jmespath import exceptions as jp_errors
from jmespath.parser import ParsedResult

from agentsvc_core.entities.runner import RunnerRun
from agentsvc_core.errors import InvalidInput

__all__ = [
    "MAX_EXPRESSION",
    "compile_expression",
    "context_of",
    "evaluate",
    "json_or_none",
    "render",
    "template_parts",
    "truthy",
]

MAX_EXPRESSION = 2000
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_enc = msgspec.json.Encoder()


def context_of(run: RunnerRun) -> dict[str, Any]:
    """What the run's expressions see: its input and the steps run so far."""
    return {
        "input": run.input,
        "steps": {
            s.step_id: {"status": s.status, "output": s.output}
            for s in run.steps
            if s.status != "pending"
        },
    }


def json_or_none(text: str) -> Any:
    """A step's text as JSON when it is a JSON object or array (what expressions
    read as ``output.json``), else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return None


def _plain(expression: str) -> str:
    text = expression.strip()
    if text.startswith("$."):
        return text[2:]
    if text == "$":
        return "@"
    return text


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> ParsedResult:
    return jmespath.compile(text)


def compile_expression(field: str, expression: str) -> ParsedResult:
    """The parsed expression; ``InvalidInput`` naming ``field`` when it is not one."""
    if not expression.strip():
        raise InvalidInput(field, "must not be empty")
    if len(expression) > MAX_EXPRESSION:
        raise InvalidInput(field, f"at most {MAX_EXPRESSION} characters")
    try:
        return _compiled(_plain(expression))
    except jp_errors.JMESPathError as exc:
        raise InvalidInput(
            field, f"not a JMESPath expression: {str(exc).splitlines()[0]}"
        ) from None


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """The expression's value over ``context``. Raises ``ValueError`` with a
    readable reason when it cannot be evaluated (a function given the wrong type)."""
    try:
        return _compiled(_plain(expression)).search(context)
    except jp_errors.JMESPathError as exc:
        raise ValueError(f"{expression!r}: {str(exc).splitlines()[0]}") from None


def truthy(value: Any) -> bool:
    """JMESPath's truth: false, null and empty strings, arrays and objects are
    false; everything else (numbers, 0 too) is true."""
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)):
        return len(value) > 0
    return True


def template_parts(template: str) -> list[str]:
    """The expressions of a template's ``{{ ... }}`` placeholders."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(template)]


def render(template: str, context: dict[str, Any]) -> str:
    """The template with each placeholder replaced by its value: strings as they
    are, null as nothing, anything else as JSON."""

    def fill(m: re.Match[str]) -> str:
        value = evaluate(m.group(1), context)
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        return _enc.encode(value).decode()

    return _PLACEHOLDER.sub(fill, template)
