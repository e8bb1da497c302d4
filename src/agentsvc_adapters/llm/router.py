"""Which provider family serves a model id (docs/models.md).

An explicit ``alpha:`` or ``beta:`` prefix names the family and is stripped;
otherwise the first matching prefix of the table decides (``claude-`` -> alpha,
``gpt-`` and ``o`` -> beta by default). ``local`` is the built-in offline model.

The rules are one table (``routes``): ``route`` (the turn) and ``match`` (the
model listing, use_cases/models.py) both walk it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import ChatModel, ModelRoute, ModelRouter, RouteMatch

DEFAULT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("claude-", "alpha"),
    ("gpt-", "beta"),
    ("o", "beta"),
)

_ENV = {"alpha": "AGENTSVC_ALPHA_API_KEY", "beta": "AGENTSVC_BETA_API_KEY"}
_NAMED = ("alpha", "beta")  # the families an id may name with ``family:``


class Families(msgspec.Struct, frozen=True, kw_only=True):
    """The provider families of the deployment; ``keyed``: those it has its own key
    for (AGENTSVC_ALPHA_API_KEY, AGENTSVC_BETA_API_KEY)."""

    local: ChatModel
    alpha: ChatModel | None = None
    beta: ChatModel | None = None
    keyed: frozenset[str] = frozenset()


class PrefixRouter(ModelRouter):
    def __init__(
        self, families: Families, prefixes: Sequence[tuple[str, str]] = DEFAULT_PREFIXES
    ) -> None:
        self._families = families
        self._prefixes = tuple(prefixes)
        self._local = ModelRoute(
            pattern="local", family="local", configured=True, key_configured=None
        )
        self._named = {f: self._rule(f"{f}:*", f, "name") for f in _NAMED}
        self._by_prefix = tuple((p, self._rule(f"{p}*", f, "id")) for p, f in self._prefixes)

    def _rule(self, pattern: str, family: str, sends: str) -> ModelRoute:
        return ModelRoute(
            pattern=pattern,
            family=family,
            configured=self._model(family) is not None,
            key_configured=family in self._families.keyed,
            sends="name" if sends == "name" else "id",
        )

    def routes(self) -> tuple[ModelRoute, ...]:
        return (self._local, *self._named.values(), *(r for _, r in self._by_prefix))

    def match(self, model_id: str) -> RouteMatch | None:
        if model_id == "local":
            return RouteMatch(route=self._local, name="local")
        family, sep, rest = model_id.partition(":")
        if sep and family in self._named and rest:
            return RouteMatch(route=self._named[family], name=rest)
        for prefix, rule in self._by_prefix:
            if model_id.startswith(prefix):
                return RouteMatch(route=rule, name=model_id)
        return None

    def route(self, model_id: str) -> tuple[ChatModel, str]:
        found = self.match(model_id)
        if found is None:
            prefixes = ", ".join(repr(p) for p, _ in self._prefixes)
            raise InvalidInput(
                "model",
                f"no provider serves {model_id!r}: use 'local', a model id starting with "
                f"{prefixes}, or prefix it with 'alpha:' or 'beta:'",
            )
        family = found.route.family
        model = self._model(family)
        if model is None:
            raise InvalidInput(
                "model",
                f"{model_id!r} needs the {family} provider family, which is not configured "
                f"(set {_ENV[family]})",
            )
        return model, found.name

    def _model(self, family: str) -> ChatModel | None:
        if family == "local":
            return self._families.local
        return self._families.alpha if family == "alpha" else self._families.beta
