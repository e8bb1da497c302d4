"""Model parameters: how a model samples and shapes its reply (docs/models.md,
"Model parameters"). An agent keeps defaults; a send may give its own, which win
field by field (``ModelParams.over``). ``None`` is "not given": the provider's own
default applies (the output cap: the service's, 4096 tokens).

The structured output format mirrors the OpenAI Chat Completions API's
``response_format``: ``{"type": "text"}`` or ``{"type": "json_schema", "json_schema":
{"name", "schema", "strict"}}``. Its bounds and the families' limits are checked in
``agentsvc_core.use_cases.model_params``."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = ["JsonSchemaFormat", "ModelParams", "ResponseFormat"]


class JsonSchemaFormat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The JSON Schema a structured reply follows, named (``name``: letters, digits,
    ``_`` and ``-``); ``strict``: the provider enforces it exactly (where it can)."""

    name: str
    schema: dict[str, Any]
    strict: bool | None = None


class ResponseFormat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    type: Literal["text", "json_schema"]
    json_schema: JsonSchemaFormat | None = None  # with type json_schema, and only then


class ModelParams(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    # the texts that end the reply where they first appear; () sends none (a send's
    # empty list overrides the agent's)
    stop: tuple[str, ...] | None = None
    response_format: ResponseFormat | None = None

    def over(self, base: ModelParams | None) -> ModelParams:
        """These parameters, with ``base``'s where these give none."""
        if base is None:
            return self
        return ModelParams(
            **{
                f: getattr(base, f) if getattr(self, f) is None else getattr(self, f)
                for f in self.__struct_fields__
            }
        )

    def structured(self) -> JsonSchemaFormat | None:
        """The JSON Schema the reply must follow, or None (text)."""
        rf = self.response_format
        return None if rf is None or rf.type != "json_schema" else rf.json_schema
