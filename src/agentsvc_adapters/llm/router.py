"""Which provider family serves a model id (docs/models.md).

An explicit ``alpha:`` or ``beta:`` prefix names the family and is stripped;
otherwise the first matching prefix of the table decides (``claude-`` -> alpha,
``gpt-`` and ``o`` -> beta by default). ``local`` is the built-in offline model.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import ChatModel, ModelRouter

DEFAULT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("claude-", "alpha"),
    ("gpt-", "beta"),
    ("o", "beta"),
)

_ENV = {"alpha": "AGENTSVC_ALPHA_API_KEY", "beta": "AGENTSVC_BETA_API_KEY"}


class Families(msgspec.Struct, frozen=True, kw_only=True):
    local: ChatModel
    alpha: ChatModel | None = None
    beta: ChatModel | None = None


class PrefixRouter(ModelRouter):
    def __init__(
        self, families: Families, prefixes: Sequence[tuple[str, str]] = DEFAULT_PREFIXES
    ) -> None:
        self._families = families
        self._prefixes = tuple(prefixes)

    def route(self, model_id: str) -> tuple[ChatModel, str]:
        if model_id == "local":
            return self._families.local, "local"
        family, sep, rest = model_id.partition(":")
        if sep and family in ("alpha", "beta") and rest:
            return self._family(family, model_id), rest
        for prefix, fam in self._prefixes:
            if model_id.startswith(prefix):
                return self._family(fam, model_id), model_id
        prefixes = ", ".join(repr(p) for p, _ in self._prefixes)
        raise InvalidInput(
            "model",
            f"no provider serves {model_id!r}: use 'local', a model id starting with "
            f"{prefixes}, or prefix it with 'alpha:' or 'beta:'",
        )

    def _family(self, family: str, model_id: str) -> ChatModel:
        model = self._families.alpha if family == "alpha" else self._families.beta
        if model is None:
            raise InvalidInput(
                "model",
                f"{model_id!r} needs the {family} provider family, which is not configured "
                f"(set {_ENV[family]})",
            )
        return model
