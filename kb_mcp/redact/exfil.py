"""Data-exfiltration URLs out of tool output (see ``redact_output`` for the rule).

Two strengths. A resource a renderer fetches unasked (Markdown image, HTML ``src`` /
``srcset`` / ``poster`` / SVG ``href``, CSS ``url()``) leaks the moment it is shown, so it is
defanged when it has any query string. A link needs a click, so it is defanged only when its
query and fragment carry enough opaque data to be worth stealing.
"""

from __future__ import annotations

import html
import re
from urllib.parse import unquote

from kb_mcp.redact._rule import (
    Gated,
    Rule,
    line_span,
    marker,
    reads_like_words,
    splice,
    words,
)

KIND = "exfil_url"
# Characters of a base64 / hex / url-safe payload, and how many a bare link's query and
# fragment values may carry in total (keys and separators such as . & : not counted).
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_-]")
_LINK_PAYLOAD_LIMIT = 48
_LOCAL_HOST = re.compile(r"localhost|.+\.localhost|127(?:\.\d{1,3}){3}|\[::1\]", re.IGNORECASE)
_REMOTE = re.compile(r"(?:https?:)?//(?:[^/?#@]*@)?(\[[^\]/]*\]|[^/?#:]*)", re.IGNORECASE)
_QUERY_KEY = re.compile(r"(?:^|[&;])[^=&;]*=")
# "https://" with the colon or slashes written as HTML entities: a renderer decodes them.
_SCHEME = r"https?(?::|&colon;|&#0*58;?|&#x0*3a;?)(?:/|&sol;|&#0*47;?|&#x0*2f;?){2}"


def _decoded(url: str) -> str:
    """The URL a renderer would fetch: entities decoded, backslash escapes and spaces gone."""
    return re.sub(r"\\(.)|[\t\r\n]", r"\1", html.unescape(url))


def _remote(url: str) -> bool:
    """An http(s) or protocol-relative URL to a host other than loopback."""
    host = _REMOTE.match(url)
    return host is not None and _LOCAL_HOST.fullmatch(host.group(1)) is None


def _payload(url: str) -> int:
    """Opaque characters in the query values and the fragment, percent-decoded."""
    before, _, fragment = url.partition("#")
    query = before.partition("?")[2]
    values = _QUERY_KEY.sub(" ", unquote(query)) + unquote(fragment)
    return len(_OPAQUE.findall(values))


# Runs of base64 letters in the host and path: a run of 8+ characters mixing upper, lower
# and digits that does not read as words is data (U0VDUkVU splits into U 0 VD Uk VU;
# Screenshot2024 and iPhone12ProMax into words). Separators (. / - _ %20) end a run, so
# 480px-Open_proxy_h2g2bob.svg stays; so does data cut into runs of 7 or in one case, and
# lowercase hex or base32 (CDN hashes look the same): the price of keeping real images.
_PIECE = re.compile(r"[A-Za-z0-9+=]+")
_OPAQUE_PIECE = 8


def _opaque(piece: str) -> bool:
    if not (
        len(piece) >= _OPAQUE_PIECE
        and any(c.isupper() for c in piece)
        and any(c.islower() for c in piece)
        and any(c.isdigit() for c in piece)
    ):
        return False
    letters = [w for w in words(piece) if w.isalpha()]
    fragments = sum(len(w) <= 2 for w in letters)
    return (fragments >= 3 and fragments * 2 >= len(letters)) or not reads_like_words(piece)


def _data_in_path(url: str) -> bool:
    """Host or path of a remote URL carrying an opaque run (base64 split by dots or slashes)."""
    host = _REMOTE.match(url)
    if host is None:
        return False
    path = url[host.end() :].partition("#")[0].partition("?")[0]
    return any(_opaque(p) for p in _PIECE.findall(host.group(1) + "/" + unquote(path)))


def fetched_leaks(url: str) -> bool:
    """An auto-fetched resource URL that can carry data out: remote, with a query or payload,
    or with opaque data in its host or path."""
    url = _decoded(url)
    return _remote(url) and (
        "?" in url.partition("#")[0] or _payload(url) >= _LINK_PAYLOAD_LIMIT or _data_in_path(url)
    )


def link_leaks(url: str) -> bool:
    url = _decoded(url)
    return _remote(url) and _payload(url) >= _LINK_PAYLOAD_LIMIT


# --- Markdown images: ![alt](dest "title") ------------------------------------------------------
# Scanned by hand: the alt text may hold balanced brackets (![a[b]c](…)) and the destination
# balanced parentheses at any depth, which no linear regex follows.
_MD_IMAGE = re.compile(r"!\[")
_MAX_ALT = 1000


def _close_bracket(text: str, pos: int) -> int:
    """Index after the "]" closing an alt text that starts at ``pos``, or -1."""
    depth, end = 1, min(len(text), pos + _MAX_ALT)
    while pos < end:
        char = text[pos]
        if char == "\\":
            pos += 1
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return pos + 1
        elif char == "\n" and text.startswith("\n", pos + 1):
            return -1  # a blank line ends the paragraph
        pos += 1
    return -1


def _destination(text: str, pos: int) -> tuple[int, int] | None:
    """Span of the link destination after "(" at ``pos`` (``<…>`` or balanced-paren form)."""
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if text.startswith("<", pos):
        end = text.find(">", pos)
        return None if end < 0 or "\n" in text[pos:end] else (pos + 1, end)
    start, depth = pos, 0
    while pos < len(text) and not text[pos].isspace():
        char = text[pos]
        if char == "\\":
            pos += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                break
            depth -= 1
        pos += 1
    return (start, min(pos, len(text))) if pos > start else None


# A link reference definition: up to 3 spaces, "[label]:", the destination (maybe on the
# next line, maybe in <…>), an optional title. Starts at the literal "[" (the line start is
# checked by hand), and is only looked for when an image refers to a label.
_REFERENCE = re.compile(
    r"\[(?P<label>[^\[\]\n]{1,999})\]:[ \t]*(?:\r?\n[ \t]*)?"
    r"(?:<(?P<angle>[^<>\n]*)>|(?P<bare>[^\s<>]+))"
)


def _label(label: str) -> str:
    """A reference label as CommonMark matches it: case-folded, inner spaces collapsed."""
    return " ".join(label.split()).casefold()


def _reference_edits(text: str, labels: set[str]) -> list[tuple[int, int, str]]:
    """Definitions of the labels an image uses, whose URL a renderer would fetch and leak."""
    edits = []
    for ref in _REFERENCE.finditer(text):
        line_start = line_span(text, ref.start())[0]
        indent = text[line_start : ref.start()]
        if len(indent) > 3 or indent.strip(" ") or _label(ref["label"]) not in labels:
            continue
        group = "angle" if ref["angle"] is not None else "bare"
        if fetched_leaks(ref[group]):
            edits.append((*ref.span(group), marker(KIND)))
    return edits


def markdown_images(text: str, kinds: list[str]) -> str:
    """Inline images (``![a](url)``) and the definitions reference images use (``![a][r]``,
    ``![a][]``, ``![a]``) whose URL leaks when the image is shown."""
    edits, labels = [], set()
    for match in _MD_IMAGE.finditer(text):
        close = _close_bracket(text, match.end())
        if close < 0:
            continue
        if not text.startswith("(", close):
            end = text.find("]", close + 1) if text.startswith("[", close) else -1
            label = text[close + 1 : end] if end > close + 1 else text[match.end() : close - 1]
            labels.add(_label(label))
            continue
        span = _destination(text, close + 1)
        if span and fetched_leaks(text[span[0] : span[1]]):
            edits.append((*span, marker(KIND)))
    if labels:
        edits += _reference_edits(text, labels)
    kinds += [KIND] * len(edits)
    return splice(text, edits) if edits else text


# --- HTML / SVG attributes of fetched resources ----------------------------------------------
_TAG = re.compile(r"<(?P<tag>[A-Za-z][\w:-]{0,40})(?=[\s/])[^<>]{0,4000}>")
_ATTR = re.compile(
    r"(?P<name>[^\s\"'<>/=]+)[ \t\r\n]*=[ \t\r\n]*"
    r"(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|(?P<bare>[^\s\"'<>`]+))"
)
_FETCHED = frozenset({"src", "srcset", "imagesrcset", "poster", "background", "data", "lowsrc"})
_LINK_TAGS = frozenset({"a", "area", "base"})
_TOKEN = re.compile(r"[^\s,]+(?:,[^\s,]+)*")


def _fetched_attribute(tag: str, name: str) -> bool:
    name = name.lower()
    return name in _FETCHED or (
        name in ("href", "xlink:href") and tag.lower().rpartition(":")[2] not in _LINK_TAGS
    )


def _redact_tag(match: re.Match[str]) -> tuple[str, str] | None:
    tag_text, edits = match.group(0), []
    for attr in _ATTR.finditer(tag_text):
        group = attr.lastgroup or "bare"
        if not _fetched_attribute(match["tag"], attr["name"]):
            continue
        # srcset is "url 1x, url 2x"; any other value is one URL, padded with spaces at most
        for token in _TOKEN.finditer(attr[group]):
            url = token.group(0).rstrip(",")
            if fetched_leaks(url):
                start = attr.start(group) + token.start()
                edits.append((start, start + len(url), marker(KIND)))
    if not edits:
        return None
    return KIND, splice(tag_text, edits)


HTML_RESOURCES = Rule(_TAG, _redact_tag)

# --- CSS url(…) and @import "…" ---------------------------------------------------------------
_CSS_URL = re.compile(
    r"[Uu@](?:(?<=[Uu])(?i:rl)\([ \t]*|(?<=@)(?i:import)[ \t]+)[\"']?(?P<url>[^\s\"'()<>]{1,4000})"
)
CSS_RESOURCES = Gated(
    ("url(", "@import"),
    Rule(
        _CSS_URL,
        lambda m: (
            (KIND, m.group(0)[: m.start("url") - m.start()] + marker(KIND))
            if fetched_leaks(m["url"])
            else None
        ),
    ),
    lower=True,
)

# --- bare links and Markdown link destinations ------------------------------------------------
_URL = re.compile(r"[Hh](?i:" + _SCHEME[1:] + r")[^\s<>\"'`]+")


def _split_trailing(url: str) -> tuple[str, str]:
    """URL and the punctuation after it, as GitHub autolinks do: ``(see https://x/a).`` ."""
    opens, closes, end = url.count("("), url.count(")"), len(url)
    while end and (url[end - 1] in ".,:;!?*'\"]}" or (url[end - 1] == ")" and closes > opens)):
        closes -= url[end - 1] == ")"
        end -= 1
    return url[:end], url[end:]


def _redact_link(match: re.Match[str]) -> tuple[str, str] | None:
    url, tail = _split_trailing(match.group(0))
    return (KIND, marker(KIND) + tail) if link_leaks(url) else None


LINKS = Rule(_URL, _redact_link)
