"""Model parameters' checks (entities/model_params.py): their bounds, checked when an
agent's defaults are saved and when a send gives its own, and what each provider
family cannot honour, checked once a send's model is known (before its run is
stored, so a refusal is a 422 and nothing else). Nothing here reads or writes.

What the families do (docs/models.md, "Model parameters"):

- ``alpha`` (the Anthropic Messages API): temperature only up to 1 (its range is 0
  to 1), and not with ``topP`` (its current models refuse a request that alters
  both: "use only one"); no stop text of only whitespace (the API refuses one:
  "each stop sequence must contain non-whitespace"); structured output as
  ``output_config.format``.
- ``beta`` (the OpenAI Chat Completions API): everything, under OpenAI's names.
- ``local`` (the built-in offline model): ``maxOutputTokens`` cuts its reply and
  ``stop`` ends it where a stop text first appears; temperature and topP are
  accepted and change nothing (its reply is deterministic); it cannot follow a JSON
  Schema, so ``responseFormat`` ``json_schema`` is refused.

A family not named here (a test's fake) refuses nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import jsonschema
import msgspec

from agentsvc_core import json_schema
from agentsvc_core.entities.model_params import JsonSchemaFormat, ModelParams
from agentsvc_core.errors import InvalidInput
from agentsvc_core.rules import check_text

__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "MAX_FORMAT_NAME",
    "MAX_OUTPUT_TOKENS",
    "MAX_SCHEMA_BYTES",
    "MAX_STOP",
    "MAX_STOP_CHARS",
    "MAX_TEMPERATURE",
    "FamilyLimits",
    "check_for_family",
    "check_params",
    "limits_of",
]

MAX_TEMPERATURE = 2.0
MAX_OUTPUT_TOKENS = 128_000
DEFAULT_OUTPUT_TOKENS = 4096  # a reply's cap when none is given
MAX_STOP = 4
MAX_STOP_CHARS = 200
MAX_SCHEMA_BYTES = 32 * 1024
MAX_FORMAT_NAME = 64
_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_encode = msgspec.json.Encoder().encode


class FamilyLimits(msgspec.Struct, frozen=True, kw_only=True):
    """What one provider family honours of the parameters."""

    max_temperature: float = MAX_TEMPERATURE
    one_sampler: bool = False  # temperature and topP not both
    blank_stop: bool = True  # a stop text of only whitespace ("\n\n")
    structured: bool = True  # follows a JSON Schema (responseFormat json_schema)


FAMILIES: dict[str, FamilyLimits] = {
    "alpha": FamilyLimits(max_temperature=1.0, one_sampler=True, blank_stop=False),
    "beta": FamilyLimits(),
    "local": FamilyLimits(structured=False),
}


def _between(field: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidInput(field, f"must be between {low:g} and {high:g}")


def _named(field: str) -> Callable[[str], str]:
    """How an error names a parameter: ``top_p`` alone (a send's field, made camelCase
    by the web layer) or ``model_params.topP`` (within ``field``, as clients write it)."""
    if not field:
        return lambda name: name
    return lambda name: f"{field}.{_camel(name)}"


def _camel(name: str) -> str:
    first, *others = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in others)


def check_params(params: ModelParams, field: str = "") -> ModelParams:
    """Every bound of ``params`` (``InvalidInput`` naming the parameter, within
    ``field`` when given); the schema must be a valid JSON Schema."""
    at = _named(field)
    _between(at("temperature"), params.temperature, 0.0, MAX_TEMPERATURE)
    _between(at("top_p"), params.top_p, 0.0, 1.0)
    cap = params.max_output_tokens
    if cap is not None and not 1 <= cap <= MAX_OUTPUT_TOKENS:
        raise InvalidInput(at("max_output_tokens"), f"must be between 1 and {MAX_OUTPUT_TOKENS}")
    if params.stop is not None:
        if len(params.stop) > MAX_STOP:
            raise InvalidInput(at("stop"), f"at most {MAX_STOP} stop texts")
        for text in params.stop:
            check_text(at("stop"), text, max_len=MAX_STOP_CHARS)
            if not text:
                raise InvalidInput(at("stop"), "a stop text must not be empty")
    rf = params.response_format
    if rf is not None:
        if (rf.type == "json_schema") != (rf.json_schema is not None):
            raise InvalidInput(
                at("response_format"),
                "jsonSchema is required with type json_schema, and only then",
            )
        if rf.json_schema is not None:
            _check_format(at("response_format") + ".jsonSchema", rf.json_schema)
    return params


def _check_format(field: str, spec: JsonSchemaFormat) -> None:
    if not _FORMAT_NAME.fullmatch(spec.name):
        raise InvalidInput(f"{field}.name", f"1 to {MAX_FORMAT_NAME} letters, digits, '_' or '-'")
    schema = spec.schema
    if len(_encode(schema)) > MAX_SCHEMA_BYTES:
        raise InvalidInput(f"{field}.schema", f"at most {MAX_SCHEMA_BYTES} bytes of JSON")
    try:
        json_schema.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidInput(f"{field}.schema", f"not a valid JSON Schema: {exc.message}") from None


def limits_of(family: str) -> FamilyLimits:
    """What ``family`` honours (a family not named here: everything)."""
    return FAMILIES.get(family, _ANY)


_ANY = FamilyLimits()


def check_for_family(family: str, params: ModelParams) -> None:
    """``InvalidInput`` (a 422) for a parameter the family cannot honour."""
    limits = limits_of(family)
    t = params.temperature
    if t is not None and t > limits.max_temperature:
        raise InvalidInput(
            "temperature",
            f"the {family} family's models take a temperature between 0 and"
            f" {limits.max_temperature:g}",
        )
    if limits.one_sampler and t is not None and params.top_p is not None:
        raise InvalidInput(
            "top_p",
            f"the {family} family's models take temperature or topP, not both:"
            " give only one (on the send or in the agent's modelParams)",
        )
    if not limits.blank_stop and any(not s.strip() for s in params.stop or ()):
        raise InvalidInput(
            "stop",
            f"the {family} family's models take no stop text of only whitespace"
            " (such as a blank line)",
        )
    if not limits.structured and params.structured() is not None:
        raise InvalidInput(
            "response_format",
            f"the {family} model cannot follow a JSON Schema: use a model of the alpha or"
            ' beta family, or responseFormat {"type": "text"}',
        )
