"""What every reader returns (``Converted``) and the Markdown table they share.

Apart from ``readers/__init__`` (the dispatch table over the readers), so a reader
imports these without importing back the package that imports it. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Converted:
    """A file as Markdown, with what the reader learnt about it.

    ``markdown`` is the text we store, chunk and cite: its lines are citation lines.
    ``exact`` is True when those lines are the file's own lines (pass-through formats),
    so a citation can be checked against the file; False for converted formats.
    ``notes`` are things the reader ignored but the file is still indexed without, e.g.
    "frontmatter ignored: YAML anchors and aliases are not accepted (line 2)".
    """

    markdown: str
    # "markdown" | "rst" | "asciidoc" | "text" | "code" | "html" | "pdf" | "docx" | "data"
    kind: str
    language: str | None  # for code: "python", "typescript", …
    title: str | None
    exact: bool
    notes: tuple[str, ...] = ()


Reader = Callable[[bytes], Converted]


def markdown_table(rows: list[list[str]]) -> str:
    """Render rows of cell texts as a Markdown table whose first row is the header.

    Short rows are padded so every row has the same number of cells; pipes and
    line breaks inside cells are escaped so a cell cannot break the table.
    """
    width = max(len(row) for row in rows)
    cells = [[_table_cell(cell) for cell in row] + [""] * (width - len(row)) for row in rows]
    lines = [_table_row(cells[0]), _table_row(["---"] * width)]
    lines.extend(_table_row(row) for row in cells[1:])
    return "\n".join(lines)


def _table_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"
