"""PDF → Markdown-ish text with pypdfium2: the reader every install has.

Why this library (``docs/architecture.md`` has the table and the command): on seven real
manuals from ``/usr/share/doc`` it found the same words as pypdf, pdfminer.six and
pymupdf, at a tenth of pypdf's CPU a page and the smallest peak memory, under
Apache-2.0 / BSD-3-Clause (it wraps Google's PDFium, shipped in the wheel). pymupdf4llm
(AGPL, the ``pdf`` extra) stays the richer reader when installed (``readers/pdf``).

What comes out: each page's text lines in the order PDFium gives them, pages separated
by a blank line; a line set in a larger font than the body text becomes a ``#`` heading
(the font size of its first character, one PDFium call a line), so a manual is chunked by
its sections. A page's running header and footer go: its first or last line when it is a
page number ("12", "iv", "Page 3 of 9") or, digits aside, the same text at the edge of
at least ``RUNNING_MIN_PAGES`` pages and a tenth of them ("Chapter 7: Reference 93" on
90 of nettle's 111 pages), so a paragraph running on over a page break is not cut by
them and they do not match every search for a chapter's name. PDFium's own marks are
resolved: U+FFFE (a word hyphenated at a line end, which PDFium joins) becomes the word,
or keeps its hyphen when the word already holds one ("day-to-day",
"--gen-suppressions"); control characters (glyphs of math fonts with no Unicode meaning)
go.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from kb_mcp.errors import Unavailable, Unreadable
from kb_mcp.ingest.readers.base import Converted

if TYPE_CHECKING:
    import pypdfium2

# A line is a heading when its font is this much larger than the body text's (the size
# most characters have), it is short, and it is not a table-of-contents entry.
HEADING_SCALE = 1.2
MAX_HEADING_CHARS = 100
HEADING_LEVELS = 3
RUNNING_MIN_PAGES = 3
# What Markdown reads as a heading at a line's start: ATX "#" marks, a setext underline.
_HEADING_SYNTAX = re.compile(r"^( {0,3})(#{1,6}(?=[ \t]|$)|=+[ \t]*$|-+[ \t]*$)")
# "12", "Page 3", "3 of 9", "- 4 -", and roman numerals written as such ("xiv", not "mild").
_ROMAN = r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
_PAGE_NUMBER = re.compile(
    rf"(?:page\s+)?(?:\d{{1,4}}|(?=[ivxlcdm]){_ROMAN})(?:\s+of\s+\d{{1,4}})?|[-–]\s*\d{{1,4}}\s*[-–]",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_TOC_LEADER = re.compile(r"(?:\. ?){3,}\s*\w*\s*$")
_LETTER = re.compile(r"[^\W\d_]")
_LINE_END = re.compile(r"\r\n|\r|\n")
_SOFT_HYPHEN = re.compile(r"(\S*)\ufffe(?=(\S?))")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class _Line:
    text: str
    size: float  # font size of its first character; 0 when PDFium gives none


def read_pdf(data: bytes) -> Converted:
    """Convert a PDF; titled by its metadata, else its first heading, else its first line."""
    pdfium = _import()
    document = _open(pdfium, data)
    try:
        printed = [_page_lines(document, index) for index in range(len(document))]
        title = (document.get_metadata_dict().get("Title") or "").strip()
    finally:
        document.close()
    if not _has_text(printed):
        raise Unreadable("no text layer (image-only PDF); run OCR first")
    pages = _without_running_lines(printed)
    pages = pages if _has_text(pages) else printed  # a file of page numbers is still one
    levels = _heading_levels([line for page in pages for line in page])
    blocks = ["\n".join(_markdown_line(line, levels) for line in page) for page in pages]
    markdown = tidy("\n\n".join(blocks))
    first = next((line for line in markdown.split("\n") if line.strip()), "")
    heading = next((ln[2:] for ln in markdown.split("\n") if ln.startswith("# ")), None)
    return Converted(
        markdown, "pdf", None, title or heading or first.strip()[:200] or None, exact=False
    )


def _import() -> ModuleType:
    """pypdfium2, a dependency: missing means a broken install, said with the fix."""
    try:
        import pypdfium2
        import pypdfium2.raw
    except ImportError as error:
        raise Unavailable(
            f"reading PDF files needs pypdfium2, a dependency of kb-mcp ({error})",
            hint="reinstall kb-mcp: pip install --force-reinstall kb-mcp",
        ) from error
    return pypdfium2


def _open(pdfium: ModuleType, data: bytes) -> pypdfium2.PdfDocument:
    """Open the bytes; corrupt and password-protected files raise ``Unreadable``."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        if getattr(error, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise Unreadable(
                "encrypted PDF (needs a password); save a decrypted copy first"
            ) from error
        raise Unreadable(f"not a valid PDF ({error})") from error


def _page_lines(document: pypdfium2.PdfDocument, index: int) -> list[_Line]:
    """One page's lines, each with the font size of its first character."""
    import pypdfium2.raw as raw

    page = document[index]
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        # PDFium counts the line breaks it makes as characters, so character i of the
        # text is PDFium's character i; not so past a character outside the BMP (two
        # UTF-16 units), and then no font sizes are asked for.
        sized = len(text) == textpage.count_chars()
        lines = []
        for start, line in _line_spans(text):
            lead = len(line) - len(line.lstrip())
            size = 0.0
            if sized and line.strip():
                size = raw.FPDFText_GetFontSize(textpage.raw, start + lead)
            lines.append(_Line(_clean(line), round(size * 2) / 2))
        return lines
    finally:
        textpage.close()
        page.close()


def _line_spans(text: str) -> Iterator[tuple[int, str]]:
    """Each line of ``text`` (PDFium ends them with \\r\\n) and the offset it starts at."""
    start = 0
    for end in _LINE_END.finditer(text):
        yield start, text[start : end.start()]
        start = end.end()
    yield start, text[start:]


def _has_text(pages: list[list[_Line]]) -> bool:
    return any(line.text.strip() for page in pages for line in page)


def _without_running_lines(pages: list[list[_Line]]) -> list[list[_Line]]:
    """Each page without its running header and footer (module docstring)."""
    seen = Counter(key for page in pages for key in {_edge_key(line) for line in _edges(page)})
    least = max(RUNNING_MIN_PAGES, len(pages) / 10)
    running = {key for key, count in seen.items() if count >= least}

    def is_running(line: _Line) -> bool:
        text = line.text.strip()
        return _PAGE_NUMBER.fullmatch(text) is not None or _edge_key(line) in running

    kept = []
    for page in pages:
        edges = {id(line) for line in _edges(page) if is_running(line)}
        kept.append([line for line in page if id(line) not in edges])
    return kept


def _edges(page: list[_Line]) -> list[_Line]:
    """A page's first and last lines with text (one line: itself)."""
    lines = [line for line in page if line.text.strip()]
    return lines[:1] + lines[1:][-1:]


def _edge_key(line: _Line) -> str:
    return _DIGITS.sub("#", line.text.strip())


def _clean(line: str) -> str:
    """PDFium's marks resolved (module docstring) and trailing blanks dropped."""
    line = _SOFT_HYPHEN.sub(_soft_hyphen, line)
    return _CONTROL.sub("", line).rstrip()


def _soft_hyphen(match: re.Match[str]) -> str:
    """A word PDFium joined at a line end: whole ("improv|ing"), or with its hyphen when
    the word holds one already ("day-to|day") or nothing follows on the line."""
    word, joined = match.group(1), match.group(2)
    return word + ("-" if "-" in word or not joined else "")


def _heading_levels(lines: list[_Line]) -> dict[float, int]:
    """Font size → heading level (1 for the largest), for sizes well above the body's."""
    chars = Counter()
    for line in lines:
        chars[line.size] += len(line.text)
    if not chars:
        return {}
    body = chars.most_common(1)[0][0]
    sizes = {ln.size for ln in lines if ln.size >= body * HEADING_SCALE and _heading_shaped(ln)}
    ranked = sorted(sizes, reverse=True)
    return {size: min(level, HEADING_LEVELS) for level, size in enumerate(ranked, 1)}


def _heading_shaped(line: _Line) -> bool:
    """Short, with a letter, and not a table-of-contents entry ("2.1 Naming . . . 3")."""
    text = line.text.strip()
    return (
        0 < len(text) <= MAX_HEADING_CHARS
        and _LETTER.search(text) is not None
        and _TOC_LEADER.search(text) is None
    )


def _markdown_line(line: _Line, levels: dict[float, int]) -> str:
    """A heading by its font size; any other line as text, escaped where Markdown would
    read it as a heading: a shell prompt or comment printed in a manual (``# apt-get
    update``), or a rule of ``=`` / ``-`` under a line (a setext underline)."""
    if (level := levels.get(line.size)) and _heading_shaped(line):
        return "#" * level + " " + line.text.strip()
    return _HEADING_SYNTAX.sub(r"\1\\\2", line.text)


def tidy(markdown: str) -> str:
    """Drop trailing spaces and runs of blank lines; one newline at the end."""
    lines = [line.rstrip() for line in markdown.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return text + "\n" if text else ""
