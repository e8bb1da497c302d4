"""A runner's ``button`` trigger in a browser: the form page, ``embed.js``, their headers.

Pure functions; the routes (``GET /api/runners/{id}/button`` and ``.../embed.js``)
build their answers from them:

- ``button_page``: a small, self-contained HTML page (no external resource; one
  inline style sheet and one inline script, both carrying the answer's CSP nonce)
  with a form built from the runner's ``input_schema``. Submitting sends the run's
  input as JSON to the trigger's ``POST /api/runners/webhooks/{token}`` and shows
  ``Started run <id>`` or the error's ``detail``.
- ``embed_script``: the JavaScript a site includes with
  ``<script src=".../embed.js?token=rt_..."></script>``; it mounts the page in an
  iframe.
- ``button_headers``: the page's headers; ``frame-ancestors`` lists the
  organization's ``allowed_embed_domains``, so only those sites can frame it.
- ``embedder_allowed`` (from ``agentsvc_web.embed_domains``, re-exported): the
  ``Origin``/``Referer`` check of a request for either; that module also says
  which domain entries allow which sites.

Nothing taken from the schema (property names, titles, descriptions, defaults,
enum values) becomes markup or script: every value is HTML-escaped into text or a
double-quoted attribute, and the page's script is a constant that reads them back
from ``data-`` attributes. The CSP (nonce-only scripts) is the second line of that
defence. The page talks to its own origin only (``connect-src 'self'``): the submit
URL must be on the service's origin.

The page's script and style sheet and ``embed.js`` are files beside this module
(``runner_button_files/``), read once at import.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentsvc_web.embed_domains import embedder_allowed, filled_script, frame_ancestors

__all__ = ["HEIGHT_MESSAGE", "button_headers", "button_page", "embed_script", "embedder_allowed"]

FILES = Path(__file__).parent / "runner_button_files"
_CSS = (FILES / "page.css").read_text(encoding="utf-8")
_PAGE_JS = (FILES / "page.js").read_text(encoding="utf-8")
_EMBED_JS = (FILES / "embed.js").read_text(encoding="utf-8")
# The message the page posts to its parent with its height (page.js), read by embed.js.
HEIGHT_MESSAGE = "agentsvc-runner-height"
TEXTAREA_OVER = 200  # a string whose maxLength is above this gets a textarea
_NONCE = re.compile(r"[A-Za-z0-9+/_-]{16,128}={0,2}")
_INPUT_TYPES = {"email": "email", "uri": "url", "date": "date"}
_Attr = str | int | float | bool | None  # an attribute value: None and False leave it out


# -- the page ---------------------------------------------------------------------------


def button_page(
    *, name: str, description: str, input_schema: dict[str, Any], submit_url: str, nonce: str
) -> str:
    """The HTML page of a runner's button: a form for ``input_schema``'s properties.

    One control a property of ``input_schema["properties"]``, in their order, labelled
    with its ``title`` (else its name), described by its ``description``, prefilled
    with its ``default`` when that fits the type, and ``required`` as the schema's
    ``required`` says:

    - ``enum`` (or ``oneOf`` of ``{"const", "title"}``): a ``select``; the value
      sent is the enum value with its JSON type (``3`` stays a number). An optional
      one has an empty first choice that leaves the field out.
    - ``string``: a text input; ``format`` ``email``/``uri``/``date`` give
      ``email``/``url``/``date`` inputs; ``minLength``/``maxLength`` are checked.
      A ``textarea`` when ``format`` is ``"textarea"`` or ``maxLength`` is above
      200 (``TEXTAREA_OVER``): a long text is what such a bound announces.
    - ``integer``/``number``: a number input (whole numbers only for ``integer``)
      with ``minimum``/``maximum`` (and an integer's ``exclusiveMinimum``/
      ``exclusiveMaximum``); sent as a JSON number.
    - ``boolean``: a checkbox, always sent (``true``/``false``).
    - anything else (``array``, ``object``, no ``type``, several types): a textarea
      of JSON, parsed before sending; an ``array``/``object`` must parse as one.

    A type list with ``"null"`` (``["string", "null"]``) is read as the other type.
    An optional field left empty is left out of the body. ``$ref``, ``pattern``,
    ``allOf`` and the like are not interpreted here: the service validates the
    input against the schema and the page shows its ``detail``.

    ``submit_url`` is the trigger's webhook URL on the service's origin (a path is
    enough). ``nonce`` is the answer's CSP nonce (``button_headers``), fresh for each
    answer (``secrets.token_urlsafe(16)``); anything but 16-128 base64 characters is
    a ``ValueError``.
    """
    _check_nonce(nonce)
    schema = input_schema if isinstance(input_schema, dict) else {}
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    required_names = (
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    )
    fields = [
        _field(i, str(prop), sub if isinstance(sub, dict) else {}, str(prop) in required_names)
        for i, (prop, sub) in enumerate(props.items())
    ]
    e = _esc
    title = name or "Run"
    about = f'\n<p class="about">{e(description)}</p>' if description else ""
    legend = (
        '\n<p class="muted small"><span aria-hidden="true">*</span> required</p>'
        if any(
            str(p) in required_names and _kind(sub if isinstance(sub, dict) else {}) != "boolean"
            for p, sub in props.items()
        )
        else ""
    )
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{e(title)}</title>
<style nonce="{e(nonce)}">{_CSS}</style>
</head>
<body>
<main>
<h1>{e(title)}</h1>{about}
<form id="run-form" method="post" action="{e(submit_url)}">
{"".join(fields)}{legend}
<div class="actions"><button id="run-submit" type="submit">Run</button></div>
<p id="run-status" class="status" role="status" aria-live="polite"></p>
</form>
</main>
<script nonce="{e(nonce)}">{_PAGE_JS}</script>
</body>
</html>
"""


def _esc(value: str) -> str:
    return html.escape(value, quote=True)


def _check_nonce(nonce: str) -> None:
    if not _NONCE.fullmatch(nonce):
        raise ValueError("the CSP nonce must be 16-128 base64 characters")


def _type(schema: dict[str, Any]) -> str | None:
    """The schema's one ``type``; ``["string", "null"]`` is ``string``; several are None."""
    kind = schema.get("type")
    if isinstance(kind, list):
        named = [k for k in kind if k != "null"]
        kind = named[0] if len(named) == 1 else None
    return kind if isinstance(kind, str) else None


def _kind(schema: dict[str, Any]) -> str:
    """``enum``, ``string``, ``integer``, ``number``, ``boolean`` or ``json``."""
    if _choices(schema):
        return "enum"
    kind = _type(schema)
    return kind if kind in ("string", "integer", "number", "boolean") else "json"


def _choices(schema: dict[str, Any]) -> list[tuple[Any, str]]:
    """(value, label) pairs of an ``enum`` or of a ``oneOf`` of ``const``s."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return [(v, _label(v)) for v in enum]
    one_of = schema.get("oneOf")
    if (
        isinstance(one_of, list)
        and one_of
        and all(isinstance(o, dict) and "const" in o for o in one_of)
    ):
        return [
            (o["const"], o["title"] if isinstance(o.get("title"), str) else _label(o["const"]))
            for o in one_of
        ]
    return []


def _label(value: Any) -> str:
    return value if isinstance(value, str) else _dumps(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _attrs(pairs: dict[str, _Attr]) -> str:
    out = []
    for key, value in pairs.items():
        if value is None or value is False:
            continue
        out.append(f" {key}" if value is True else f' {key}="{_esc(str(value))}"')
    return "".join(out)


def _field(i: int, name: str, schema: dict[str, Any], required: bool) -> str:
    kind = _kind(schema)
    fid = f"f{i}"
    title = schema.get("title")
    label = title if isinstance(title, str) and title else name
    hint = schema.get("description")
    hint = hint if isinstance(hint, str) and hint else ""
    json_kind = _type(schema) if kind == "json" else None
    json_kind = json_kind if json_kind in ("array", "object") else None
    if kind == "json":
        hint = (hint + " " if hint else "") + f"JSON{' ' + json_kind if json_kind else ''}."
    has_default = "default" in schema
    default = schema.get("default")
    common: dict[str, _Attr] = {
        "id": fid,
        "data-name": name,
        "data-kind": kind,
        "data-json": json_kind or None,
        "aria-describedby": f"{fid}-hint" if hint else None,
    }
    mark = '<span class="req" aria-hidden="true"> *</span>' if required else ""
    hint_html = f'<p class="hint" id="{fid}-hint">{_esc(hint)}</p>' if hint else ""
    if kind == "boolean":
        box = _attrs({**common, "type": "checkbox", "checked": default is True})
        return (
            f'<div class="field check"><input{box}>'
            f'<label for="{fid}">{_esc(label)}</label>{hint_html}</div>\n'
        )
    label_html = f'<label for="{fid}">{_esc(label)}{mark}</label>'
    control = _control(kind, schema, common, required, has_default, default)
    return f'<div class="field">{label_html}{hint_html}{control}</div>\n'


def _control(
    kind: str,
    schema: dict[str, Any],
    common: dict[str, _Attr],
    required: bool,
    has_default: bool,
    default: Any,
) -> str:
    if kind == "enum":
        return _select(_choices(schema), common, required, has_default, default)
    if kind in ("integer", "number"):
        low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
        if kind == "integer":
            low, high = _whole_bounds(schema, low, high)
        attrs = _attrs(
            {
                **common,
                "type": "number",
                "inputmode": "numeric" if kind == "integer" else "decimal",
                "step": "1" if kind == "integer" else "any",
                "min": low,
                "max": high,
                "required": required,
                "value": _number(default) if kind == "number" else _whole(default),
            }
        )
        return f"<input{attrs}>"
    if kind == "string":
        fmt = schema.get("format")
        max_len = _count(schema.get("maxLength"))
        text = default if isinstance(default, str) else None
        bounds = {"minlength": _count(schema.get("minLength")), "maxlength": max_len}
        if fmt == "textarea" or (max_len is not None and max_len > TEXTAREA_OVER):
            attrs = _attrs({**common, "rows": 5, **bounds, "required": required})
            # the newline: a parser drops the first one of a textarea's text
            return f"<textarea{attrs}>\n{_esc(text or '')}</textarea>"
        input_type = _INPUT_TYPES.get(fmt, "text") if isinstance(fmt, str) else "text"
        attrs = _attrs(
            {**common, "type": input_type, **bounds, "required": required, "value": text}
        )
        return f"<input{attrs}>"
    text = json.dumps(default, indent=2, ensure_ascii=False) if has_default else ""
    attrs = _attrs(
        {**common, "class": "code", "rows": 4, "spellcheck": "false", "required": required}
    )
    return f"<textarea{attrs}>\n{_esc(text)}</textarea>"


def _whole(value: Any) -> int | None:
    number = _number(value)
    if isinstance(number, int):
        return number
    return int(number) if number is not None and number.is_integer() else None


def _whole_bounds(
    schema: dict[str, Any], low: float | int | None, high: float | int | None
) -> tuple[int | None, int | None]:
    """An integer's bounds as whole numbers, the exclusive ones folded in."""
    low_i = math.ceil(low) if low is not None else None
    high_i = math.floor(high) if high is not None else None
    ex_low, ex_high = (
        _number(schema.get("exclusiveMinimum")),
        _number(schema.get("exclusiveMaximum")),
    )
    if ex_low is not None:
        candidate = math.floor(ex_low) + 1
        low_i = candidate if low_i is None else max(low_i, candidate)
    if ex_high is not None:
        candidate = math.ceil(ex_high) - 1
        high_i = candidate if high_i is None else min(high_i, candidate)
    return low_i, high_i


def _select(
    choices: list[tuple[Any, str]],
    common: dict[str, _Attr],
    required: bool,
    has_default: bool,
    default: Any,
) -> str:
    picked = _dumps(default) if has_default else None
    if picked is not None and picked not in {_dumps(v) for v, _ in choices}:
        picked = None
    options = []
    if picked is None or not required:
        # required without a default: an empty choice the browser refuses to send
        blank = "Choose…" if required else "—"
        options.append(f'<option value=""{" selected" if picked is None else ""}>{blank}</option>')
    for value, text in choices:
        encoded = _dumps(value)
        chosen = " selected" if encoded == picked else ""
        options.append(f'<option value="{_esc(encoded)}"{chosen}>{_esc(text)}</option>')
    attrs = _attrs({**common, "required": required})
    return f"<select{attrs}>{''.join(options)}</select>"


# -- embed.js ---------------------------------------------------------------------------


def embed_script(*, button_url: str, title: str = "Start a run") -> str:
    """``embed.js``: mounts the button page (``button_url``) in an iframe.

    The iframe goes into the first ``[data-agentsvc-runner]`` element of the page
    that has none yet (several buttons on a page: one element each, in the order
    of their scripts), else right after the script's own tag
    (``document.currentScript``; at the end of the body when that tag is in the
    ``head``). ``button_url`` is resolved against the script's own URL, so a path
    (``/api/runners/{id}/button?token=rt_...``) points at the service, not at the
    embedding site; an absolute URL also works where ``document.currentScript`` is
    unset (a ``type="module"`` script). ``title`` names the frame for assistive
    technology (the runner's name is a good one).

    The frame is 100% wide (at most 560 px) and follows the page's height, which
    the page posts to its parent (``{"type": "agentsvc-runner-height", "height"}``;
    only a finite number from that frame's window and origin is used, clamped to
    80-4000 px). It sends its origin as ``Referer`` (``strict-origin``), so the
    service can check the embedder even on a page whose policy sends none, and it
    is sandboxed: scripts, forms and its own origin only; no popups, no navigation
    of the embedding page. The two strings are JSON-encoded into the script with
    ``<``, ``>`` and ``&`` escaped; the script uses neither ``eval`` nor
    ``innerHTML``.
    """
    return filled_script(_EMBED_JS, {"__BUTTON_URL__": button_url, "__TITLE__": title})


# -- headers ----------------------------------------------------------------------------


def button_headers(*, domains: Sequence[str], nonce: str) -> dict[str, str]:
    """The button page's headers (the route adds its ``Content-Type``).

    ``Content-Security-Policy``: nothing loads but the page's own nonce'd script and
    style (``default-src 'none'``, so no image, font, frame or plugin either);
    ``fetch`` to this origin only (the webhook); the form posts to this origin
    only; no ``<base>``; framed only by the ``domains`` (``frame-ancestors``, see
    ``embed_domains.frame_ancestors`` for the mapping), or by nobody without any.
    ``X-Frame-Options`` is left out on purpose: ``DENY``/``SAMEORIGIN`` would also
    refuse the allowed sites, and browsers that know ``frame-ancestors`` ignore it.
    ``Referrer-Policy: no-referrer``: the page's URL carries the trigger's token.
    ``Cache-Control: no-store``: a domain removed from the settings stops the next
    load, not a cached one.
    """
    _check_nonce(nonce)
    ancestors = frame_ancestors(domains)
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src 'nonce-{nonce}'",
            f"style-src 'nonce-{nonce}'",
            "connect-src 'self'",
            "form-action 'self'",
            "base-uri 'none'",
            f"frame-ancestors {ancestors}",
        ]
    )
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
