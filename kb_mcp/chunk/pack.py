"""Packing spans into chunks, shared by the Markdown and code chunkers. Pure.

- ``LineIndex`` turns offsets into line numbers, counting lines at ``\\n`` only (as
  ``read`` and ``grep`` do).
- ``pack_units`` packs unsplittable spans greedily up to a character budget, and opens each
  pack after the first with overlap carried from the one before: whole units, or whole
  sentences of a prose unit.
- ``cap_spans`` is the last step of every chunker: whatever the input (a giant code fence,
  a table, a minified line, an unterminated fence), no chunk's text exceeds
  ``chunk_cap(budget)``. An oversized span is cut at line boundaries into pieces within the
  budget, and a line longer than the cap is cut inside itself by ``hard_spans`` (at
  whitespace when there is some), so such pieces share one line span.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

# ≈ 400–450 tokens of English prose at ~4 chars/token: small enough that a citation points
# at the passage that answered, large enough that a typical section or abstract stays whole.
# Measured with `kb-mcp bench retrieval` (issue #3): 1200, 2500 and 4000 scored within
# noise of 1800 on SciFact train (0.705-0.707 nDCG@10), so the smaller, citable size stays.
DEFAULT_BUDGET_CHARS = 1800
# One or two sentences of context carried across a chunk boundary: ~11% of the budget, inside
# the 10–20% rule of thumb of RAG chunking guides. Overlap 0 and 400 were within noise
# on SciFact train (issue #3).
DEFAULT_OVERLAP_CHARS = 200
# Hard cap on a chunk's text, as a multiple of the budget (issue 7 item 11: a minified .js
# became one 1.37 MB passage). Why 1.5: atomic blocks (fences, tables, definitions) a little
# over budget stay whole, since a citation of the whole block beats a big piece plus a
# crumb; past half a budget of slack, keeping a block whole costs more context than it
# saves. Under it, a search answer of top_k passages stays bounded (10 × 2,700 chars).
CAP_FACTOR = 1.5
# A sentence ends at . ! ? followed by whitespace (closing quotes/brackets stay with it), or at
# CJK 。！？； which need no space after them.
SENTENCE_END = re.compile(r"[.!?]+[\"')\]”’»]*(?=\s)|[。！？；]+[」』”’）]*")


@dataclass(frozen=True, slots=True)
class LineIndex:
    """Where each ``\\n``-separated line starts, to turn offsets into line numbers."""

    lines: list[str]  # without their terminator (``\n`` or ``\r\n``)
    starts: list[int]

    def line_of(self, offset: int) -> int:
        """The 1-based number of the line holding the character at ``offset``."""
        return bisect_right(self.starts, offset)

    def end(self, index: int) -> int:
        """Offset just past the last character of line ``index``, before its terminator."""
        return self.starts[index] + len(self.lines[index])


@dataclass(frozen=True, slots=True)
class Unit:
    """A span the packer never splits; ``prose`` lets overlap start at one of its sentences."""

    start: int
    end: int
    prose: bool = False


def chunk_cap(budget: int) -> int:
    """The most characters any chunk may hold for ``budget`` (see ``CAP_FACTOR``)."""
    return int(budget * CAP_FACTOR)


def index_lines(text: str) -> LineIndex:
    """Lines split at ``\\n`` only, the numbering every citation uses (see the module docstring).

    A ``\\r`` before the ``\\n`` is kept out of the line, so CRLF text reads like LF text.
    """
    raw = text.split("\n")
    starts = list(accumulate((len(line) + 1 for line in raw), initial=0))[:-1]
    return LineIndex([line.removesuffix("\r") for line in raw], starts)


def pack_units(
    text: str, units: Sequence[Unit], budget: int, overlap: int
) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of greedy packs of whole units up to ``budget``.

    Each pack after the first opens with overlap carried from the one before. A unit that
    alone exceeds the budget becomes a pack of its own.
    """
    if not units:
        return []
    packed: list[tuple[int, int]] = []
    start, first = units[0].start, 0
    for i in range(1, len(units)):
        unit = units[i]
        if unit.end - start <= budget:
            continue
        end = units[i - 1].end
        packed.append((start, end))
        # Overlap must fit both the overlap allowance and, with this unit, the budget.
        floor = max(end - overlap, unit.end - budget, start + 1)
        carried = _overlap_start(text, units[first:i], floor)
        start, first = (unit.start if carried is None else carried), i
    packed.append((start, units[-1].end))
    return packed


def _overlap_start(text: str, tail: Sequence[Unit], floor: int) -> int | None:
    """The earliest unit (or prose sentence) start ≥ ``floor`` among the chunk's last units."""
    best = None
    for unit in reversed(tail):
        if unit.start >= floor:
            best = unit.start
            continue
        if unit.prose:
            starts = (s for s, _ in sentence_spans(text, unit.start, unit.end) if s >= floor)
            best = next(starts, best)
        break
    return best


def sentence_spans(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Sentence spans within ``[start, end)``, without the whitespace between them."""
    pos = skip_space(text, start, end)
    for match in SENTENCE_END.finditer(text, start, end):
        if match.end() > pos:
            yield pos, match.end()
            pos = skip_space(text, match.end(), end)
    if pos < end:
        yield pos, trim_space(text, pos, end)


def skip_space(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


def trim_space(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def cap_spans(
    text: str, index: LineIndex, spans: Sequence[tuple[tuple[str, ...], int, int]], budget: int
) -> list[tuple[tuple[str, ...], int, int]]:
    """``spans`` with each one over ``chunk_cap(budget)`` cut into pieces within the cap.

    Pieces are runs of whole lines packed up to ``budget``; a line over the cap is cut by
    ``hard_spans``. Every piece is a slice of its span, so text and line spans stay exact.
    """
    cap = chunk_cap(budget)
    capped: list[tuple[tuple[str, ...], int, int]] = []
    for path, start, end in spans:
        if end - start <= cap:
            capped.append((path, start, end))
        else:
            capped.extend((path, a, b) for a, b in _line_pieces(text, index, start, end, budget))
    return capped


def _line_pieces(
    text: str, index: LineIndex, start: int, end: int, budget: int
) -> list[tuple[int, int]]:
    """``[start, end)`` as greedy runs of whole lines up to ``budget``, long lines cut hard."""
    cap = chunk_cap(budget)
    pieces: list[tuple[int, int]] = []
    run: tuple[int, int] | None = None
    for i in range(index.line_of(start) - 1, index.line_of(end - 1)):
        a = max(start, index.starts[i])
        b = trim_space(text, a, min(end, index.end(i)))
        if skip_space(text, a, b) >= b:
            continue  # a blank line opens or ends no piece
        if run is not None and b - run[0] <= budget:
            run = (run[0], b)
            continue
        if run is not None:
            pieces.append(run)
        run = None
        if b - a > cap:
            pieces.extend(hard_spans(text, skip_space(text, a, b), b, budget))
        else:
            run = (a, b)
    if run is not None:
        pieces.append(run)
    return pieces


def hard_spans(text: str, start: int, end: int, budget: int) -> list[tuple[int, int]]:
    """Pieces ≤ budget, cut at the last whitespace in the back half of each window.

    Without such whitespace (a CJK run, a long URL, minified code) the cut falls at the
    budget, which is a character boundary: Python strings index code points.
    """
    pieces: list[tuple[int, int]] = []
    while end - start > budget:
        limit = start + budget
        cut = max(text.rfind(ch, start + budget // 2, limit + 1) for ch in " \t\n\r\u3000")
        cut = limit if cut <= start else cut
        pieces.append((start, trim_space(text, start, cut)))
        start = skip_space(text, cut, end)
    if start < end:
        pieces.append((start, end))
    return pieces
