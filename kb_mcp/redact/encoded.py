"""Base64 blobs whose decoding holds a secret: a base64-wrapped PEM key (``LS0tLS1CRUdJTi…``),
a Kubernetes ``.dockerconfigjson`` (``eyJhdXRocyI6…``), a Secret's ``data:`` values.

Trigger: a key or a registry login base64-encoded once more passed every rule, since none
reads through an encoding (issue 20). Outcome: a run of 24+ base64 (or base64url)
characters, and the full-width base64 lines that continue it, is decoded; when the decoding
is text and ``redact`` finds a secret in it, every line of the blob becomes a marker of the
kind found there. Binary decodings (images, certificates in DER, compressed data) are not
text and stay, so a data URI costs one decode.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

from kb_mcp.redact._rule import marker, splice

# 24 characters: base64 of "password=" and a 9-character value. Led by the character
# before the run (a class ``re`` skips to in C, once per word) rather than a lookbehind
# (which made it try every letter: 0.19 s for 5 MB, not 0.10); the text's first run has no
# character before it and is matched on its own (``_blobs``).
_RUN = r"(?P<blob>[A-Za-z0-9+/_-]{24,}={0,2})(?![A-Za-z0-9+/_=-])"
_FIRST_BLOB = re.compile(_RUN)
_BLOB = re.compile(r"[^A-Za-z0-9+/_=-]" + _RUN)
_LINE = re.compile(r"[ \t]*(?P<body>[A-Za-z0-9+/]{4,}={0,2})[ \t]*\r?")
MAX_BLOB = 256 * 1024
FULL_WIDTH = 60  # a wrapped line (76 for MIME, 64 for PEM); shorter ends the blob


def _decoded_text(blob: str) -> str | None:
    """The blob's decoding when it is text, else None."""
    padded = blob.rstrip("=") + "=" * (-len(blob.rstrip("=")) % 4)
    try:
        if "-" in blob or "_" in blob:
            raw = base64.urlsafe_b64decode(padded)
        else:
            raw = base64.b64decode(padded, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(c.isprintable() or c in "\n\r\t" for c in text)
    return text if text and printable >= 0.95 * len(text) else None


def _continuation(text: str, end: int) -> list[tuple[int, int]]:
    """Spans of the base64 lines continuing a blob that fills its line up to ``end``."""
    spans: list[tuple[int, int]] = []
    while end < len(text) and text[end] in "\r\n":
        start = text.find("\n", end) + 1
        if start == 0:
            break
        stop = text.find("\n", start)
        stop = len(text) if stop < 0 else stop
        line = _LINE.fullmatch(text, start, stop)
        if line is None:
            break
        spans.append(line.span("body"))
        if len(line["body"]) < FULL_WIDTH:
            break
        end = stop
    return spans


def _blobs(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the base64 runs standing alone (no base64 character or ``=`` either side)."""
    first = _FIRST_BLOB.match(text)
    if first:
        yield first.span("blob")
    for match in _BLOB.finditer(text):
        yield match.span("blob")


def redact_encoded(text: str, kinds: list[str]) -> str:
    """Base64 blobs that decode to text holding a secret (see the module)."""
    from kb_mcp.redact import redact  # the whole rule set reads the decoding

    edits: list[tuple[int, int, str]] = []
    taken = -1
    for start, end in _blobs(text):
        if start < taken:
            continue
        spans = [(start, end)]
        if end - start >= FULL_WIDTH:
            spans += _continuation(text, end)
        blob = "".join(text[a:b] for a, b in spans)
        if len(blob) > MAX_BLOB:
            continue
        decoded = _decoded_text(blob)
        if decoded is None:
            continue
        inner = redact(decoded)
        if not inner.count:
            continue
        kind = inner.kinds[0]
        edits += [(a, b, marker(kind)) for a, b in spans]
        kinds.append(kind)
        taken = spans[-1][1]
    return splice(text, edits) if edits else text
