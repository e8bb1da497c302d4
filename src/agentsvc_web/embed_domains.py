"""Which sites may embed a page: the organization's ``allowed_embed_domains``.

Two guards from one list, for any page meant to be framed by customers' sites (a
runner's button, a published chat's widget):

- ``frame_ancestors``: the CSP ``frame-ancestors`` sources. The browser enforces
  them whatever the request carried; they are what stops another site framing
  the page.
- ``embedder_allowed``: the ``Origin``/``Referer`` check of a request, so an
  honest browser on another site is refused before anything is served (a script
  such as ``embed.js`` cannot be guarded by ``frame-ancestors``).

Domain entries are those ``rules.check_embed_domain`` accepts: ``example.com``,
``*.example.com`` (subdomains at any depth, not ``example.com`` itself),
``example.com:8443``, ``localhost:3000``, ``bücher.example`` (compared in its ASCII
form, ``xn--bcher-kva.example``), in any letter case. An entry without a port
allows the scheme's default port only, as a CSP source does. Sites must be
``https://``; ``http://`` is allowed for loopback hosts only (``localhost`` and
``127.0.0.0/8``), for local development. An entry that does not pass the rule
allows nothing. The two functions agree: a site ``embedder_allowed`` accepts is one
the ``frame-ancestors`` sources match, and the other way round.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from agentsvc_core.errors import InvalidInput
from agentsvc_core.rules import check_embed_domain

__all__ = ["embedder_allowed", "filled_script", "frame_ancestors"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def filled_script(template: str, values: Mapping[str, str]) -> str:
    """An embed script (``embed.js``, ``widget.js``) with each placeholder (a key of
    ``values``) replaced by its value as a JavaScript string literal that cannot end
    a script element or a string, in one pass: a placeholder's name inside a value
    is not replaced again."""
    placeholders = re.compile("|".join(re.escape(k) for k in values))
    return placeholders.sub(lambda m: _js_string(values[m.group(0)]), template)


def _js_string(value: str) -> str:
    """A JavaScript string literal that cannot end a script element or a string."""
    # ensure_ascii escapes U+2028/U+2029 (line ends in older JavaScript) as well
    return (
        json.dumps(value, ensure_ascii=True)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )


def frame_ancestors(domains: Sequence[str]) -> str:
    """The ``frame-ancestors`` sources for ``domains``; ``'none'`` when there are none.

    ``example.com`` -> ``https://example.com``; ``*.example.com`` ->
    ``https://*.example.com``; ``Bücher.example:8443`` ->
    ``https://xn--bcher-kva.example:8443``; a loopback host gets its ``http://``
    source too: ``localhost:3000`` -> ``https://localhost:3000 http://localhost:3000``.
    """
    sources: list[str] = []
    for entry in (_entry(d) for d in domains):
        if entry is None:
            continue
        host, port, wildcard = entry
        spelled = ("*." if wildcard else "") + host + (f":{port}" if port is not None else "")
        schemes = ("https", "http") if _loopback(host) and not wildcard else ("https",)
        sources.extend(f"{scheme}://{spelled}" for scheme in schemes)
    unique = list(dict.fromkeys(sources))
    return " ".join(unique) if unique else "'none'"


def embedder_allowed(*, origin: str | None, referer: str | None, domains: Sequence[str]) -> bool:
    """Whether a request for an embeddable page or script comes from an allowed site.

    The site is the ``Origin`` header, or, when there is none, the ``Referer`` (a
    browser sends no ``Origin`` with a plain ``GET`` of a frame or a script, and
    sends the embedding page's origin as ``Referer`` under its default policy). Its
    host must equal a domain entry (letter case and IDNA spelling aside) or, for a
    ``*.`` entry, be a subdomain of it; its port must be the entry's (the scheme's
    default for an entry without one); its scheme ``https``, or ``http`` for a
    loopback host. So ``evil-example.com``, ``example.com.evil.net`` and
    ``notexample.com`` are not ``example.com``, and ``*.example.com`` does not
    allow ``example.com`` itself. No domains: always False.

    Neither header (a page or link with ``Referrer-Policy: no-referrer``, a privacy
    tool): True. This check only keeps honest browsers on other sites from loading
    the page; what stops another site from framing it is the page's CSP
    ``frame-ancestors`` (``frame_ancestors``), which the browser enforces whatever
    the request carried. ``Origin: null`` (an opaque origin: a sandboxed frame, a
    ``file:`` page) or a header that is not an ``http(s)`` URL: False.
    """
    entries = [e for e in (_entry(d) for d in domains) if e is not None]
    if not entries:
        return False
    claimed = origin or referer
    if not claimed:
        return True
    site = _site(claimed)
    if site is None:
        return False
    scheme, host, port = site
    if scheme == "http" and not _loopback(host):
        return False
    for base, entry_port, wildcard in entries:
        if port != (entry_port if entry_port is not None else _DEFAULT_PORTS[scheme]):
            continue
        if host.endswith("." + base) if wildcard else host == base:
            return True
    return False


def _entry(domain: str) -> tuple[str, int | None, bool] | None:
    """``(ascii host, port or None, wildcard)`` of a domain entry; None if it is invalid."""
    try:
        check_embed_domain("allowed_embed_domains", domain)
    except InvalidInput:
        return None
    host, _, port = domain.partition(":")
    wildcard = host.startswith("*.")
    ascii_host = _ascii(host[2:] if wildcard else host)
    if ascii_host is None:
        return None
    return ascii_host, int(port) if port else None, wildcard


def _ascii(host: str) -> str | None:
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


def _site(url: str) -> tuple[str, str, int] | None:
    """``(scheme, ascii host, port)`` of an ``Origin``/``Referer`` value."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in _DEFAULT_PORTS or not host:
        return None
    ascii_host = _ascii(host)
    if ascii_host is None:
        return None
    return parts.scheme, ascii_host, port if port is not None else _DEFAULT_PORTS[parts.scheme]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
