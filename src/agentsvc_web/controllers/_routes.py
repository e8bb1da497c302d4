"""Routes written once for several owners or kinds of configuration.

Litestar reads a handler's parameters by name and type: a path parameter is the
argument named as in the path, a dependency the one named as in ``dependencies``,
the body's schema is ``data``'s annotation, the answer's the return annotation.
``routed`` gives a handler written once the names and types of one use of it, so
one function serves ``/api/agents/{agent_id}/mcps`` and
``/api/runners/{runner_id}/mcps`` with the OpenAPI document of each.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

__all__ = ["routed"]

_Handler = TypeVar("_Handler", bound=Callable[..., Awaitable[Any]])


def routed(
    fn: _Handler, *, names: Mapping[str, str] = {}, types: Mapping[str, Any] = {}
) -> _Handler:
    """``fn`` with its parameters renamed (``names``: its name -> the route's) and
    retyped (``types``: its name, or ``"return"`` -> the type), in the signature
    and annotations that Litestar reads; called with the route's names, it calls
    ``fn`` with its own."""

    @functools.wraps(fn)
    async def handler(*args: Any, **kwargs: Any) -> Any:
        for own, route in names.items():
            kwargs[own] = kwargs.pop(route)
        return await fn(*args, **kwargs)

    signature = inspect.signature(fn)
    handler.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[
            p.replace(name=names.get(p.name, p.name), annotation=types.get(p.name, p.annotation))
            for p in signature.parameters.values()
        ],
        return_annotation=types.get("return", signature.return_annotation),
    )
    handler.__annotations__ = {
        names.get(k, k): types.get(k, v) for k, v in fn.__annotations__.items()
    }
    return handler  # type: ignore[return-value]
