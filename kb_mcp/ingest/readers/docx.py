"""DOCX → Markdown through python-docx (the optional ``docx`` extra).

The body is walked in document order, so a table stays between the
paragraphs it sat between. Paragraph styles carry the structure: "Title" and
"Heading N" become ``#`` headings, list styles (or Word numbering) become
``- `` items indented by level, and tables become Markdown tables. Run-level
formatting (bold, colours) is not kept: it rarely changes what a passage means.
"""

from __future__ import annotations

import io
import re
import zipfile
from itertools import pairwise
from typing import TYPE_CHECKING

from kb_mcp.errors import Unavailable, Unreadable
from kb_mcp.ingest.readers.base import Converted, markdown_table

if TYPE_CHECKING:
    from docx.document import Document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

_HEADING_STYLE = re.compile(r"heading (\d)", re.IGNORECASE)
_LIST_STYLE_LEVEL = re.compile(r"list\b.*?(\d)?$", re.IGNORECASE)


def read_docx(data: bytes) -> Converted:
    """Convert a Word document to Markdown titled by its properties, else its first heading."""
    document = _open(data)
    try:
        blocks = [_block(item) for item in document.iter_inner_content()]
        title = document.core_properties.title.strip() or _first_heading(document)
    except (KeyError, ValueError, SyntaxError) as error:  # a malformed part met while walking
        raise Unreadable(f"corrupt DOCX ({error})") from error
    markdown = _join([block for block in blocks if block])
    return Converted(markdown, "docx", None, title or None, exact=False)


def _open(data: bytes) -> Document:
    """Open the bytes as a Word document; a missing extra or a corrupt file raises."""
    try:
        import docx
    except ImportError as error:
        raise Unavailable(
            "reading DOCX files needs the optional 'docx' extra (python-docx)",
            hint="pip install 'kb-mcp[docx]'",
        ) from error
    try:
        return docx.Document(io.BytesIO(data))
    except zipfile.BadZipFile as error:
        raise Unreadable(
            "not a DOCX file (not a zip archive: corrupt, password-protected, or an old .doc)"
        ) from error
    # lxml's XMLSyntaxError is a SyntaxError; a missing part is a KeyError; a zip that
    # holds another Office format is a ValueError.
    except (KeyError, ValueError, SyntaxError) as error:
        raise Unreadable(f"corrupt DOCX ({error})") from error


def _block(item: Paragraph | Table) -> str:
    """One body element as Markdown; empty paragraphs give ``""``."""
    if hasattr(item, "rows"):
        rows = [[cell.text for cell in row.cells] for row in item.rows]
        return markdown_table(rows) if rows else ""
    return _paragraph(item)


def _paragraph(paragraph: Paragraph) -> str:
    text = paragraph.text.strip()
    if not text:
        return ""
    if level := _heading_level(paragraph):
        return f"{'#' * level} {' '.join(text.split())}"
    if (depth := _list_depth(paragraph)) is not None:
        return f"{'  ' * depth}- {text}"
    return text


def _style_name(paragraph: Paragraph) -> str:
    style = paragraph.style
    return (style.name or "") if style is not None else ""


def _heading_level(paragraph: Paragraph) -> int | None:
    """1 for "Title" and "Heading 1", N for "Heading N" (at most 6), else None."""
    name = _style_name(paragraph)
    if name == "Title":
        return 1
    match = _HEADING_STYLE.fullmatch(name)
    return min(int(match.group(1)), 6) if match else None


def _list_depth(paragraph: Paragraph) -> int | None:
    """Nesting depth from 0 for list paragraphs (by Word numbering or list style), else None."""
    properties = paragraph._p.pPr  # python-docx has no public accessor for numbering
    numbering = properties.numPr if properties is not None else None
    if numbering is not None and numbering.ilvl is not None:
        return int(numbering.ilvl.val)
    if numbering is not None:
        return 0
    if match := _LIST_STYLE_LEVEL.fullmatch(_style_name(paragraph)):
        return int(match.group(1)) - 1 if match.group(1) else 0
    return None


def _first_heading(document: Document) -> str:
    """Text of the first "Title" or "Heading 1" paragraph, or ``""``."""
    for paragraph in document.paragraphs:
        if _heading_level(paragraph) == 1 and (text := paragraph.text.strip()):
            return " ".join(text.split())
    return ""


def _join(blocks: list[str]) -> str:
    """Blank lines between blocks, except between consecutive list items (a tight list)."""
    parts = blocks[:1]
    for previous, block in pairwise(blocks):
        tight = _is_list_item(previous) and _is_list_item(block)
        parts += ["\n" if tight else "\n\n", block]
    return "".join(parts) + "\n" if parts else ""


def _is_list_item(block: str) -> bool:
    # A paragraph typed as "- x" is a list item in Markdown too, so judging by text is right.
    return block.lstrip(" ").startswith("- ")
