"""Literal or regex search over the stored text of documents, bounded in count and time.

Patterns run over the stored text, which was redacted on the way in, so no pattern can
test a secret character by character (issue 7 item 3: a match / no-match oracle once
recovered an AWS secret in 1,299 calls). Each returned line is redacted whole before it
is cut to ``MAX_LINE_CHARS``.

Patterns run on the third-party ``regex`` engine because it takes a ``timeout``: the
standard ``re`` cannot be interrupted, so one catastrophic pattern such as ``(a|aa)+$``
could hang the server. The whole call also shares one deadline across documents.
"""

from __future__ import annotations

import bisect
import fnmatch
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex

from kb_mcp.errors import InvalidInput
from kb_mcp.redact import redact_output

MAX_LINE_CHARS = 500  # a matched line is cut to this many characters around the match
MAX_PATTERN_CHARS = 1_000
_NEWLINE = regex.compile("\n")


@dataclass(frozen=True, slots=True)
class GrepMatch:
    doc: str
    path: str
    line_number: int
    line: str


@dataclass(frozen=True, slots=True)
class GrepResult:
    pattern: str
    matches: tuple[GrepMatch, ...]
    truncated: bool
    timed_out: bool
    documents_scanned: int


def compile_pattern(pattern: str, *, is_regex: bool, ignore_case: bool) -> regex.Pattern:
    """The compiled pattern, or ``InvalidInput`` naming what is wrong with it."""
    if not pattern:
        raise InvalidInput("pattern is empty; give the text (or regex) to look for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(
            f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
        )
    flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
    source = pattern if is_regex else regex.escape(pattern)
    try:
        return regex.compile(source, flags | regex.V0)
    except regex.error as exc:
        raise InvalidInput(
            f"invalid regular expression {pattern!r}: {exc}",
            hint="to search for the text literally, drop --regex (CLI) or pass regex=false (MCP)",
        ) from exc


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def _line_at(starts: list[int], offset: int) -> int:
    """The 0-based index of the line holding ``offset``."""
    return bisect.bisect_right(starts, offset) - 1


def _line_text(starts: list[int], text: str, index: int, offset: int) -> str:
    """The redacted, cut text of line ``index``, with the window around ``offset``.

    The whole line is redacted before it is cut (issue 7 item 3): a cut first could keep
    the tail of a secret whose key word or prefix fell outside the window, which no
    redaction can recognise afterwards. The window is centred on where the match lands in
    the redacted line.
    """
    end = text.find("\n", starts[index])
    raw = text[starts[index] : end if end != -1 else len(text)]
    line = redact_output(raw).text
    if len(line) > MAX_LINE_CHARS:
        column = len(redact_output(raw[: offset - starts[index]]).text)
        begin = max(0, min(column, len(line)) - MAX_LINE_CHARS // 2)
        line = line[begin : begin + MAX_LINE_CHARS]
    return line


def _shown_path(path: str) -> str:
    """The path as output shows it: a glob is matched against this, never the raw path,
    or ``path_glob`` would be an oracle for a secret in a file name (``ghp_a*`` → 1 match,
    ``ghp_b*`` → 0)."""
    return redact_output(path).text


def grep_texts(
    texts: Iterable[tuple[str, str, str]],
    compiled: regex.Pattern,
    *,
    path_glob: str | None,
    max_matches: int,
    timeout_s: float,
) -> tuple[list[GrepMatch], bool, bool, int]:
    """Scan ``(doc, path, text)`` triples; one match per matching line, in document order.

    After a match the scan jumps to the next line, so a line matching 60,000 times costs
    one search and one redaction, not 60,000 (an outside run saw a 960 KB single-line file
    take grep to 9 s against its 3 s limit). Returns (matches, truncated, timed_out,
    documents scanned).
    """
    deadline = time.monotonic() + timeout_s
    matches: list[GrepMatch] = []
    scanned = 0
    for doc, path, text in texts:
        if path_glob and not fnmatch.fnmatchcase(_shown_path(path), path_glob):
            continue
        if deadline - time.monotonic() <= 0:
            return matches, False, True, scanned
        scanned += 1
        try:
            for number, line in _matching_lines(text, compiled, deadline):
                if len(matches) >= max_matches:  # a further line matches: we cut here
                    return matches, True, False, scanned
                matches.append(GrepMatch(doc, path, number, line))
        except TimeoutError:
            return matches, False, True, scanned
    return matches, False, False, scanned


def _matching_lines(
    text: str, compiled: regex.Pattern, deadline: float
) -> Iterator[tuple[int, str]]:
    """(1-based line number, shown line) of each line where a match starts, in order.

    Raises ``TimeoutError`` once ``deadline`` (monotonic) has passed.
    """
    starts: list[int] = []
    pos = 0
    while pos <= len(text):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        found = compiled.search(text, pos, timeout=remaining)
        if found is None:
            return
        starts = starts or _line_starts(text)
        index = _line_at(starts, found.start())
        yield index + 1, _line_text(starts, text, index, found.start())
        if index + 1 >= len(starts):
            return
        pos = starts[index + 1]
