"""Readers: one per format, each turning file bytes into the Markdown we store.

``READERS`` is the one dispatch table. Keys are lower-case suffixes (``".pdf"``)
or exact names of files that have no suffix (``"Makefile"``); the supported-format
lists in error messages and ``supported_suffixes`` are generated from it, so
they cannot drift from what is actually dispatched.

Readers raise ``Unreadable`` with the bare reason ("no text layer …"), since
bytes have no name; ``read_path`` prefixes "cannot read <name>: ". A missing
optional extra raises ``Unavailable`` with the pip command as its hint, and is
passed through unchanged because it is about the install, not the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kb_mcp.errors import Unreadable

MAX_BYTES = 50 * 1024 * 1024


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


# The format modules build Converted values and use markdown_table, so they are
# imported after both are defined.
from kb_mcp.ingest.readers import docx, html, pdf, text  # noqa: E402

READERS: dict[str, Reader] = {
    **dict.fromkeys(text.MARKDOWN_SUFFIXES, text.read_markdown),
    **dict.fromkeys(text.PLAIN_SUFFIXES, text.read_plain),
    **dict.fromkeys(text.RST_SUFFIXES, text.read_rst),
    **dict.fromkeys(text.ASCIIDOC_SUFFIXES, text.read_asciidoc),
    **dict.fromkeys(text.DATA_SUFFIXES, text.read_data),
    **{key: partial(text.read_code, language=lang) for key, lang in text.CODE_LANGUAGES.items()},
    **dict.fromkeys(html.SUFFIXES, html.read_html),
    ".pdf": pdf.read_pdf,
    ".docx": docx.read_docx,
}


def supported_suffixes() -> frozenset[str]:
    """Every file suffix with a reader (lower case, with the dot)."""
    return frozenset(key for key in READERS if key.startswith("."))


def format_key(path: Path) -> str:
    """The ``READERS`` key of ``path``: its name if listed (``Makefile``), else its suffix."""
    return path.name if path.name in READERS else path.suffix.lower()


def is_supported(path: Path) -> bool:
    """True when ``path`` has a reader, by exact name (``Makefile``) or by suffix in any case."""
    return format_key(path) in READERS


def read_path(path: Path, *, max_bytes: int = MAX_BYTES) -> Converted:
    """Read and convert one file; ``Unreadable`` messages start "cannot read <name>: ".

    The format is checked before the file is opened, so an unsupported file is never read.
    """
    key = format_key(path)
    try:
        _reader_for(key)
        return convert_bytes(read_capped(path, max_bytes), key)
    except Unreadable as error:
        raise Unreadable(f"cannot read {path.name}: {error.message}", hint=error.hint) from error


def read_capped(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """Read a whole file of at most ``max_bytes``; a larger one raises ``Unreadable`` naming both.

    Only ``max_bytes + 1`` bytes are ever read, so a huge or growing file costs nothing.
    Messages are bare reasons, as for ``convert_bytes``.
    """
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
            size = max(os.fstat(file.fileno()).st_size, len(data))
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from error
    if len(data) > max_bytes:
        raise Unreadable(
            f"file is {_mib(size)}, over the {_mib(max_bytes)} size cap",
            hint="split the file, or raise the size cap",
        )
    return data


def convert_bytes(data: bytes, suffix: str) -> Converted:
    """Convert bytes of the format named by ``suffix`` (``".pdf"``, ``"pdf"`` or ``"Makefile"``)."""
    return _reader_for(suffix)(data)


def _reader_for(suffix: str) -> Reader:
    """Look the format up in ``READERS``; the error lists every supported one."""
    key = suffix if suffix in READERS else "." + suffix.lower().lstrip(".")
    if (reader := READERS.get(key)) is None:
        what = f"format '{suffix}'" if suffix.strip(".") else "format (no suffix)"
        supported = ", ".join(sorted(READERS, key=str.lower))
        raise Unreadable(f"unsupported {what}; supported: {supported}")
    return reader


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


__all__ = [
    "MAX_BYTES",
    "READERS",
    "Converted",
    "Reader",
    "convert_bytes",
    "format_key",
    "is_supported",
    "markdown_table",
    "read_capped",
    "read_path",
    "supported_suffixes",
]
