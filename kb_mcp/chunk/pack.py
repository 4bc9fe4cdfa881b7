"""Packing spans into chunks, shared by the Markdown and code chunkers. Pure.

- ``LineIndex`` turns offsets into line numbers, counting lines at ``\\n`` only (as
  ``read`` and ``grep`` do).
- ``pack_units`` packs unsplittable spans greedily up to a character budget, and opens each
  pack after the first with overlap carried from the one before: whole units, or whole
  sentences of a prose unit.
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
