"""Request bodies whose shape is a core draft's: the fields are written once, in the
draft, and the body reads them in camelCase."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import msgspec

__all__ = ["camel_body"]

_Draft = TypeVar("_Draft", bound=msgspec.Struct)


def camel_body(draft: type[_Draft], name: str, module: str) -> type[_Draft]:
    """A request body class ``name`` (its name in the OpenAPI document), defined in
    ``module``, with the fields of ``draft`` (types, bounds and defaults) read and
    written in camelCase.

    It is a subclass of the draft that declares each field again: msgspec renames
    only the fields a class declares itself. A handler makes the draft from it with
    ``msgspec.convert(body, draft, from_attributes=True)``."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(draft):
        if f.default is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, f.default))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, f.type))
    config = draft.__struct_config__
    made = msgspec.defstruct(
        name,
        fields,
        bases=(draft,),
        module=module,
        rename="camel",
        kw_only=True,
        frozen=config.frozen,
        forbid_unknown_fields=config.forbid_unknown_fields,
    )
    return cast("type[_Draft]", made)  # a subclass of draft, which defstruct's type omits
