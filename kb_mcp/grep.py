"""Literal or regex search over the stored text of documents, bounded in count, time and memory.

Patterns run over the stored text, which was redacted on the way in, so no pattern can
test a secret character by character (issue 7 item 3: a match / no-match oracle once
recovered an AWS secret in 1,299 calls). Each returned line is redacted whole before it
is cut to ``MAX_LINE_CHARS``.

Patterns run on RE2 (``google-re2``), an automaton engine: matching is linear in the
text and a compiled pattern's memory is capped (``MAX_PATTERN_MEMORY``). The backtracking
``regex`` engine used before took a ``timeout`` for matching but nothing bounded its
memory (issue 20 item 1): compiling ``a{3000000}`` cost 842 MB and ``a{4294967294}``
took ``kb-mcp serve`` to 23 GB, because counted repeats were expanded before any limit
applied; and after compiling, ``(?:(?=(a))…a)*$`` (140 lookahead captures) copied every
capture at every character, 362 MB for one 1,000-character line. RE2 refuses what would
cost that: repeats over 1,000 (nested ones multiply), programs over the memory cap, and
the constructs that need backtracking (lookaround, backreferences, possessive and atomic
groups), each an ``InvalidInput`` naming the reason. ``\\w``, ``\\d`` and ``\\b`` are ASCII
there; ``\\pL``, ``\\p{Han}`` and the like name Unicode classes.

RE2 cannot be interrupted, so the text is searched in windows of ``WINDOW_BYTES`` and the
deadline, shared by the whole call, is checked between them: an automaton that falls
back from its DFA to the slower NFA (``(?i)\\p{L}{200}z`` ran 3.6 µs a byte) overruns it
by one window at most. A match is looked for within one window, the next overlapping it
by ``WINDOW_OVERLAP_BYTES``: a match longer than that (a multi-line one) can be missed.
"""

from __future__ import annotations

import bisect
import fnmatch
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import re2

from kb_mcp.errors import InvalidInput
from kb_mcp.redact import redact_output

MAX_LINE_CHARS = 500  # a matched line is cut to this many characters around the match
MAX_PATTERN_CHARS = 1_000
# RE2's own default: a compiled pattern (program and DFA cache) stays within 8 MiB.
MAX_PATTERN_MEMORY = 8 << 20
# RE2's limit on a counted repeat ({n}, {n,}, {n,m}; nested ones multiply). RE2 reads a
# count too large for its integer as literal text (``a{4294967294}`` would look for those
# 13 characters), so ``_check_repeat_counts`` refuses any count over it first.
MAX_REPEAT = 1_000
# 64 KiB a window: the slowest automaton measured (3.6 µs a byte) spends 0.24 s on one,
# and the per-window overhead (one call) is nothing beside a document's search.
WINDOW_BYTES = 1 << 16
WINDOW_OVERLAP_BYTES = 1 << 13
_HINT = "to search for the text literally, drop --regex (CLI) or pass regex=false (MCP)"
_SYNTAX = (
    "grep regexes are RE2 syntax: no lookaround or backreferences, repeats up to "
    f"{{{MAX_REPEAT}}}, nested repeats up to {MAX_REPEAT:,} times in all"
)
_UTF8 = "surrogatepass"  # stored text is valid Unicode; never fail on an odd code point


class CompiledPattern(Protocol):
    """A compiled RE2 pattern over UTF-8 bytes (``re2.compile`` returns one)."""

    def search(self, text: bytes, pos: int, endpos: int) -> Any:
        """The leftmost match within ``text[pos:endpos]`` (its ``start()``), or None."""


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


def compile_pattern(pattern: str, *, is_regex: bool, ignore_case: bool) -> CompiledPattern:
    """The compiled pattern, or ``InvalidInput`` naming what is wrong with it."""
    if not pattern:
        raise InvalidInput("pattern is empty; give the text (or regex) to look for")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(
            f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
        )
    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False  # the reason goes to the caller, not to stderr
    options.literal = not is_regex
    options.case_sensitive = not ignore_case
    options.never_capture = True  # only where a match starts is used: a faster automaton
    # ^ and $ at every line, as grep users expect (RE2 has no option for it: a flag).
    source = pattern if not is_regex else "(?m)" + pattern
    try:
        if is_regex:
            _check_repeat_counts(pattern)
        return re2.compile(source.encode("utf-8", _UTF8), options)
    except (re2.error, UnicodeError) as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else reason
        raise InvalidInput(
            f"invalid regular expression {pattern!r}: {reason} ({_SYNTAX})", hint=_HINT
        ) from exc


def _check_repeat_counts(pattern: str) -> None:
    """``re2.error`` for a counted repeat over ``MAX_REPEAT``, wherever it is.

    A scan, not a parse: escapes (with ``\\p{…}`` / ``\\x{…}`` arguments) and character
    classes are skipped, where braces are not repeats; any other ``{n}``, ``{n,}`` or
    ``{n,m}`` is. RE2 refuses every count from 1,001 up to about two billion itself; this
    catches the larger ones it would read as literal text.
    """
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            if pattern[at - 1 : at] in ("p", "P", "x") and pattern[at : at + 1] == "{":
                at = pattern.find("}", at) + 1 or len(pattern)
        elif char == "[":
            at = _class_end(pattern, at)
        elif char == "{":
            body = pattern[at + 1 : pattern.find("}", at)] if "}" in pattern[at:] else ""
            counts = body.split(",")
            is_repeat = len(counts) <= 2 and counts[0] != "" and all(map(_is_count, counts))
            if is_repeat and max(int(c) for c in counts if c) > MAX_REPEAT:
                raise re2.error(f"invalid repetition size: {{{body}}}")
            at += 1
        else:
            at += 1


def _is_count(text: str) -> bool:
    return text == "" or (text.isascii() and text.isdigit())


def _class_end(pattern: str, start: int) -> int:
    """Just past the character class opening at ``start`` (``[]a]``, ``[^]a]``, ``[[:alpha:]]``)."""
    at = start + 1
    if pattern[at : at + 1] == "^":
        at += 1
    if pattern[at : at + 1] == "]":
        at += 1
    while at < len(pattern):
        if pattern[at] == "\\":
            at += 2
        elif pattern.startswith("[:", at) and ":]" in pattern[at + 2 :]:
            at = pattern.index(":]", at + 2) + 2
        elif pattern[at] == "]":
            return at + 1
        else:
            at += 1
    return at


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    at = data.find(b"\n")
    while at != -1:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    return starts


def _line_at(starts: list[int], offset: int) -> int:
    """The 0-based index of the line holding byte ``offset``."""
    return bisect.bisect_right(starts, offset) - 1


def _line_text(raw: str, column: int) -> str:
    """The redacted, cut text of line ``raw``, with the window around character ``column``.

    The whole line is redacted before it is cut (issue 7 item 3): a cut first could keep
    the tail of a secret whose key word or prefix fell outside the window, which no
    redaction can recognise afterwards. The window is centred on where the match lands in
    the redacted line.
    """
    line = redact_output(raw).text
    if len(line) > MAX_LINE_CHARS:
        column = len(redact_output(raw[:column]).text)
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
    compiled: CompiledPattern,
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
    text: str, compiled: CompiledPattern, deadline: float
) -> Iterator[tuple[int, str]]:
    """(1-based line number, shown line) of each line where a match starts, in order.

    Searches the UTF-8 bytes window by window (see the module docstring); RE2 sees the
    whole text around a window, so ``^``, ``$`` and ``\\b`` at its edges mean what they
    mean in the text. Raises ``TimeoutError`` once ``deadline`` (monotonic) has passed.
    """
    data = text.encode("utf-8", _UTF8)
    starts: list[int] = []
    pos = 0
    while pos <= len(data):
        if deadline - time.monotonic() <= 0:
            raise TimeoutError
        end = (
            len(data) if len(data) - pos <= WINDOW_BYTES else _char_start(data, pos + WINDOW_BYTES)
        )
        found = compiled.search(data, pos, end)
        if found is None:
            if end == len(data):
                return
            pos = _char_start(data, end - WINDOW_OVERLAP_BYTES)
            continue
        starts = starts or _line_starts(data)
        index = _line_at(starts, found.start())
        line_end = starts[index + 1] - 1 if index + 1 < len(starts) else len(data)
        raw = data[starts[index] : line_end].decode("utf-8", _UTF8)
        column = len(data[starts[index] : found.start()].decode("utf-8", _UTF8))
        yield index + 1, _line_text(raw, column)
        if index + 1 >= len(starts):
            return
        pos = starts[index + 1]


def _char_start(data: bytes, at: int) -> int:
    """``at``, moved back to the first byte of the UTF-8 character it falls in."""
    while at > 0 and data[at] & 0xC0 == 0x80:
        at -= 1
    return at
