"""From request bodies to the core's drafts and changes: ``draft_of`` converts a body
into one (msgspec checks every field on the way), ``camel_body`` makes a body whose
shape is a draft's, written once in the core."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import msgspec

from agentsvc_core.partial import given_fields

__all__ = ["camel_body", "draft_of"]

_Draft = TypeVar("_Draft", bound=msgspec.Struct)


def camel_body(draft: type[_Draft], name: str, module: str) -> type[_Draft]:
    """A request body class ``name`` (its name in the OpenAPI document), defined in
    ``module``, with the fields of ``draft`` (types, bounds and defaults) read and
    written in camelCase.

    It is a subclass of the draft that declares each field again: msgspec renames
    only the fields a class declares itself. A handler makes the draft from it with
    ``draft_of``."""
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


def draft_of(body: msgspec.Struct, draft: type[_Draft]) -> _Draft:
    """``draft`` (a use case's draft or changes) from the fields ``body`` supplied, by
    name; a field left ``UNSET`` in a PATCH body stays the draft's default, and the
    body's fields the draft does not have are left out."""
    return msgspec.convert(given_fields(body), draft)
