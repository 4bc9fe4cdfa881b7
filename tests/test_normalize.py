"""Every reader's text is stored in one Unicode form, lines unmoved (issue 20 item 13).

LaTeX-made PDFs print an accent as a glyph before its letter, so their text reads
"M¨oller"; decoders and readers leave U+FFFD where they could not map a character. Both
are folded where text is converted, for every format, without adding or removing a line,
so a citation's line numbers are the file's.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from kb_mcp.ingest.normalize import normalize_text
from kb_mcp.library import Library
from kb_mcp.settings import Settings


@pytest.mark.parametrize(
    ("extracted", "stored"),
    [
        ("Niels M¨oller", "Niels Möller"),  # spacing diaeresis before its letter
        ("na¨ıve Micha¨el Fran´cois", "naïve Michaël Franćois"),  # TeX's dotless i
        ("caf\u0065\u0301", "café"),  # decomposed: NFC
        ("\ufb01le \ufb02ow", "file flow"),  # ligature glyphs
        ("infor\u00admation zebu\u200bfarming", "information zebufarming"),  # invisible
        ("\u0915\u094d\u200d\u0937", "\u0915\u094d\u200d\u0937"),  # ZWJ shapes Devanagari: kept
        ("ab\ufffdcd", "ab cd"),  # between two words: the separator it stood for
        ("\ufffd bullet", " bullet"),  # elsewhere: dropped
        ("ab\x00cd \x00bullet", "ab cd bullet"),  # NUL: read as U+FFFD
        ("x¨", "x¨"),  # no letter after it: as printed
        ("q¨\n¨\noo", "q¨\n¨\noo"),  # never across a line end
        ("plain text, nothing to do", "plain text, nothing to do"),
    ],
)
def test_normalize_text_joins_split_letters_and_keeps_every_line(
    extracted: str, stored: str
) -> None:
    assert normalize_text(extracted) == stored
    assert normalize_text(extracted).count("\n") == extracted.count("\n")


@pytest.fixture
def library(tmp_path: Path):
    with Library(Settings(home=tmp_path / "home", embedder="none")) as opened:
        yield opened


def test_pdf_and_text_files_are_stored_normalised_with_citations_on_the_files_lines(
    library: Library, tmp_path: Path
) -> None:
    pymupdf = pytest.importorskip("pymupdf")
    folder = tmp_path / "docs"
    folder.mkdir()
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 72), "Nettle Manual", fontsize=11)
    page.insert_text((72, 90), "Originally written by Niels M¨oller.", fontsize=11)
    (folder / "nettle.pdf").write_bytes(document.tobytes())
    # A UTF-8 file with its BOM and one bad byte: the decoder leaves U+FFFD for it.
    lines = ["# Credits", "", "Thanks to Micha¨el Peeters.", "Block\xff cipher notes.", "end"]
    raw = "\n".join(lines).encode("utf-8").replace(b"\xc3\xbf", b"\xff")
    (folder / "credits.md").write_bytes(codecs.BOM_UTF8 + raw)
    library.folders.add_folder(folder)
    [report] = library.folders.sync()
    assert (report.added, report.failed) == (2, 0), report.failures

    [pdf_hit] = library.lookup.search("Möller").hits
    assert pdf_hit.path == "nettle.pdf"
    assert "Niels Möller" in library.lookup.read(pdf_hit.doc).text

    [note_hit] = library.lookup.search("Michaël").hits
    note = library.lookup.read(note_hit.doc).text
    assert note.split("\n")[:5] == [
        "# Credits",
        "",
        "Thanks to Michaël Peeters.",
        "Block cipher notes.",
        "end",
    ]
    cited = library.lookup.read(note_hit.cite)
    assert "Thanks to Michaël Peeters." in cited.text.split("\n")
    assert cited.start_line <= 3 <= cited.end_line  # line 3 of the file
    assert "\ufffd" not in note and "¨" not in note


def test_a_soft_hyphen_inside_a_word_no_longer_hides_it_from_search_and_grep(
    library: Library, tmp_path: Path
) -> None:
    """HTML and word processors put U+00AD where a word may break: invisible, but it cut
    "information" in two for the keyword index and for grep."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "page.html").write_text(
        "<html><body><p>Quokka infor\u00admation desk.</p></body></html>", encoding="utf-8"
    )
    library.folders.add_folder(folder)
    library.folders.sync()
    assert [hit.path for hit in library.lookup.search("information").hits] == ["page.html"]
    assert [m.path for m in library.lookup.grep("information desk").matches] == ["page.html"]
