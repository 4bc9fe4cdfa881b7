"""Text → safe HTML: Markdown rendered without raw HTML, and query terms highlighted.

Every string given here is redacted already (``render.to_data``); this module only keeps
the browser from reading it as markup. Markdown goes through markdown-it-py with HTML off
(a ``<script>`` in a document is shown as text), images off (a page never fetches what a
document names; the CSP forbids it anyway) and links only to ``http(s)``, ``mailto`` or a
relative / anchor target.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

_SCHEME = re.compile(r"^\s*([a-z][a-z0-9+.-]*):", re.IGNORECASE)
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def _validate_link(url: str) -> bool:
    """http(s), mailto, anchors and relative links; never javascript:, data:, file: …
    nor a protocol-relative ``//host`` (another site under the page's scheme)."""
    scheme = _SCHEME.match(url)
    if scheme:
        return scheme.group(1).lower() in SAFE_SCHEMES
    return not url.strip().startswith(("//", "\\"))


def _make_renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable("image")
    md.validateLink = _validate_link  # type: ignore[method-assign]
    return md


_MD = _make_renderer()


def markdown_html(text: str, max_bytes: int) -> str | None:
    """``text`` as HTML (raw HTML escaped, unsafe links left as text), or None when that
    HTML would be over ``max_bytes``.

    The HTML can be far larger than the text: a link reference defined once with a long
    URL and used thousands of times repeats the URL at every use. So the tokens are
    rendered one at a time (the renderer's own rules, as its ``render`` does) and the
    work stops at the bound, before the whole would exist.
    """
    env: dict[str, Any] = {}
    out: list[str] = []
    size = 0
    for piece in _rendered(_MD.parse(text, env), env):
        size += len(piece.encode())
        if size > max_bytes:
            return None
        out.append(piece)
    return "".join(out)


def _rendered(tokens: Sequence[Token], env: dict[str, Any]) -> Iterator[str]:
    renderer = _MD.renderer
    for i, token in enumerate(tokens):
        if token.type == "inline":
            yield from _rendered(token.children or (), env)
        elif token.type in renderer.rules:
            yield renderer.rules[token.type](tokens, i, _MD.options, env)
        else:
            yield renderer.renderToken(tokens, i, _MD.options, env)


def highlight(text: str, terms: Sequence[str]) -> str:
    """``text`` escaped, each occurrence of a term wrapped in ``<mark>`` (case-insensitive;
    a Latin term only where a word starts: ``cache`` marks ``cache``, ``caches``, not ``ache``)."""
    words = sorted({t for t in terms if t.strip()}, key=len, reverse=True)
    if not words:
        return html.escape(text)
    parts = [_term_pattern(w) for w in words]
    pattern = re.compile("|".join(parts), re.IGNORECASE)
    out, last = [], 0
    for found in pattern.finditer(text):
        out.append(html.escape(text[last : found.start()]))
        out.append(f"<mark>{html.escape(found.group())}</mark>")
        last = found.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _term_pattern(term: str) -> str:
    escaped = re.escape(term)
    return rf"(?<!\w){escaped}" if term[:1].isascii() and term[:1].isalnum() else escaped
