"""PDF → Markdown: pymupdf4llm when it is installed (the optional ``pdf`` extra), else
the reader every install has (``readers/pdfium``, pypdfium2).

pymupdf and pymupdf4llm are AGPL-3.0, so they are not a dependency: they are imported
only when a PDF is read, and when they cannot be (not installed, or pymupdf4llm's import
refusing a pymupdf of another version) the PDF is read by pypdfium2 instead of failing
(issue 20 item 8: PDFs failed in the default install).

With pymupdf 2.0, ``import pymupdf`` also loads the bundled pymupdf-layout
model (an ONNX network shipped in the wheel: offline, and deterministic across
runs), taking about 0.75 s, and ``to_markdown`` uses it for reading order,
headings and tables. Measured on a 2-core dev box with generated pages: 0.22 s
per sparse page and 0.35 s per dense page, against 0.08-0.1 s for the older
heuristic path. We keep the model for its reading order on multi-column pages;
switching it off (``pymupdf4llm.use_layout(False)``) mutates process-wide
state in both libraries.
OCR is switched off: it would need an external engine, would print notices to
stdout, and would make text appear that is not in the file.

When pymupdf4llm raises on a file, the file is read by pypdfium2 instead, and the
library's reason kept in its notes (``list`` shows it): a converter's bug is not the
file's. A PDF without a text layer (a scan) is rejected with a reason instead of being
stored as an empty document, so the user learns to run OCR first.

``read_pdf_text`` is the faster mode (setting ``pdf_mode = text``): pypdfium2's text,
page by page in the order the file stores it, with headings by font size, whether or not
the extra is installed (``docs/architecture.md`` has the measured speed and quality).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kb_mcp.errors import Unreadable
from kb_mcp.ingest.readers import pdfium
from kb_mcp.ingest.readers.base import Converted
from kb_mcp.ingest.readers.text import markdown_title

if TYPE_CHECKING:
    import pymupdf


def read_pdf(data: bytes) -> Converted:
    """Convert a PDF to Markdown titled by its metadata, else its first ``# `` heading:
    with pymupdf4llm when it can be imported, else with pypdfium2."""
    if not _rich_reader_importable():
        return pdfium.read_pdf(data)
    with _open(data) as document:
        _require_text_layer(document)
        markdown, failure = _to_markdown(document)
        title = (document.metadata or {}).get("title", "").strip()
    if markdown is None:  # the converter's bug is not the file's: the built-in reader reads it
        built_in = pdfium.read_pdf(data)
        note = f"pymupdf4llm failed ({failure}); read by the built-in PDF reader"
        return dataclasses.replace(built_in, notes=(*built_in.notes, note))
    markdown = pdfium.tidy(markdown)
    return Converted(markdown, "pdf", None, title or markdown_title(markdown), exact=False)


PDF_MODES = ("layout", "text")


def read_pdf_text(data: bytes) -> Converted:
    """The fast mode: pypdfium2's text of each page, whatever is installed."""
    return pdfium.read_pdf(data)


def _rich_reader_importable() -> bool:
    """Whether the AGPL libraries import here (imported on first use, never at start).

    Any ``ImportError`` counts as not installed: pymupdf4llm also raises it when its
    version does not match pymupdf's.
    """
    try:
        import pymupdf  # noqa: F401
        import pymupdf4llm  # noqa: F401
    except ImportError:
        return False
    return True


def _open(data: bytes) -> pymupdf.Document:
    """Open the bytes as a PDF; corrupt and password-protected files raise ``Unreadable``."""
    import pymupdf

    try:
        document = pymupdf.open(stream=data, filetype="pdf")
    except RuntimeError as error:  # pymupdf.FileDataError and EmptyFileError
        raise Unreadable(f"not a valid PDF ({error})") from error
    if document.needs_pass:
        document.close()
        raise Unreadable("encrypted PDF (needs a password); save a decrypted copy first")
    return document


def _require_text_layer(document: pymupdf.Document) -> None:
    """Raise ``Unreadable`` when no page has extractable text (a scan or image-only PDF)."""
    if not any(page.get_text().strip() for page in document):
        raise Unreadable("no text layer (image-only PDF); run OCR first")


def _to_markdown(document: pymupdf.Document) -> tuple[str | None, str | None]:
    """pymupdf4llm's Markdown, or None and why it failed."""
    import pymupdf4llm

    # Trigger: any exception inside the converter. Why: it is third-party code walking
    # untrusted files, and its failures are not a documented set. Outcome: the file is
    # read by the built-in reader instead, with the library's reason in its notes
    # (shown by ``list``), and a folder sync goes on.
    try:
        return pymupdf4llm.to_markdown(document, use_ocr=False, show_progress=False), None
    except Exception as error:
        return None, f"{type(error).__name__}: {error}"
