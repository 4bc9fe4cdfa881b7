"""The second line of defence: a generated-looking value beside a key-like word.

Trigger: every rule before this one knows a format, a key name or a phrase, and each
adversarial run found the next one they did not know (issue 20: 31 of 49 made-up values
got through). Outcome: whatever the wording, a value that looks machine-generated (16+
characters of a token alphabet, letters and digits, high character entropy, not a name made
of words) is redacted when a key-like word stands before it on its line: an identifier one
of whose words hints at a secret (``keywords.key_like``: ``cache_key``, ``X-Auth``,
``session_id``, ``<meta name="api-key" content=…>``) or a secret or password word of
another language. ``pipes`` applies the same test to the cells of a column whose header is
key-like, and ``joined`` to a value on the line after its key.

Measured for false positives on public text (``kb-mcp bench redaction``; figures in
``docs/security.md``): what it takes there is mostly test fixtures and hashes beside the
word ``key``, which is the price of catching a key nobody listed.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from kb_mcp.redact._rule import marker, reads_like_words, splice
from kb_mcp.redact.keywords import PASSWORD_WORD, SECRET_WORD, key_like, may_name_a_secret

# A run of a token alphabet (base64, base64url, hex, JWT dots), padding kept with it.
_CANDIDATE = re.compile(r"[A-Za-z0-9+/_~.-]{16,1024}={0,3}")
_PARTS = re.compile(r"[./~+]+")
_DIGIT_OR_UPPER = re.compile(r"[0-9A-Z]")
# How far before a value its key word may stand, on the same line.
REACH = 64
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_FOREIGN_WORD = re.compile(rf"(?i:{PASSWORD_WORD}|{SECRET_WORD})")
# Bits per character: 16 distinct characters used evenly give 4; English words about 3.
MIN_ENTROPY = 3.2
MIN_DISTINCT = 10


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def looks_generated(value: str) -> bool:
    """Whether a value looks machine-made: 16+ characters of a token alphabet with letters,
    spread over 10+ distinct characters at 3.2+ bits each, and not a name, version or
    path made of words (``test_password_hashing_v2``, ``python3.11/site-packages``,
    ``padding.PKCS1v15``). Of random values it takes 99% of 32-character hex, base64 and
    base64url and 85-92% of 16-20 character base62 (the rest read like names)."""
    core = value.rstrip("=")
    if not 16 <= len(core) <= 1024 or "REDACTED" in core:
        return False
    if not any(c.isalpha() for c in core):
        return False
    if len(set(core)) < MIN_DISTINCT or _entropy(core) < MIN_ENTROPY:
        return False
    # a name, version or path made of words: test_password_hashing_v2, python3.11/site-packages
    parts = [p for p in _PARTS.split(core) if p]
    if all(p.isdigit() or (len(p) >= 4 and reads_like_words(p)) for p in parts):
        return False
    # a dotted name or a URL path (``padding.PKCS1v15``, ``//github.com/…/f2e02883e7``);
    # base64 has no dots, and its "/"-cut pieces are seldom three words
    plain = sum(p.isalpha() and len(p) >= 3 and reads_like_words(p) for p in parts)
    return not (("." in core and plain >= 1) or plain >= 3)


def _keyed(line: str) -> bool:
    """Whether the text before a value holds a key-like word."""
    if any(key_like(m.group(0)) for m in _IDENTIFIER.finditer(line)):
        return True
    return not line.isascii() and _FOREIGN_WORD.search(line) is not None


def redact_generated_values(text: str, kinds: list[str]) -> str:
    """Generated-looking values with a key-like word before them on their line."""
    edits = []
    for match in _CANDIDATE.finditer(text):
        value = match.group(0).rstrip(".")
        # all lower case and no digit: an identifier (``m.__pydantic_private__``), not data;
        # tested first, the cheapest test that most candidates in code fail
        if not _DIGIT_OR_UPPER.search(value):
            continue
        start = match.start()
        line_start = text.rfind("\n", 0, start) + 1
        before = text[max(line_start, start - REACH) : start]
        if not may_name_a_secret(before) or before.endswith("base64,"):  # base64,: a data URI
            continue
        if looks_generated(value) and _keyed(before):
            edits.append((start, start + len(value), marker("secret")))
    kinds += ["secret"] * len(edits)
    return splice(text, edits) if edits else text
