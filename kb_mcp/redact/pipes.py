"""Markdown pipe tables with a column named like a secret, and so every DOCX table.

Trigger: ``| user | password |`` over ``| alice | Tq8mZ2xL9w |`` kept the password: the
CSV rule wants commas or tabs, and every DOCX table becomes such a pipe table (issue 20).
Outcome: a header row followed by a delimiter row (``|---|:--:|``) is read as a table; a
column whose header is a secret name (``Password``, ``API key``, ``Passwort``, ``密码``) has
every cell of the rows below redacted but empty cells and stand-ins (``****``, ``<your
password>``); a column whose header is only key-like (``Key``, ``Session``, ``Auth``) has the
cells that look generated redacted (``generic.looks_generated``). The rows end at the first
line without a ``|``. Backticks around a cell are kept.
"""

from __future__ import annotations

import itertools
import re

from kb_mcp.redact._rule import is_placeholder, line_span, marker, splice
from kb_mcp.redact.generic import looks_generated
from kb_mcp.redact.keywords import KEY_WORD, PASSWORD_WORD, SECRET_WORD, key_like, word_kind

# Each run of blanks has one place to go (``[ \t]*(?:\|[ \t]*)?``, not ``[ \t]*\|?[ \t]*``):
# two blank runs side by side made ``re`` try every split of an indented line's blanks
# before failing on it (0.41 s for the tables among 20 MB of package text, not 0.14).
_DELIMITER = re.compile(
    r"\n[ \t]*(?:\|[ \t]*)?:?-{2,}:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*(?:\|[ \t]*)?\r?(?=\n|$)"
)
_SECRET_NAME = re.compile(rf"(?:^|(?<=[_ -])){KEY_WORD}s?$")
_LOCAL_PASSWORD = re.compile(rf"(?i:{PASSWORD_WORD})")
_LOCAL_SECRET = re.compile(rf"(?i:{SECRET_WORD})")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_ASIDE = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def _cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of a row's cell texts, trimmed, without the outer pipes."""
    bounds = [start - 1, *(m.start() for m in _CELL_SPLIT.finditer(text, start, end)), end]
    spans = []
    for a, b in itertools.pairwise(bounds):
        cell = text[a + 1 : b]
        lead = len(cell) - len(cell.lstrip())
        spans.append((a + 1 + lead, a + 1 + len(cell.rstrip())))
    if spans and spans[0][0] == spans[0][1] and text[start:end].lstrip().startswith("|"):
        spans = spans[1:]
    if spans and spans[-1][0] == spans[-1][1] and text[start:end].rstrip().endswith("|"):
        spans = spans[:-1]
    return spans


def _column(name: str) -> tuple[str, bool] | None:
    """(kind, strong) for a header cell that names a secret (strong) or is key-like."""
    # "**Password** (prod)", "Passwort:": the words, without emphasis, asides and colons
    name = " ".join(_ASIDE.sub(" ", name).replace("*", " ").replace("`", " ").split())
    name = name.strip("_ :")
    if _SECRET_NAME.search(name.replace(" ", "_")) or _SECRET_NAME.search(name):
        return word_kind(name), True
    if _LOCAL_PASSWORD.search(name):
        return "password", True
    # the header's last word says what the column holds: "Session key", not "Key type"
    last = (name.split() or [""])[-1]
    if key_like(last) or (not name.isascii() and _LOCAL_SECRET.search(name)):
        return "secret", False
    return None


def _headers(text: str) -> list[tuple[int, int, dict[int, tuple[str, bool]]]]:
    """(header start, delimiter end, secret columns) of each table naming a secret column."""
    found = []
    for delimiter in _DELIMITER.finditer(text):
        start, end = line_span(text, delimiter.start() - 1) if delimiter.start() else (0, 0)
        if "|" not in text[start:end] and "|" not in delimiter.group(0):
            continue
        names = [text[a:b] for a, b in _cells(text, start, end)]
        columns = {i: col for i, name in enumerate(names) if (col := _column(name))}
        if columns:
            found.append((start, delimiter.end(), columns))
    return found


def _value(text: str, a: int, b: int) -> tuple[int, int]:
    """A cell's value without the backticks or emphasis around it."""
    while b - a >= 2 and text[a] == text[b - 1] and text[a] in "`*_":
        a, b = a + 1, b - 1
    return a, b


def redact_pipe_columns(text: str, kinds: list[str]) -> str:
    """Cells under a secret-naming header of a Markdown pipe table (see the module)."""
    if "|" not in text or "--" not in text:
        return text
    edits = []
    for _start, row_end, columns in _headers(text):
        while row_end < len(text):
            start, row_end = line_span(text, row_end + 1)
            if "|" not in text[start:row_end]:
                break
            cells = _cells(text, start, row_end)
            for i, (kind, strong) in columns.items():
                if i >= len(cells):
                    continue
                a, b = _value(text, *cells[i])
                value = text[a:b]
                if is_placeholder(value) or (not strong and not looks_generated(value)):
                    continue
                edits.append((a, b, marker(kind)))
                kinds.append(kind)
    return splice(text, edits) if edits else text


def open_table(text: str) -> int | None:
    """Where the header of a secret-naming pipe table starts when its rows may go on past
    the end of ``text`` (``redact.stream`` carries that header into the next window)."""
    headers = _headers(text)
    if not headers:
        return None
    start, row_end, _columns = headers[-1]
    while row_end < len(text):
        line_start, row_end = line_span(text, row_end + 1)
        if line_start == len(text):
            break
        if "|" not in text[line_start:row_end]:
            return None
    return start
