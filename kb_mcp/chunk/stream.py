"""Chunks of a large text, made window by window so memory does not grow with the file.

Trigger: the chunkers index a whole document at once (``pack.index_lines``: a list of
every line and of every line's offset, about three times the text), and return every
chunk in one list (another copy). A 50 MB Markdown file peaked at 845 MB RSS in
``kb-mcp add`` (issue 10, bound 250 MB). Outcome: ``iter_chunks`` yields the same chunks
as ``split_document`` for a text of at most ``WINDOW_CHARS`` (the same call, in fact);
a longer text is chunked one window of whole lines at a time, line numbers and ordinals
carried across, and its chunks are yielded as they are made, so the caller can store
them slice by slice (``ingest/pipeline``). ``iter_utf8_chunks`` does the same over a
text's UTF-8, windows counted in bytes and decoded one at a time: a large file's text
is kept that way, never as one string (``ingest/large``; 4 bytes a character once it
holds one emoji).

Where a window ends:

- Markdown (and every kind read as Markdown): before the last heading in the window's
  second half, else before its last block. The block cut there may be incomplete (a
  fence whose closer lies beyond the window), so it is scanned again at the start of the
  next window. Cut at a heading, no section spans two windows and the heading path is
  carried over (the enclosing headings' stack), so the chunks are those of the whole
  text.
- Code, reST and AsciiDoc: at the last blank line followed by a non-indented line in the
  window's second half (a top-level definition or a section title starts there), else
  the last line end. reST adornment levels are learnt again in each window, so a
  heading's level (and so its path) may differ from the whole text's past the first
  window; a window's AsciiDoc headings do not carry the titles of the windows before it.

A single block over a window (a fence of megabytes) is cut at the window's last line
end; the next window reads on from there as Markdown.
"""

from __future__ import annotations

from collections.abc import Iterator

from kb_mcp.chunk import Chunk, split_document
from kb_mcp.chunk.markdown import body_start, scan_blocks, unclosed_fence
from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS, DEFAULT_OVERLAP_CHARS, index_lines
from kb_mcp.chunk.sections import Block, bounded_title, chunk_blocks

# Characters of text chunked at once (bytes, for ``iter_utf8_chunks``; a window is cut
# in the UTF-8 of the text). 4 Mi is the size past which a folder file is read in the
# writer process (``filework.LARGE_FILE_BYTES``, 4 MiB): files under it are chunked whole,
# exactly as before. A window's line index is about 3× its text (12 Mi characters, at
# most 48 MB for text of 4-byte characters).
WINDOW_CHARS = 4 * 1024 * 1024


def iter_chunks(
    text: str,
    kind: str,
    language: str | None = None,
    *,
    window: int | None = None,
) -> Iterator[Chunk]:
    """``split_document(text, kind, language)``, one window of ``window`` characters
    (default ``WINDOW_CHARS``) at a time for a longer text (see the module docstring for
    where windows end)."""
    window = window or WINDOW_CHARS
    if len(text) <= window:
        yield from split_document(text, kind, language)
    elif kind in ("code", "rst", "asciidoc"):
        yield from _plain_windows(text, kind, language, window)
    else:
        yield from _markdown_windows(text, window)


def iter_utf8_chunks(
    data: bytes | bytearray,
    kind: str,
    language: str | None = None,
    *,
    window: int | None = None,
) -> Iterator[Chunk]:
    """``iter_chunks(data.decode("utf-8"), …)`` with windows of ``window`` bytes, decoding
    one window at a time: a large file's redacted text is kept as UTF-8 (``ingest/large``),
    a quarter of the string it makes when it holds one emoji."""
    window = window or WINDOW_CHARS
    if len(data) <= window:
        yield from split_document(data.decode("utf-8"), kind, language)
    elif kind in ("code", "rst", "asciidoc"):
        yield from _plain_windows(data, kind, language, window)
    else:
        yield from _markdown_windows(data, window)


# The text a window loop walks: a string, or its UTF-8 (offsets are then in bytes).
_Text = str | bytes | bytearray


def _nl(data: _Text, count: int = 1) -> str | bytes:
    return "\n" * count if isinstance(data, str) else b"\n" * count


def _piece(data: _Text, start: int, end: int) -> str:
    piece = data[start:end]
    return piece if isinstance(piece, str) else piece.decode("utf-8")


def _offset(data: _Text, piece: str, cut: int) -> int:
    """``cut`` characters into ``piece`` as an offset of ``data``'s units."""
    return cut if isinstance(data, str) else len(piece[:cut].encode("utf-8"))


def _line_cut(data: _Text, start: int, end: int) -> int:
    """Offset just past the last newline in ``data[start:end]``; without one, ``end`` (in
    UTF-8 moved back to a character boundary: a line over the window is cut inside)."""
    at = data.rfind(_nl(data), start, end) + 1
    if at:
        return at
    if not isinstance(data, str):
        while start < end < len(data) and data[end] & 0xC0 == 0x80:
            end -= 1  # a continuation byte: not where a character starts
    return end


def _plain_windows(data: _Text, kind: str, language: str | None, window: int) -> Iterator[Chunk]:
    pos, line0, ordinal = 0, 0, 0
    while pos < len(data):
        end = len(data) if pos + window >= len(data) else _definition_cut(data, pos, window)
        piece = _piece(data, pos, end)
        chunks = split_document(piece, kind, language)
        yield from (_shifted(c, ordinal, line0) for c in chunks)
        ordinal += len(chunks)
        line0 += piece.count("\n")
        pos = end


def _definition_cut(data: _Text, pos: int, window: int) -> int:
    """Where a code / reST window ends: after a blank line that precedes a non-indented
    line, in the window's second half; else after the last line end."""
    limit = pos + window
    floor = pos + window // 2
    at = data.rfind(_nl(data, 2), floor, limit)
    while at >= 0:
        following = data[at + 2 : at + 3]
        if following and not following.isspace():
            return at + 2
        at = data.rfind(_nl(data, 2), floor, at)
    return _line_cut(data, pos, limit)


def _markdown_windows(data: _Text, window: int) -> Iterator[Chunk]:
    pos, line0, ordinal = 0, 0, 0
    outer: tuple[tuple[int, str], ...] = ()
    while pos < len(data):
        last = pos + window >= len(data)
        end = len(data) if last else _line_cut(data, pos, pos + window)
        piece = _piece(data, pos, end)
        index = index_lines(piece)
        blocks = scan_blocks(index.lines, body_start(index.lines) if pos == 0 else 0)
        keep = len(blocks) if last else _markdown_cut(blocks, index.lines)
        cut = index.starts[blocks[keep].first] if keep < len(blocks) else len(piece)
        chunks = chunk_blocks(
            piece, index, blocks[:keep], DEFAULT_BUDGET_CHARS, DEFAULT_OVERLAP_CHARS, outer
        )
        yield from (_shifted(c, ordinal, line0) for c in chunks)
        ordinal += len(chunks)
        outer = _heading_stack(outer, blocks[:keep])
        line0 += piece.count("\n", 0, cut)
        pos = end if cut == len(piece) else pos + _offset(data, piece, cut)
        del piece, index, blocks, chunks


def _markdown_cut(blocks: list[Block], lines: list[str]) -> int:
    """How many of a window's blocks to chunk now: those before its last heading in the
    second half, else all but the last block (which may run on past the window). Never
    past a fence without its closer: it may close beyond the window, and the "headings"
    after it may be its own lines."""
    if not blocks:
        return 0
    bound = next((k for k, b in enumerate(blocks) if unclosed_fence(lines, b)), len(blocks) - 1)
    keep = max(1, bound)
    for k in range(bound, 0, -1):
        if blocks[k].first < len(lines) // 2:
            break
        if blocks[k].kind == "heading":
            keep = k
            break
    while keep > 1 and blocks[keep - 1].kind == "heading":
        keep -= 1  # a heading right above stays with what may be its subsections
    return keep


def _heading_stack(
    outer: tuple[tuple[int, str], ...], blocks: list[Block]
) -> tuple[tuple[int, str], ...]:
    """The ``(level, title)`` headings enclosing what follows ``blocks`` (as
    ``sections._sections`` keeps them)."""
    stack = list(outer)
    for block in blocks:
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, bounded_title(block.title)))
    return tuple(stack)


def _shifted(chunk: Chunk, ordinal: int, line0: int) -> Chunk:
    return Chunk(
        chunk.ordinal + ordinal,
        chunk.heading_path,
        chunk.start_line + line0,
        chunk.end_line + line0,
        chunk.text,
    )
