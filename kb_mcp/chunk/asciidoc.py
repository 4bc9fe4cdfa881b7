"""AsciiDoc → chunks by AsciiDoc structure, with exact line spans.

Trigger: git's manual pages (``Documentation/*.txt``, AsciiDoc) were chunked by Markdown
rules, and in 11 of 55 results their section name was a shell command or a paragraph
(issue 20 item 11): a ``----`` listing delimiter under a line of text is a Markdown setext
underline, so ``$ git add hello.c`` became a section title, and every ``--`` that opens an
option's continuation block made the paragraph above it one. The scanner is line-based and
linear, a subset of what AsciiDoc (asciidoc.py, Asciidoctor) parses, chosen for what
decides chunk boundaries:

- **Section titles** are headings, in either form, only where a block starts (after a
  blank line, the start, or a block's attribute, anchor, title, comment and preprocessor
  lines such as ``[[anchor]]``, ``[verse]``, ``.Example``, ``// tag::x[]``, ``endif::[]``):

  - one line: ``= Title`` (level 1, the document title), ``== Section`` (2) … ``======`` (6);
  - two lines: the title over an underline of one repeated character, ``=`` (1), ``-``
    (2), ``~`` (3), ``^`` (4), ``+`` (5), as long as the title within 2 characters
    (asciidoc.py's rule; a ``----`` of another length is a block delimiter).
- **Delimited blocks** run from a delimiter line to the next identical line. Listing
  (``----``), literal (``....``), passthrough (``++++``), comment (``////``) and fenced
  (```` ``` ````) blocks are atomic code, tables (``|===``) atomic tables: lines inside are
  never titles. Example (``====``), sidebar (``****``), quote (``____``) and open (``--``)
  blocks hold ordinary content, scanned as such, but no section titles (AsciiDoc has none
  inside a block). A delimiter with no closing line is an ordinary line, so one stray
  ``----`` cannot swallow the rest of the page.
- A paragraph ends at a blank line or where a delimited block opens; one that starts with
  a list marker (``*``, ``-``, ``.``, ``1.``, or a ``term::`` label) is a list, split
  between items when over budget. A ``+`` continuation line is part of its paragraph.
- The attribute entries under the document title (``:doctype: manpage``) are part of its
  heading block: settings for the renderer, not text.
- Sections, packing, overlap and the hard cap are ``chunk.sections``'.

Lines are the file's own, so a citation opens on the right line in an editor.
"""

from __future__ import annotations

import re

from kb_mcp.chunk.base import Chunk
from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS, DEFAULT_OVERLAP_CHARS, index_lines
from kb_mcp.chunk.sections import Block, chunk_blocks

# The title's text is cut out in Python, not by the pattern: a lazy ``(.*?)`` before an
# optional closing ``=`` run backtracks over a long run of spaces in quadratic time.
_ONE_LINE_TITLE = re.compile(r"(={1,6})[ \t]+(?=\S)")
_UNDERLINE = re.compile(r"([=\-~^+])\1+[ \t]*")
_UNDERLINE_LEVELS = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}
_OPENING_LINES = 40  # where a document title is looked for
_UNDERLINE_SLACK = 2  # asciidoc.py: the underline is as long as the title, ± 2 characters
# Lines that belong to the block below them: an anchor ``[[id]]``, an attribute list
# (``[verse]``, ``[source,shell]``), a block title (``.Example``), a line comment
# (``// tag::quick[]``; ``////`` opens a comment block) and a preprocessor or block
# macro line (``endif::[]``, ``include::part.adoc[]``).
_BLOCK_META = re.compile(
    r"\[\[[^\]]*\]\]|\[[^\[\]\s][^\]]*\]|\.[^.\s].*|//(?!//).*|[a-z]\w*::[^\s\[]*\[.*\]"
)
_ATTRIBUTE_ENTRY = re.compile(r":!?[\w][\w-]*!?:(?:[ \t]|$)")
# Delimiter line → the kind of block it opens; the rest are compound (content inside).
_DELIMITER = re.compile(r"(-{4,}|\.{4,}|\+{4,}|/{4,}|={4,}|\*{4,}|_{4,}|--|[|,:!]={3,}|`{3,})")
_DELIMITED_KINDS = {"-": "code", ".": "code", "+": "code", "/": "code", "`": "code"}
_TABLE_OPENERS = "|,:!"
_LIST_ITEM = re.compile(
    r"[ \t]*(?:(?:[-*]{1,5}|\.{1,5}|\d{1,9}\.|[a-zA-Z]\.)[ \t]+\S"
    r"|[^ \t].*?(?:::|;;|:::|::::)(?:[ \t]+\S.*)?$)"
)


def split_asciidoc(
    text: str, *, budget: int = DEFAULT_BUDGET_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS
) -> list[Chunk]:
    """Chunks of AsciiDoc ``text`` in document order; ``[]`` for a blank document.

    ``budget`` and ``overlap`` are in characters, as for ``split_markdown``.
    """
    if budget < 1 or overlap < 0:
        raise ValueError(f"budget must be ≥ 1 and overlap ≥ 0, got {budget} and {overlap}")
    index = index_lines(text)
    return chunk_blocks(text, index, scan_blocks(index.lines), budget, overlap)


def document_title(text: str) -> str | None:
    """The document title (``= Title``, or a title over ``===``) when the text opens with one.

    It may follow a block of mail headers (``From:``, ``Subject:``: git's how-to pages
    are mails), so the first block of each of the opening lines is tried."""
    lines = text.split("\n", _OPENING_LINES)[:_OPENING_LINES]
    for i, line in enumerate(lines):
        starts_block = line.strip() and (i == 0 or not lines[i - 1].strip())
        if starts_block and (heading := _title(lines, i)) and heading[1] == 1:
            return heading[2]
    return None


def looks_like_asciidoc(text: str) -> bool:
    """True when ``text`` opens with an AsciiDoc document title and has AsciiDoc structure.

    Both are asked for: a title over ``=====`` alone is also a plain text banner or a
    Markdown heading. The structure is a section title in AsciiDoc form (``== Name``, or a
    title over a ``-``, ``~``, ``^`` or ``+`` underline as long as it) or a delimited
    listing or literal block (``----`` … ``----``, git's how-to mails have no sections).
    A page in Markdown's setext headings only reads the same either way; a Markdown
    ```` ``` ```` fence is no evidence, so a Markdown page with ``##`` headings stays one.
    """
    if document_title(text) is None:
        return False
    lines = text.split("\n")
    return any(
        (block.kind == "heading" and block.level > 1)
        or (block.kind == "code" and not lines[block.first].startswith("`"))
        for block in scan_blocks(lines)
    )


def scan_blocks(lines: list[str]) -> list[Block]:
    """Every block in order; blank lines separate blocks and belong to none."""
    closers = _closers(lines)
    blocks: list[Block] = []
    open_ends: list[int] = []  # closing lines of the compound blocks the scan is inside
    i = 0
    while i < len(lines):
        while open_ends and i > open_ends[-1]:
            open_ends.pop()
        if not lines[i].strip():
            i += 1
            continue
        block = _read_block(lines, i, closers, open_ends)
        blocks.append(block)
        i = block.last + 1
    return blocks


def _read_block(lines: list[str], i: int, closers: dict[int, int], open_ends: list[int]) -> Block:
    """The block that starts at non-blank line ``i``; opens a compound block on
    ``open_ends``."""
    j = i  # the block's own first line, after its anchor, attribute and title lines
    while j + 1 < len(lines) and lines[j + 1].strip() and _BLOCK_META.fullmatch(lines[j].rstrip()):
        j += 1
    if open_ends and j == open_ends[-1]:
        return Block("prose", i, j)  # the compound block's closing delimiter
    if not open_ends and (heading := _title(lines, j)):
        last, level, title = heading
        while level == 1 and last + 1 < len(lines) and _ATTRIBUTE_ENTRY.match(lines[last + 1]):
            last += 1  # the document header's attributes (``:doctype: manpage``) are no text
        return Block("heading", i, last, level, title)
    if (end := closers.get(j)) is not None:
        kind = _delimited_kind(lines[j])
        if kind != "compound":
            return Block(kind, i, end)
        open_ends.append(end)
        return Block("prose", i, j)
    last = j
    while last + 1 < len(lines) and lines[last + 1].strip():
        following = last + 1
        if following in closers or (open_ends and following == open_ends[-1]):
            break
        last = following
    if not _LIST_ITEM.match(lines[j]):
        return Block("prose", i, last)
    items = tuple(k for k in range(j, last + 1) if _LIST_ITEM.match(lines[k]))
    return Block("list", i, last, items=items)


def _title(lines: list[str], i: int) -> tuple[int, int, str] | None:
    """``(last line, level, title)`` of a section title starting at line ``i``, else None."""
    line = lines[i].rstrip()
    if one_line := _ONE_LINE_TITLE.match(line):
        return i, len(one_line[1]), _without_closing_run(line[one_line.end() :])
    following = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
    underline = _UNDERLINE.fullmatch(following)
    if underline is None or not _can_be_title(line):
        return None
    if abs(len(following) - len(line)) > _UNDERLINE_SLACK:
        return None
    return i + 1, _UNDERLINE_LEVELS[underline[1]], line.strip()


def _without_closing_run(title: str) -> str:
    """``Name ==`` → ``Name``: a one-line title may close with a run of ``=``."""
    bare = title.rstrip("=")
    return bare.rstrip() if bare != title and bare[-1:].isspace() else title


def _can_be_title(line: str) -> bool:
    """A line of words that is not indented, nor a delimiter, list item or block metadata."""
    return (
        bool(line)
        and not line[0].isspace()
        and re.search(r"\w", line) is not None
        and _DELIMITER.fullmatch(line) is None
        and _BLOCK_META.fullmatch(line) is None
    )


def _delimiter_key(line: str) -> str | None:
    """What a delimiter line must be matched by to close its block; None for other lines.

    A fence's closer is its backtick run alone (it opens as ```` ```python ````)."""
    stripped = line.rstrip()
    if stripped.startswith("```"):
        return "`" * (len(stripped) - len(stripped.lstrip("`")))
    return stripped if _DELIMITER.fullmatch(stripped) else None


def _closers(lines: list[str]) -> dict[int, int]:
    """Each delimiter line → the next line that closes it, found in one backward pass.

    A line may both close a block and appear here as an opener (the scan asks only for
    lines where a block can start); a delimiter with no later match is absent."""
    closers: dict[int, int] = {}
    next_seen: dict[str, int] = {}
    for i in range(len(lines) - 1, -1, -1):
        if (key := _delimiter_key(lines[i])) is not None:
            if key in next_seen:
                closers[i] = next_seen[key]
            next_seen[key] = i
    return closers


def _delimited_kind(line: str) -> str:
    """``code``, ``table`` or ``compound`` for the block a delimiter line opens."""
    first = line[0]
    if first in _TABLE_OPENERS:
        return "table"
    return _DELIMITED_KINDS.get(first, "compound")
