"""Model parameters over HTTP (entities/model_params.py): a send's own fields
(``SendParams``, which the send and regenerate bodies extend), an agent's defaults
(``modelParams`` in its bodies, ``model_params`` in its answers). Request bodies are
camelCase, the structured output format OpenAI's shape:
``{"type": "json_schema", "jsonSchema": {"name", "schema", "strict"}}``.

Bounds here publish the core's numbers in the OpenAPI document; the core checks
them again (use_cases/model_params.py), with what JSON Schema cannot say.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.use_cases.model_params import (
    MAX_FORMAT_NAME,
    MAX_OUTPUT_TOKENS,
    MAX_STOP,
    MAX_STOP_CHARS,
    MAX_TEMPERATURE,
)

__all__ = ["ModelParamsBody", "ModelParamsOut", "SendParams", "params_of"]

Temperature = Annotated[float, Meta(ge=0, le=MAX_TEMPERATURE)]
TopP = Annotated[float, Meta(ge=0, le=1)]
OutputTokens = Annotated[int, Meta(ge=1, le=MAX_OUTPUT_TOKENS)]
Stop = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=MAX_STOP_CHARS)]],
    Meta(max_length=MAX_STOP),
]


class JsonSchemaBody(msgspec.Struct, rename="camel"):
    name: Annotated[
        str, Meta(min_length=1, max_length=MAX_FORMAT_NAME, pattern=r"^[A-Za-z0-9_-]+$")
    ]
    schema: dict[str, Any]
    strict: bool | None = None


class ResponseFormatBody(msgspec.Struct, rename="camel"):
    type: Literal["text", "json_schema"]
    json_schema: JsonSchemaBody | None = None  # with type json_schema, and only then


class SendParams(msgspec.Struct, kw_only=True, rename="camel"):
    """A send's model parameters: each one given overrides the agent's."""

    temperature: Temperature | None = None
    top_p: TopP | None = None
    max_output_tokens: OutputTokens | None = None
    stop: Stop | None = None
    response_format: ResponseFormatBody | None = None


class ModelParamsBody(SendParams, rename="camel"):
    """An agent's defaults (``modelParams``), given whole."""


_FIELDS = SendParams.__struct_fields__


def params_of(body: SendParams) -> ModelParams | None:
    """The core's parameters from a body's (None: it gives none, what most sends
    do: then nothing is converted)."""
    if all(getattr(body, f) is None for f in _FIELDS):
        return None
    return msgspec.convert(body, ModelParams, from_attributes=True)


class JsonSchemaOut(msgspec.Struct):
    name: str
    schema: dict[str, Any]
    strict: bool | None


class ResponseFormatOut(msgspec.Struct, omit_defaults=True):
    type: str
    json_schema: JsonSchemaOut | None = None


class ModelParamsOut(msgspec.Struct):
    """An agent's defaults in its answers (snake_case, as the agent's other fields;
    null: not set, the provider's default applies)."""

    temperature: float | None
    top_p: float | None
    max_output_tokens: int | None
    stop: list[str] | None
    response_format: ResponseFormatOut | None

    @classmethod
    def of(cls, p: ModelParams | None) -> ModelParamsOut | None:
        if p is None:
            return None
        return msgspec.convert(p, cls, from_attributes=True)
