"""Values cut over two lines: redacted as if the lines were one.

Trigger: every line rule sees one line, so a token split by string concatenation
(``"ghp_abc" +⏎ "def…"``, Python's implicit ``"ghp_abc"⏎ "def…"``), a shell ``\\``
continuation, or a value written on the line after its key ("the password is⏎ X",
``password:⏎   X``, ``密码：⏎X``) kept its value (issue 20). Outcome: such lines are joined
into one *virtual* line (the glue between the pieces dropped: the quotes and operator of a
concatenation, a backslash and newline; a key line and the next line meet at one space),
the whole credential rule set runs over it, and each new marker is mapped back onto the
pieces it covers, each piece getting its own marker. The newlines, the glue and every
character outside a value stay, so line numbers do not move.

Bounded: a chain joins at most ``MAX_LINES`` lines of at most ``MAX_CHARS`` characters
together. ``safe_cut`` keeps ``redact.stream`` from cutting a window inside a chain.
"""

from __future__ import annotations

import re

from kb_mcp.redact._rule import marker, splice
from kb_mcp.redact.keywords import (
    COPULA,
    COPULAS,
    KEY_WORD,
    PASSWORD_WORD,
    SECRET_WORD,
    may_name_a_secret,
)

MAX_LINES = 8
MAX_CHARS = 4096

_OPERATOR = r"(?:\+|\.\.?|&|\|\||~)?"
# A string literal closing at a line end (an operator after it) and the next opening at the
# next line's start (an operator before it), or ``"ghp_abc" + "def"`` on one line; one
# branch led by a quote (two made ``re`` try both at every quote: 5x slower), the quotes
# checked to be the same in ``_glues``.
_CONCAT = re.compile(
    rf"[\"'](?:[ \t]*{_OPERATOR}[ \t]*\\?\r?\n[ \t]*{_OPERATOR}[ \t]*"
    r"|[ \t]*(?:\+|\.\.|&|~)[ \t]*)[\"']"
)
_BACKSLASH = re.compile(r"\\\r?\n[ \t]*")
# A line ending in a separator or a copula, with more text on the next line: the text before
# must end in a key (``_KEY_BEFORE``). Each pattern starts with a class ``re`` skips to in
# C (a separator, a CJK copula, a blank before a word), so the other lines cost nothing.
# Blank lines and a code fence may come between ("The password is:⏎⏎```⏎X⏎```").
_NEXT_LINE = r"[ \t]*\r?\n(?:[ \t]*\r?\n){0,2}(?:[ \t]*(?:```|~~~)[\w+-]*[ \t]*\r?\n)?[ \t]*(?=\S)"
# "on", "er", "je" end too many words to be worth a line-end join
# "on", "er", "je" end too many words to be worth a line-end join
_ASCII_COPULAS = tuple(
    c for c in COPULAS if c.isascii() and c.isalpha() and c not in ("on", "er", "je")
)
_LINE_ENDS = (
    # not a colon closing code (``def f():``, ``d[k]:``, ``{…}:``)
    re.compile(rf"[:=：＝是为為はが는은—–](?<![)\]}}]:){_NEXT_LINE}"),
    # led by the newline (a literal ``re`` skips to), the copula checked behind it; first
    # the letter before the newline, which ends no copula on most lines (0.05 s of 5 MB
    # trying every copula behind every newline, 0.01 s with this guard)
    re.compile(
        r"\n(?i:(?<=["
        + "".join(sorted({w[-1] for w in _ASCII_COPULAS}))
        + r"\r]\n)(?:"
        + "|".join(f"(?<=[ \t]{w}\n)|(?<=[ \t]{w}\r\n)" for w in _ASCII_COPULAS)
        + r"))(?:[ \t]*\r?\n){0,2}(?:[ \t]*(?:```|~~~)[\w+-]*[ \t]*\r?\n)?[ \t]*(?=\S)"
    ),
)
_KEY_BEFORE = re.compile(
    rf"(?:{KEY_WORD}|(?i:{PASSWORD_WORD}|{SECRET_WORD}))s?[\"'`*]*[ \t]*"
    rf"(?:[:=：＝]|(?:(?i:[ \t]+(?:{COPULA}))|(?<=[^\x00-\x7f])(?:{COPULA}))[ \t]*[:：]?)\Z"
)
REACH = 64
# What may stand before the key on a line joined to the next: not code (``except
# InvalidToken:`` over ``pass``, ``if x == token:`` over ``continue``), so a statement
# ending in ``:`` never lends its key to the line below.
_CODE_HEAD = re.compile(
    r"[ \t]*(?:if|elif|else|while|for|def|class|with|try|except|return|case|switch|catch"
    r"|function|assert|raise|yield|lambda|async|await|var|let|const|match|when|unless)\b"
)
_CODE_MARKS = frozenset("()[]{}=<>;")


def _glues(text: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) of each join: what lies between two pieces of one value."""
    glues = [(m.start(), m.end(), "") for m in _CONCAT.finditer(text) if m[0][0] == m[0][-1]]
    if "\\\n" in text or "\\\r\n" in text:
        glues += [(m.start(), m.end(), "") for m in _BACKSLASH.finditer(text)]
    for m in (m for pattern in _LINE_ENDS for m in pattern.finditer(text)):
        newline = text.index("\n", m.start())
        head = text[max(text.rfind("\n", 0, m.start()) + 1, newline - REACH) : newline].rstrip()
        # a code statement first: the cheapest test, and the most lines ending in ":"
        if _CODE_HEAD.match(head) or not may_name_a_secret(head):
            continue
        key = _KEY_BEFORE.search(head)
        if key is None or not _CODE_MARKS.isdisjoint(head[: key.start()]):
            continue
        start = newline - 1 if text[newline - 1] == "\r" else newline
        glues.append((start, m.end(), " "))
    glues.sort()
    return glues


def _chains(text: str, glues: list[tuple[int, int, str]]) -> list[list[tuple[int, int, str]]]:
    """The glues grouped into chains of lines joined to one another."""
    chains: list[list[tuple[int, int, str]]] = []
    for glue in glues:
        if (
            chains
            and chains[-1][-1][1] >= glue[0] - MAX_CHARS
            and text.count("\n", chains[-1][-1][1], glue[0]) == 0
            and len(chains[-1]) < MAX_LINES
        ):
            if glue[0] >= chains[-1][-1][1]:
                chains[-1].append(glue)
            continue
        chains.append([glue])
    return chains


_MARKER = re.compile(r"\[REDACTED:([a-z_]+)\]")


def _replaced(before: str, after: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each span of ``before`` that ``after`` shows as a marker;
    ``after`` is ``before`` with spans replaced by markers and all else copied in order."""
    spans, pos = [], 0
    parts = _MARKER.split(after)  # literal, kind, literal, kind, …, literal
    for i in range(1, len(parts), 2):
        start = pos + len(parts[i - 1])
        following = parts[i + 1]
        if i + 2 >= len(parts):  # the last marker: the rest of before, less the tail
            end = len(before) - len(following)
        elif following:
            end = before.find(following, start + 1)
        else:
            end = start  # two markers side by side: cannot tell where one ends
        if end < start:
            return []
        spans.append((start, end, parts[i]))
        pos = end
    return spans


def redact_joined(text: str, kinds: list[str]) -> str:
    """Values split over joined lines (see the module)."""
    if "\n" not in text:
        return text
    glues = _glues(text)
    if not glues:
        return text
    from kb_mcp.redact import redact  # the whole rule set runs over each virtual line

    edits = []
    for chain in _chains(text, glues):
        first = text.rfind("\n", 0, chain[0][0]) + 1
        last = text.find("\n", chain[-1][1])
        last = len(text) if last < 0 else last
        if last - first > MAX_CHARS:
            continue
        pieces, virtual, pos = [], "", first  # pieces: (virtual start, original start, length)
        for start, end, glue in chain:
            pieces.append((len(virtual), pos, start - pos))
            virtual += text[pos:start] + glue
            pos = end
        pieces.append((len(virtual), pos, last - pos))
        virtual += text[pos:last]
        redacted = redact(virtual)
        if not redacted.count:
            continue
        for a, b, kind in _replaced(virtual, redacted.text):
            parts = []
            for v_start, o_start, length in pieces:
                lo, hi = max(a, v_start), min(b, v_start + length)
                span = (o_start + lo - v_start, o_start + hi - v_start)
                if lo < hi and "[REDACTED:" not in text[span[0] : span[1]]:
                    parts.append((*span, marker(kind)))
            edits += parts
            kinds += [kind] if parts else []
    return splice(text, edits) if edits else text


def safe_cut(text: str, cut: int) -> int:
    """The latest line start at or before ``cut`` that no chain crosses (``redact.stream``)."""
    for _ in range(MAX_LINES):
        if cut <= 0:
            return cut
        above = text.rfind("\n", 0, cut - 1) + 1
        glues = _glues(text[above : min(len(text), cut + MAX_CHARS)])
        if not any(start < cut - above <= end for start, end, _g in glues):
            return cut
        cut = above
    return cut
