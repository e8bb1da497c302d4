"""JSON Schemas from outside (webhook tools' ``parameters``, runners' ``input_schema``,
an MCP server's ``outputSchema``) checked with their regular expressions in RE2,
within a bound of work.

``jsonschema`` evaluates ``pattern``, ``patternProperties`` (and, through them,
``additionalProperties`` and ``unevaluatedProperties``) with Python's backtracking
``re``: ``{"pattern": "^(a+)+$"}`` against ``"aaaa…a!"`` takes time exponential in
the string's length, on the event loop, in C code no signal interrupts, so one
schema would stop every organization served by the process. Here each of those
keywords is replaced by one that matches with RE2 (``google-re2``); the ``regex``
format, which is how a schema's own patterns are checked when it is saved, compiles
with RE2 too, and is the one format asserted there. Everything else is ``jsonschema``'s.

Bounds. RE2's time is linear in the text, but also in the size of the compiled
pattern: ``[ab]*a[ab]{999}c`` (about a thousand instructions) against a megabyte of
``a`` and ``b`` takes RE2 some 15 s. So each compiled pattern may use at most
``MAX_MEM`` bytes (which bounds its program to ~50,000 instructions and its
compilation to tens of milliseconds; a larger one is "pattern too large"), and one
check (``problems``, ``check_schema``) may spend at most ``WORK_BUDGET`` units:
a match costs the program's size times the text's length plus one, charged before
it runs; compiling costs ``_COMPILE_WEIGHT`` a program instruction, once per
pattern and check. At RE2's slowest (its NFA, ~15 ns a unit here) the budget is
about 0.3 s; ordinary checks use a few thousand units. Past it the check raises
``PatternTooCostly``; matches made outside a check are bounded one by one.

RE2 is the dialect: no backreferences (``\\1``), no lookaround (``(?=``, ``(?!``,
``(?<=``, ``(?<!``), counted repetition up to 1000. A pattern RE2 cannot compile
is refused when a schema is saved (``check_schema``); met while validating (a schema
stored before, an MCP server's), it raises ``UnsupportedPattern``, which names it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, cast

import jsonschema
import re2
from jsonschema import FormatChecker, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.jsonschema import lookup_recursive_ref

__all__ = [
    "MAX_MEM",
    "WORK_BUDGET",
    "PatternRefused",
    "PatternTooCostly",
    "UnsupportedPattern",
    "check_schema",
    "compiled",
    "problems",
    "validator",
]

MAX_MEM = 1 << 20  # bytes one compiled pattern may use (RE2's default is 8 MiB)
WORK_BUDGET = 20_000_000  # units one check may spend (module docstring)
_COMPILE_WEIGHT = 50  # units a compiled instruction costs (~0.7 us each, measured)
_CACHED = 64  # compiled patterns kept: at most 64 MiB with MAX_MEM
_SHOWN = 100  # characters of a pattern an error message quotes
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each refused pattern to stderr
_OPTIONS.max_mem = MAX_MEM


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= _SHOWN else pattern[:_SHOWN] + "…")


class PatternRefused(ValueError):
    """A schema's pattern that was not matched: ``pattern`` says which."""

    def __init__(self, pattern: str, message: str) -> None:
        self.pattern = pattern
        super().__init__(message)


class UnsupportedPattern(PatternRefused):
    """A regular expression RE2 cannot compile: the pattern and RE2's reason."""

    def __init__(self, pattern: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            pattern,
            f"the pattern {_shown(pattern)} is not supported: {reason} (patterns are RE2"
            " syntax, which has no backreferences or lookaround)",
        )


class PatternTooCostly(PatternRefused):
    """Matching would take the check past its ``WORK_BUDGET``."""

    def __init__(self, pattern: str) -> None:
        super().__init__(
            pattern,
            f"checking the pattern {_shown(pattern)} is more work than one check may do"
            " (texts too long for the schema's patterns, or patterns too large)",
        )


@functools.lru_cache(maxsize=_CACHED)
def compiled(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached: a tool's schema is applied at every call).
    Raises ``UnsupportedPattern``."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise UnsupportedPattern(pattern, text) from None


class _Meter:
    """The work one check has left, and the patterns it has paid to compile."""

    __slots__ = ("left", "paid")

    def __init__(self) -> None:
        self.left = WORK_BUDGET
        self.paid: set[str] = set()

    def charge(self, units: int, pattern: str) -> None:
        self.left -= units
        if self.left < 0:
            raise PatternTooCostly(pattern)


# the check under way in this context (a check runs to its end without awaiting)
_METER: ContextVar[_Meter | None] = ContextVar("json_schema_meter", default=None)


def _regex(pattern: str, meter: _Meter) -> Any:
    found = compiled(pattern)
    if pattern not in meter.paid:
        meter.paid.add(pattern)
        meter.charge(found.programsize * _COMPILE_WEIGHT, pattern)
    return found


def _matches(pattern: str, text: str) -> bool:
    meter = _METER.get() or _Meter()
    found = _regex(pattern, meter)
    meter.charge(found.programsize * (len(text) + 1), pattern)
    return found.search(text) is not None


# --- the keywords, as jsonschema 4.x writes them, matching with RE2 ------------------


def _pattern(v: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if v.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    v: Any, patterns: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not v.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from v.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """The keys neither ``properties`` nor ``patternProperties`` cover."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in instance
        if key not in properties and not any(_matches(p, key) for p in patterns)
    ]


def _extras(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in keys) + (" was" if len(keys) == 1 else " were")


def _additional_properties(
    v: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not v.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if v.is_type(additional, "object"):
        for extra in extras:
            yield from v.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            yield ValidationError(
                f"Additional properties are not allowed ({_extras(sorted(extras, key=str))}"
                " unexpected)"
            )


def _valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(v: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates (what ``unevaluatedProperties``
    leaves alone): jsonschema's walk, with ``patternProperties`` matched by RE2 and
    ``$recursiveRef`` (draft 2019-09) followed like ``$dynamicRef``."""
    if v.is_type(schema, "boolean"):
        return set()
    keys = _through_references(v, instance, schema)
    properties = schema.get("properties")
    if v.is_type(properties, "object"):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys |= {k for k, value in instance.items() if _valid(v.descend(value, subschema))}
    for pattern in schema.get("patternProperties", {}):
        keys |= {k for k in instance if _matches(pattern, k)}
    return keys | _through_subschemas(v, instance, schema)


def _through_references(v: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    keys: set[str] = set()
    resolver = v._resolver  # jsonschema's own walk reads it the same way
    for ref in ("$ref", "$dynamicRef", "$recursiveRef"):
        if ref not in schema:
            continue
        if ref == "$recursiveRef":
            resolved = lookup_recursive_ref(resolver)
        else:
            resolved = resolver.lookup(schema[ref])
        keys |= _evaluated_keys(
            v.evolve(schema=resolved.contents, _resolver=resolved.resolver),
            instance,
            resolved.contents,
        )
    return keys


def _through_subschemas(v: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    keys: set[str] = set()
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            keys |= _evaluated_keys(v, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(v.descend(instance, subschema)):
                keys |= _evaluated_keys(v, instance, subschema)
    if "if" in schema:
        if v.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(v, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(v, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(v, instance, schema["else"])
    return keys


def _unevaluated_properties(
    v: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not v.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(v, instance, schema)
    left = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(v.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if not left:
        return
    if unevaluated is False:
        yield ValidationError(
            f"Unevaluated properties are not allowed ({_extras(sorted(left, key=str))} unexpected)"
        )
    else:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema"
            f" ({_extras(sorted(left, key=str))} unevaluated and invalid)"
        )


def _is_regex(instance: object) -> bool:
    if isinstance(instance, str):
        _regex(instance, _METER.get() or _Meter())
    return True


# The one format asserted: ``regex``, which the meta-schemas put on ``pattern`` and
# on ``patternProperties``' names, so that checking a schema compiles its patterns
# with RE2. No other: which formats jsonschema asserts depends on what else is
# installed (rfc3987, webcolors...), and a schema's validity should not.
_REGEX = FormatChecker(formats=())
_REGEX.checks("regex", raises=PatternRefused)(_is_regex)


def _linear(base: type[Validator]) -> type[Validator]:
    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if "unevaluatedProperties" in base.VALIDATORS:
        keywords["unevaluatedProperties"] = _unevaluated_properties
    # extend is untyped; what it makes is a Validator class whose check_schema takes a
    # format checker (jsonschema.protocols leaves that parameter out)
    made: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        base, keywords, format_checker=_REGEX
    )
    return cast("type[Validator]", made)


_DRAFTS: tuple[type[Validator], ...] = (
    jsonschema.Draft3Validator,
    jsonschema.Draft4Validator,
    jsonschema.Draft6Validator,
    jsonschema.Draft7Validator,
    jsonschema.Draft201909Validator,
    jsonschema.Draft202012Validator,
)
_LINEAR: dict[type[Validator], type[Validator]] = {d: _linear(d) for d in _DRAFTS}


def _dialect(schema: Any, default: type[Validator]) -> type[Validator]:
    """The draft ``$schema`` names (``default`` when it names none or one unknown)."""
    if not isinstance(schema, dict):
        return default
    return jsonschema.validators.validator_for(schema, default=default)


def validator(
    schema: Any, *, default: type[Validator] = jsonschema.Draft202012Validator
) -> Validator:
    """A validator of ``schema`` in its draft whose patterns run in RE2; apply it with
    ``problems``. References resolve only inside the schema (an empty registry:
    nothing is fetched). Formats are annotations, as jsonschema's default."""
    cls = _LINEAR.get(_dialect(schema, default), _LINEAR[default])
    return cls(schema, registry=Registry())


def problems(checker: Validator, instance: Any) -> list[ValidationError]:
    """Every way ``instance`` does not fit ``checker``'s schema, found within one
    ``WORK_BUDGET``. Raises ``UnsupportedPattern`` for a pattern RE2 cannot compile
    (a schema stored before patterns were checked, an MCP server's),
    ``PatternTooCostly`` past the budget, and ``referencing``'s errors for a
    reference that does not resolve."""
    token = _METER.set(_Meter())
    try:
        return list(checker.iter_errors(instance))
    finally:
        _METER.reset(token)


def check_schema(
    schema: Any, *, default: type[Validator] = jsonschema.Draft202012Validator
) -> None:
    """Raise ``jsonschema.SchemaError`` unless ``schema`` is a valid schema of its draft
    whose every pattern (``pattern``, ``patternProperties``' names) RE2 compiles
    within one ``WORK_BUDGET``; the error's ``cause`` is then the ``PatternRefused``
    that says why."""
    cls: Any = _LINEAR.get(_dialect(schema, default), _LINEAR[default])
    token = _METER.set(_Meter())
    try:
        cls.check_schema(schema, format_checker=_REGEX)
    finally:
        _METER.reset(token)
