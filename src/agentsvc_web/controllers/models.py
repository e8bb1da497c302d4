"""The models this deployment routes (``/api/models``; docs/models.md#listing)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.params import FromPath

from agentsvc_core.use_cases.models import ModelInfo, Models
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import copied

__all__ = ["ModelInfoOut", "ModelPriceOut", "ModelSupportsOut", "ModelsController"]

Req = Request[Any, Any, Any]


class ModelPriceOut(msgspec.Struct):
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float


class ModelSupportsOut(msgspec.Struct):
    tools: bool
    native_compaction: bool
    summary_compaction: bool
    # the model parameters (docs/models.md#model-parameters): a responseFormat
    # json_schema, the highest temperature, temperature and topP in one request, a
    # stop text of only whitespace
    structured_output: bool
    max_temperature: float
    temperature_with_top_p: bool
    blank_stop: bool


class ModelInfoOut(msgspec.Struct):
    id: str
    example: str
    family: str
    sent_as: str
    route: str
    key_configured: bool | None
    context_window: int | None
    price_per_million: ModelPriceOut | None
    price_pattern: str | None
    supports: ModelSupportsOut

    @classmethod
    def of(cls, m: ModelInfo) -> ModelInfoOut:
        return copied(
            cls,
            m,
            price_per_million=None if m.price is None else copied(ModelPriceOut, m.price),
            supports=ModelSupportsOut(
                tools=m.supports_tools,
                native_compaction=m.supports_native_compaction,
                summary_compaction=m.supports_summary_compaction,
                structured_output=m.params.structured,
                max_temperature=m.params.max_temperature,
                temperature_with_top_p=not m.params.one_sampler,
                blank_stop=m.params.blank_stop,
            ),
        )


class ModelsController(Controller):
    path = "/api/models"
    tags = ["models"]

    @get(
        "/",
        operation_id="listModels",
        responses=errors(),
        summary="The models this deployment routes: family, key, context window, prices",
    )
    async def list_models(
        self, request: Req, models: NamedDependency[Models]
    ) -> list[ModelInfoOut]:
        return [ModelInfoOut.of(m) for m in models.list(principal_of(request))]

    @get(
        "/{model_id:path}",
        operation_id="getModel",
        responses=errors(404),
        summary="What a turn with this model id does (the id may hold '/', ':', '@', '+')",
    )
    async def get_model(
        self, request: Req, models: NamedDependency[Models], model_id: FromPath[str]
    ) -> ModelInfoOut:
        # the path type keeps the leading '/' of the rest of the path
        return ModelInfoOut.of(models.get(principal_of(request), model_id.removeprefix("/")))
