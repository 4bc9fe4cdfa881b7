"""Markdown → chunks that never cross a section, with exact line spans.

- A chunk's ``text`` is an exact substring of the document (never re-flowed or
  normalised); ``start_line`` / ``end_line`` are the lines of its first and last characters,
  counted as ``read`` and ``grep`` count them: ``text.split("\\n")``, ``\\r\\n`` included,
  while a form feed, lone ``\\r``, U+0085 or U+2028 ends no line (``ingest.decode`` explains
  why). Only a piece of an over-budget paragraph, or of a line over the cap, can start or
  end mid-line.
- Sections, packing, overlap and sentence breaks are ``chunk.sections``; every chunk stays
  within ``pack.chunk_cap(budget)`` whatever the input.
- Fenced code and tables are atomic (up to the cap). Lines inside a fence are never
  headings. An unterminated fence ends before the next ATX heading, and in any case is cut
  at the cap, so one missing closing fence cannot swallow the rest of the document.
- A leading YAML frontmatter block is not chunked; line numbers stay those of the full text.

The block scanner is a line-based CommonMark subset, linear in the text. The packer and the
line index live in ``chunk.pack``, shared with ``chunk.code`` and ``chunk.rst``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence

from kb_mcp.chunk.base import Chunk
from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS, DEFAULT_OVERLAP_CHARS, index_lines
from kb_mcp.chunk.sections import Block, chunk_blocks, trim_blank_tail

# An ATX heading's start; its title is cut out by ``atx_heading``.
_ATX_START = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")
_THEMATIC = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
# CommonMark: only a non-empty bullet or an ordered list starting at 1 interrupts a paragraph.
_LIST_INTERRUPT = re.compile(r" {0,3}(?:[-+*]|1[.)])[ \t]+\S")
_QUOTE = re.compile(r" {0,3}>")
_HTML = re.compile(r" {0,3}<(?:[A-Za-z][\w-]*(?=[\s/>]|$)|/[A-Za-z]|!--|\?|![A-Z])")
# Possessive runs of spaces: a delimiter row ending in a long run of spaces and another
# character made the plain pattern backtrack in quadratic time (10,000 spaces: 0.8 s).
_TABLE_DELIMITER = re.compile(
    r" {0,3}\|?[ \t]*+:?-+:?[ \t]*+(?:\|[ \t]*+:?-+:?[ \t]*+)*+\|?[ \t]*+$"
)
_YAML_KEY = re.compile(r"[\w\"'][^:]*:(?:\s|$)|#")  # first frontmatter line: `key:` or a comment


def split_markdown(
    text: str, *, budget: int = DEFAULT_BUDGET_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS
) -> list[Chunk]:
    """Chunks of ``text`` in document order; ``[]`` for a blank document.

    ``budget`` and ``overlap`` are in characters (``len`` of the chunk text), so a chunk of
    CJK text holds fewer words than one of English at the same budget.
    """
    if budget < 1 or overlap < 0:
        raise ValueError(f"budget must be ≥ 1 and overlap ≥ 0, got {budget} and {overlap}")
    index = index_lines(text)
    blocks = scan_blocks(index.lines, body_start(index.lines))
    return chunk_blocks(text, index, blocks, budget, overlap)


# --- blocks -------------------------------------------------------------------------------


def body_start(lines: list[str]) -> int:
    """Index of the first line after a leading YAML frontmatter block, else 0.

    Trigger: ``---`` on line 1. Why the key check: a document that merely opens with a
    thematic break must not lose its first paragraphs. Outcome: same closing rule as
    ``text.frontmatter`` (``---`` or ``...``).
    """
    if len(lines) < 2 or lines[0].lstrip("\ufeff").rstrip() != "---":
        return 0
    if not (_YAML_KEY.match(lines[1]) or lines[1].rstrip() in ("---", "...")):
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return i + 1
    return 0


def scan_blocks(lines: list[str], begin: int) -> list[Block]:
    """Every block from line ``begin`` on, in order; blank lines separate and belong to none."""
    blocks: list[Block] = []
    unclosed: dict[str, int] = {}
    i = begin
    while i < len(lines):
        if lines[i].strip():
            blocks.append(_read_block(lines, i, unclosed))
            i = blocks[-1].last
        i += 1
    return blocks


def _read_block(lines: list[str], i: int, unclosed: dict[str, int]) -> Block:
    """The block that starts at non-blank line ``i``."""
    line = lines[i]
    if heading := atx_heading(line):
        return Block("heading", i, i, heading[0], heading[1].strip())
    if marker := _fence_marker(line):
        return Block("code", i, _fence_end(lines, i, marker, unclosed))
    if line.startswith(("    ", "\t")):
        return Block("code", i, _indented_end(lines, i))
    if _THEMATIC.match(line):
        return Block("prose", i, i)
    if _is_table_start(lines, i):
        return Block("table", i, _run_end(lines, i + 1, lambda s: "|" in s))
    if _LIST_ITEM.match(line):
        return _read_list(lines, i, unclosed)
    if _QUOTE.match(line):
        return Block("prose", i, _run_end(lines, i, lambda s: bool(_QUOTE.match(s))))
    if _HTML.match(line):  # ends at a blank line, as CommonMark HTML blocks of types 6 and 7
        return Block("prose", i, _run_end(lines, i, lambda s: True))
    return _read_paragraph(lines, i)


def atx_heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line (``## Title ##``), else None.

    The title is cut out here rather than by one pattern: a lazy title before an optional
    closing ``#`` run backtracked over a long run of spaces in quadratic time (a heading
    line holding 20,000 spaces took 14 s)."""
    start = _ATX_START.match(line)
    if start is None:
        return None
    title = line[start.end(1) :].rstrip(" \t")
    bare = title.rstrip("#")
    if bare != title and (not bare or bare[-1] in " \t"):
        title = bare  # the closing run of "#", after a space
    return len(start[1]), title.strip(" \t")


def _read_paragraph(lines: list[str], i: int) -> Block:
    """Lines up to a blank or interrupting line; an ``===`` / ``---`` underline makes a heading."""
    j = i
    while j + 1 < len(lines):
        following = lines[j + 1]
        if underline := _SETEXT.match(following):
            title = " ".join(line.strip() for line in lines[i : j + 1])
            return Block("heading", i, j + 1, 1 if underline[1][0] == "=" else 2, title)
        if not following.strip() or _interrupts(lines, j + 1):
            break
        j += 1
    return Block("prose", i, j)


def _read_list(lines: list[str], i: int, unclosed: dict[str, int]) -> Block:
    """A run of list items, with their indented, lazy and fenced continuation lines."""
    items, last, k = [i], i, i + 1
    while k < len(lines):
        line = lines[k]
        if not line.strip():
            k = _next_nonblank(lines, k)
            if k == len(lines) or not (lines[k][:1].isspace() or _LIST_ITEM.match(lines[k])):
                break
            continue
        if marker := _fence_marker(line):
            last = k = _fence_end(lines, k, marker, unclosed)
        elif _THEMATIC.match(line):
            break
        elif _LIST_ITEM.match(line):
            items.append(k)
        elif not line[:1].isspace() and _interrupts(lines, k):
            break
        last = k
        k += 1
    return Block("list", i, last, items=tuple(items))


def _interrupts(lines: list[str], k: int) -> bool:
    """Whether line ``k`` starts a new block even without a blank line before it."""
    starters = (_ATX_START, _THEMATIC, _QUOTE, _HTML, _LIST_INTERRUPT)
    line = lines[k]
    return (
        any(p.match(line) for p in starters)
        or bool(_fence_marker(line))
        or _is_table_start(lines, k)
    )


def _fence_marker(line: str) -> str | None:
    """The opening fence run of ``line`` (``` or ~~~, 3+), or None."""
    match = _FENCE.match(line)
    if not match or (match[1][0] == "`" and "`" in match[2]):
        return None
    return match[1]


def in_fences(lines: Sequence[str]) -> list[bool]:
    """Whether each line is part of a fenced code block (its fence lines included), by the
    chunker's rule: a fence closes on a run of its own character at least as long, with
    nothing after it (so a ```` fence holding ``` lines stays open)."""
    inside: list[bool] = []
    marker: str | None = None
    for line in lines:
        if marker is None:
            marker = _fence_marker(line)
            inside.append(marker is not None)
            continue
        inside.append(True)
        closer = _FENCE.match(line)
        if closer and closer[1].startswith(marker) and not closer[2].strip():
            marker = None
    return inside


def _fence_end(lines: list[str], i: int, marker: str, unclosed: dict[str, int]) -> int:
    """Last line of the fence opened at ``i``: its closer, else the line before the next heading.

    ``unclosed[char]`` is the shortest fence length already known to have no closer further
    on, so a document full of unterminated fences is still scanned in linear time.
    """
    if len(marker) < unclosed.get(marker[0], sys.maxsize):
        for k in range(i + 1, len(lines)):
            closer = _FENCE.match(lines[k])
            if closer and closer[1].startswith(marker) and not closer[2].strip():
                return k
        unclosed[marker[0]] = len(marker)
    k = i + 1
    while k < len(lines) and not _ATX_START.match(lines[k]):
        k += 1
    return trim_blank_tail(lines, i, k - 1)


def unclosed_fence(lines: list[str], block: Block) -> bool:
    """Whether ``block`` is a fence with no closing line (it may close past a window's end,
    ``chunk.stream``; until then the lines after it read as headings)."""
    marker = _fence_marker(lines[block.first]) if block.kind == "code" else None
    if marker is None:
        return False
    closer = _FENCE.match(lines[block.last]) if block.last > block.first else None
    return not (closer and closer[1].startswith(marker) and not closer[2].strip())


def _indented_end(lines: list[str], i: int) -> int:
    """Last line of an indented code block: blank or 4-space/tab-indented lines."""
    k = i
    while k + 1 < len(lines):
        following = lines[k + 1]
        if following.strip() and not following.startswith(("    ", "\t")):
            break
        k += 1
    return trim_blank_tail(lines, i, k)


def _is_table_start(lines: list[str], i: int) -> bool:
    """A row holding ``|`` followed by a delimiter row such as ``|---|:--:|``."""
    following = lines[i + 1] if i + 1 < len(lines) else ""
    return "|" in lines[i] and "|" in following and bool(_TABLE_DELIMITER.match(following))


def _run_end(lines: list[str], i: int, keeps: Callable[[str], bool]) -> int:
    """Last line of the non-blank run from ``i`` whose following lines satisfy ``keeps``."""
    k = i
    while k + 1 < len(lines) and lines[k + 1].strip() and keeps(lines[k + 1]):
        k += 1
    return k


def _next_nonblank(lines: list[str], k: int) -> int:
    while k < len(lines) and not lines[k].strip():
        k += 1
    return k
