"""Blocks → sections → chunks: the part of chunking that every markup language shares. Pure.

A markup scanner (``chunk.markdown``, ``chunk.rst``) turns lines into ``Block`` values;
``chunk_blocks`` does the rest the same way for all of them:

- A chunk never spans two sections. The section's heading opens its first chunk (glued to
  the first block, so no chunk is a heading alone), and ``heading_path`` is the chain of
  enclosing heading titles. A heading with no body but with subsections yields no chunk:
  its title already rides in every child's ``heading_path``. A bodiless heading without
  subsections is kept, so no heading text is lost.
- ``code`` and ``table`` blocks are atomic up to the hard cap (``pack.chunk_cap``); past
  it they are cut at line boundaries by ``pack.cap_spans``, like anything else.
- Blocks are packed greedily up to ``budget`` characters. A list over budget splits between
  items; a paragraph (or item) over budget splits at sentence ends, then at whitespace,
  then at a character boundary (CJK runs have no spaces).
- The next chunk of a section re-includes trailing whole blocks (or, inside a paragraph,
  whole sentences) of the previous one, up to ``overlap`` characters, and only when that
  keeps it within budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kb_mcp.chunk.base import Chunk
from kb_mcp.chunk.pack import (
    LineIndex,
    Unit,
    cap_spans,
    hard_spans,
    pack_units,
    sentence_spans,
)

ATOMIC_KINDS = frozenset({"code", "table", "heading"})
# A heading's title rides in the ``heading_path`` of every chunk under it, so an unbounded
# one costs length × chunks: a 220 KB line read as a setext heading (a line over ``---``)
# made a 20k-reference ``add_document`` take 23 s (issue 11). Real titles are far shorter
# (the longest of /work/research/realcorpus's 276 Markdown files: 174 characters); the
# whole line stays in the section's first chunk, so its words are still found.
HEADING_PATH_CHARS = 300


@dataclass(frozen=True, slots=True)
class Block:
    """Lines ``first..last`` (0-based, inclusive) of one kind, as a scanner found them."""

    kind: str  # heading | code | table | list | prose
    first: int
    last: int
    level: int = 0  # headings: 1 is the outermost
    title: str = ""
    items: tuple[int, ...] = ()  # lists: first line of each item


@dataclass(frozen=True, slots=True)
class _Section:
    path: tuple[str, ...]
    level: int  # 0 for the text before the first heading
    heading: Block | None
    body: tuple[Block, ...]


def chunk_blocks(
    text: str,
    index: LineIndex,
    blocks: list[Block],
    budget: int,
    overlap: int,
    outer: tuple[tuple[int, str], ...] = (),
) -> list[Chunk]:
    """Chunks of ``text`` from its scanned ``blocks``, in document order.

    ``outer``: the ``(level, title)`` headings that enclose ``text`` (a window of a
    larger document, ``chunk.stream``); their titles open every heading path."""
    spans: list[tuple[tuple[str, ...], int, int]] = []
    for section in _sections(blocks, outer):
        units = _section_units(section, text, index, budget)
        spans.extend((section.path, *span) for span in pack_units(text, units, budget, overlap))
    return [
        Chunk(n, path, index.line_of(start), index.line_of(end - 1), text[start:end])
        for n, (path, start, end) in enumerate(cap_spans(text, index, spans, budget))
    ]


def trim_blank_tail(lines: list[str], first: int, last: int) -> int:
    """``last`` moved up over blank lines, never above ``first``."""
    while last > first and not lines[last].strip():
        last -= 1
    return last


def bounded_title(title: str) -> str:
    """A heading title as heading paths hold it (``HEADING_PATH_CHARS`` at most)."""
    return title if len(title) <= HEADING_PATH_CHARS else title[: HEADING_PATH_CHARS - 1] + "…"


def _sections(blocks: list[Block], outer: tuple[tuple[int, str], ...] = ()) -> Iterator[_Section]:
    """Blocks grouped under their heading, minus bodiless headings that have subsections."""
    grouped: list[_Section] = []
    stack: list[tuple[int, str]] = list(outer)
    heading, body = None, []
    for block in [*blocks, Block("heading", -1, -1, level=0)]:
        if block.kind != "heading":
            body.append(block)
            continue
        level = heading.level if heading else (outer[-1][0] if outer else 0)
        grouped.append(_Section(tuple(t for _, t in stack), level, heading, tuple(body)))
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, bounded_title(block.title)))
        heading, body = block, []
    for section, following in zip(grouped, [*grouped[1:], None], strict=True):
        has_children = following is not None and following.level > section.level
        if section.body or (section.heading is not None and not has_children):
            yield section


def _section_units(section: _Section, text: str, index: LineIndex, budget: int) -> list[Unit]:
    """The section's units; its heading is glued to the first one so it never stands alone."""
    head = section.heading
    if head is None:
        return [u for b in section.body for u in _block_units(b, text, index, budget)]
    head_start = index.starts[head.first]
    if not section.body:
        return [Unit(head_start, index.end(head.last))]
    prefix = index.starts[section.body[0].first] - head_start
    first = _block_units(section.body[0], text, index, max(budget - prefix, budget // 2, 1))
    rest = [u for b in section.body[1:] for u in _block_units(b, text, index, budget)]
    return [Unit(head_start, first[0].end, first[0].prose), *first[1:], *rest]


def _block_units(block: Block, text: str, index: LineIndex, budget: int) -> list[Unit]:
    """One unit per block, or for an over-budget list or prose block, its items / sentences."""
    start, end = index.starts[block.first], index.end(block.last)
    if end - start <= budget or block.kind in ATOMIC_KINDS:
        return [Unit(start, end, prose=block.kind == "prose")]
    if block.kind != "list":
        return _sentence_units(text, start, end, budget)
    units: list[Unit] = []
    for first, following in zip(block.items, [*block.items[1:], block.last + 1], strict=True):
        last = trim_blank_tail(index.lines, first, following - 1)
        item_start, item_end = index.starts[first], index.end(last)
        if item_end - item_start <= budget:
            units.append(Unit(item_start, item_end, prose=True))
        else:
            units.extend(_sentence_units(text, item_start, item_end, budget))
    return units


def _sentence_units(text: str, start: int, end: int, budget: int) -> list[Unit]:
    """Sentences of ``text[start:end]``; one over budget is cut by ``pack.hard_spans``."""
    units: list[Unit] = []
    for s, e in sentence_spans(text, start, end):
        pieces = [(s, e)] if e - s <= budget else hard_spans(text, s, e, budget)
        units.extend(Unit(a, b, prose=True) for a, b in pieces)
    return units
