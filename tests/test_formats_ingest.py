"""Every supported file format, ingested from a real folder and found again by search.

Each test writes real files (PDFs and DOCX generated here) into a folder in
``tmp_path``, registers it, syncs it into a real ``kb.db``, then checks what an agent
relies on: the search hit names the right path, and its ``cite`` read back through
``library.lookup.read`` returns exactly the cited lines, which hold the text searched for.
(GitHub issue "Folder sources and real file formats".)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.ingest import filework, workers
from kb_mcp.ingest.readers.text import looks_like_rst, read_plain
from kb_mcp.ingest.sync import SyncReport
from kb_mcp.library import Library
from kb_mcp.search.engine import Hit
from kb_mcp.settings import Settings

# --- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder to be registered as a source."""
    path = tmp_path / "notes"
    path.mkdir()
    return path


def ingest(library: Library, folder: Path, files: dict[str, str | bytes]) -> SyncReport:
    """Write ``files`` (rel path → text or bytes) into ``folder``, register it, sync it."""
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    library.folders.add_folder(folder)
    [report] = library.folders.sync()
    return report


def only_hit(library: Library, query: str) -> Hit:
    """The one search hit for ``query``; fails when there are none or several."""
    hits = library.lookup.search(query).hits
    assert len(hits) == 1, f"{query!r}: expected one hit, got {[h.path for h in hits]}"
    return hits[0]


def assert_cite_reads_back(library: Library, hit: Hit, word: str) -> str:
    """``read(cite)`` returns exactly the hit's lines, and they hold ``word``; returns them."""
    read = library.lookup.read(hit.cite)
    assert (read.doc, read.start_line, read.end_line) == (hit.doc, hit.start_line, hit.end_line)
    assert read.text == hit.text
    assert word in read.text
    return read.text


def stored_paths(library: Library) -> set[str]:
    """Every path ``grep`` can see, found by grepping for any character."""
    return {m.path for m in library.lookup.grep(".", regex=True, max_matches=1_000).matches}


# --- Markdown ---------------------------------------------------------------------------------

FRONTMATTER_NOTE = """\
---
title: Quokka Field Notes
date: 2021-03-04
tags: [wildlife, australia]
---

# Sightings

The quokka on Rottnest smiled zephyrine at the camera.
"""


def test_markdown_frontmatter_sets_title_date_and_tags(library: Library, folder: Path) -> None:
    report = ingest(library, folder, {"field/quokka.md": FRONTMATTER_NOTE})
    assert (report.added, report.failed) == (1, 0)
    hit = only_hit(library, "zephyrine")
    assert (hit.path, hit.source, hit.title, hit.date) == (
        "field/quokka.md",
        "notes",
        "Quokka Field Notes",
        "2021-03-04",
    )
    assert_cite_reads_back(library, hit, "zephyrine")
    assert hit.start_line <= 9 <= hit.end_line  # the body line, counted in the file itself
    document = library.lookup.read(hit.doc)
    assert (document.kind, document.tags, document.date) == (
        "markdown",
        ("wildlife", "australia"),
        "2021-03-04",
    )


# --- pass-through text and data ---------------------------------------------------------------

TEXT_FORMATS = [
    pytest.param("log.txt", "Day one.\nThe xylophonic chorus woke us.\n", "xylophonic", "text",
                 id="txt"),
    pytest.param("agenda.org", "* Tasks\n** TODO buy marmalade jars\n", "marmalade", "text",
                 id="org"),
    pytest.param("guide.rst", "Guide\n=====\n\nKumquat trees need sun.\n", "Kumquat", "rst",
                 id="rst"),
    pytest.param("zoo.csv", "name,animal\nbob,narwhal\nann,ibis\n", "narwhal", "data", id="csv"),
    pytest.param("zoo.json", '{\n  "creature": "axolotl",\n  "legs": 4\n}\n', "axolotl", "data",
                 id="json"),
    pytest.param("zoo.yaml", "beasts:\n  - capybara\n  - tapir\n", "capybara", "data", id="yaml"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "content", "word", "kind"), TEXT_FORMATS)
def test_text_format_is_indexed_with_path_and_exact_cite(
    library: Library, folder: Path, name: str, content: str, word: str, kind: str
) -> None:
    ingest(library, folder, {f"docs/{name}": content})
    hit = only_hit(library, word)
    assert (hit.path, hit.title) == (f"docs/{name}", name)
    text = assert_cite_reads_back(library, hit, word)
    # Pass-through formats are stored as written: the cited lines are the file's lines.
    lines = content.split("\n")
    assert text == "\n".join(lines[hit.start_line - 1 : hit.end_line])
    assert library.lookup.read(hit.doc).kind == kind


# --- source code ------------------------------------------------------------------------------

# Bodies long enough that two definitions never share a chunk (chunk budget: 1,800 chars).
_FILLER = {
    "python": '    note_{i} = "filler sentence number {i} that pads out the function body"',
    "typescript": '  const note{i} = "filler sentence number {i} that pads out the function body";',
    "go": '\tnote{i} := "filler sentence number {i} that pads out the function body"',
}
_RETURN = {
    "python": "    return {word!r}",
    "typescript": '  return "{word}";',
    "go": '\treturn "{word}"',
}
_HEAD = {
    "python": "def {name}():",
    "typescript": "export function {name}(): string {{",
    "go": "func {name}() string {{",
}
_PREAMBLE = {
    "python": ['"""Helpers."""', "import os", ""],
    "typescript": ['import { readFileSync } from "fs";', ""],
    "go": ["package main", "", 'import "fmt"', ""],
}
_SUFFIX = {"python": "py", "typescript": "ts", "go": "go"}


def source_file(language: str, functions: list[tuple[str, str]]) -> tuple[str, dict[str, int]]:
    """Source text defining each ``(name, word)`` function; returns it and each def's line."""
    lines = list(_PREAMBLE[language])
    starts = {}
    for name, word in functions:
        starts[name] = len(lines) + 1
        lines.append(_HEAD[language].format(name=name))
        lines += [_FILLER[language].format(i=i) for i in range(22)]
        lines.append(_RETURN[language].format(word=word))
        if language != "python":
            lines.append("}")
        lines.append("")
    return "\n".join(lines), starts


@pytest.mark.parametrize("language", ["python", "typescript", "go"])
def test_code_search_cites_the_function_from_its_definition_line(
    library: Library, folder: Path, language: str
) -> None:
    text, starts = source_file(
        language,
        [("load_config", "alphaword"), ("count_wombats", "wombatology"), ("close_all", "omega")],
    )
    name = f"src/tools.{_SUFFIX[language]}"
    ingest(library, folder, {name: text})
    hit = only_hit(library, "wombatology")
    assert hit.path == name
    keyword = {"python": "def", "typescript": "function", "go": "func"}[language]
    assert hit.section == (f"{keyword} count_wombats",)
    assert hit.start_line == starts["count_wombats"]
    assert hit.end_line < starts["close_all"]
    cited = assert_cite_reads_back(library, hit, "wombatology")
    assert "count_wombats" in cited.split("\n")[0]
    assert "load_config" not in cited and "close_all" not in cited
    read = library.lookup.read(hit.doc)
    assert read.kind == "code"


# --- HTML -------------------------------------------------------------------------------------

CHROME = """\
<!doctype html>
<html>
<head>
  <title>Migration Report</title>
  <style>.jabberstyle { color: red }</style>
  <script>var scriptword = "jabberwock";</script>
</head>
<body>
  <header><a href="/">Gryphonsite banner</a></header>
  <nav><ul><li><a href="/a">snarkmenu home</a></li><li>snarkmenu about</li></ul></nav>
  %s
  <aside>bandersnatch sidebar links</aside>
  <footer>Copyright tumtumtree</footer>
  <script>track("borogove")</script>
</body>
</html>
"""
ARTICLE = """\
<h1>Ocelot migration</h1>
  <p>The ocelot population moved north in the dry season.</p>"""
BOILERPLATE = (
    "jabberwock", "jabberstyle", "Gryphonsite", "snarkmenu", "bandersnatch", "tumtumtree",
    "borogove",
)  # fmt: skip


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("<main>%s</main>", id="main"),
        pytest.param("<article>%s</article>", id="article"),
        pytest.param('<div class="content">%s</div>', id="bare-body"),
    ],
)
def test_html_article_text_is_searchable_and_boilerplate_is_not(
    library: Library, folder: Path, layout: str
) -> None:
    ingest(library, folder, {"web/report.html": CHROME % (layout % ARTICLE)})
    hit = only_hit(library, "ocelot population")
    assert (hit.path, hit.title) == ("web/report.html", "Migration Report")
    assert_cite_reads_back(library, hit, "The ocelot population moved north in the dry season.")
    for chrome in BOILERPLATE:
        assert library.lookup.search(chrome).hits == (), chrome
        assert library.lookup.grep(chrome, ignore_case=True).matches == (), chrome


# --- PDF --------------------------------------------------------------------------------------


@pytest.fixture
def pymupdf():
    return pytest.importorskip("pymupdf")


def text_pdf(pymupdf, pages: list[str], title: str = "") -> bytes:
    """A PDF with one page of text per entry (real text layer)."""
    document = pymupdf.open()
    for text in pages:
        page = document.new_page()
        page.insert_text((72, 72), text, fontsize=11)
    if title:
        document.set_metadata({"title": title})
    return document.tobytes()


def image_only_pdf(pymupdf) -> bytes:
    """A PDF whose one page holds only an image and a drawn box: a scan, no text layer."""
    document = pymupdf.open()
    page = document.new_page()
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 16), False)
    pixmap.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 72, 300, 300), pixmap=pixmap)
    page.draw_rect(pymupdf.Rect(72, 320, 300, 400), color=(0, 0, 0), fill=(0.5, 0.5, 0.5))
    return document.tobytes()


def test_pdf_text_is_searchable_with_a_cite_read_returns(
    library: Library, folder: Path, pymupdf
) -> None:
    data = text_pdf(
        pymupdf,
        ["Quarterly budget overview.", "Heliotrope budgets rise in spring."],
        title="Budget 2024",
    )
    report = ingest(library, folder, {"reports/budget.pdf": data})
    assert (report.added, report.failed) == (1, 0)
    hit = only_hit(library, "heliotrope")
    assert (hit.path, hit.title) == ("reports/budget.pdf", "Budget 2024")
    assert_cite_reads_back(library, hit, "Heliotrope budgets rise in spring.")
    assert library.lookup.read(hit.doc).kind == "pdf"


def test_pdf_image_only_is_failed_with_reason_and_never_indexed(
    library: Library, folder: Path, pymupdf
) -> None:
    report = ingest(
        library,
        folder,
        {"scans/receipt.pdf": image_only_pdf(pymupdf), "keep.md": "A normal note.\n"},
    )
    assert (report.added, report.failed) == (1, 1)
    [(path, reason)] = report.failures
    assert path == "scans/receipt.pdf"
    assert "no text layer" in reason
    overview = library.catalog.overview()
    assert overview.health["failed_files"] == 1
    assert [(s.name, s.documents, s.failed) for s in overview.sources] == [("notes", 1, 1)]
    assert [d.path for d in library.catalog.list_source("notes").documents] == ["keep.md"]
    assert stored_paths(library) == {"keep.md"}
    # The next sync reports it again, still failed and still not indexed.
    [again] = library.folders.sync()
    assert again.failures == [(path, reason)]
    assert library.catalog.overview().documents == 1


@pytest.mark.parametrize(
    ("bound", "value", "reason"),
    [
        ("BOUNDED_SECONDS", 0.01, "took longer than 0.01 s of CPU and was stopped"),
        ("BOUNDED_RSS_BYTES", 1024 * 1024, "needed more than 1 MB of memory and was stopped"),
    ],
)
def test_pdf_over_its_time_or_memory_bound_is_killed_failed_and_the_rest_syncs(
    library: Library,
    folder: Path,
    pymupdf,
    monkeypatch: pytest.MonkeyPatch,
    bound: str,
    value: float,
    reason: str,
) -> None:
    """issue 10: a PDF is converted in a process of its own; one that overruns the
    time or memory bound is killed and recorded as failed with that reason, and every
    other file of the folder is indexed."""
    if bound == "BOUNDED_RSS_BYTES" and not Path("/proc/self/statm").exists():
        pytest.skip("the memory bound reads /proc")
    monkeypatch.setattr(filework, bound, value)
    monkeypatch.setattr(workers, "WALL_FACTOR", 10_000)  # only the bound under test stops it
    data = text_pdf(pymupdf, ["Heliotrope budgets rise in spring."])
    report = ingest(library, folder, {"big.pdf": data, "keep.md": "A heron note.\n"})
    assert (report.added, report.failed) == (1, 1)
    assert report.failures == [("big.pdf", f"cannot read big.pdf: conversion {reason}")]
    assert stored_paths(library) == {"keep.md"}
    assert [h.path for h in library.lookup.search("heron").hits] == ["keep.md"]


def test_pdf_mode_text_indexes_the_plain_text_without_layout_analysis(
    tmp_path: Path, folder: Path, pymupdf
) -> None:
    """issue 10: ``pdf_mode = text`` reads a PDF with pypdfium2's plain text (no layout
    model), titled by its metadata; an image-only PDF is still refused with the reason."""
    from kb_mcp.ingest.readers import pdf
    from kb_mcp.settings import PDF_MODES, Settings

    assert pdf.PDF_MODES == PDF_MODES
    data = text_pdf(pymupdf, ["Quarterly overview.", "Heliotrope budgets rise."], "Budget")
    settings = Settings(home=tmp_path / "home", embedder="none", pdf_mode="text")
    with Library(settings) as library:
        report = ingest(library, folder, {"b.pdf": data, "scan.pdf": image_only_pdf(pymupdf)})
        assert (report.added, report.failed) == (1, 1)
        assert "no text layer" in dict(report.failures)["scan.pdf"]
        hit = only_hit(library, "heliotrope")
        assert (hit.path, hit.title) == ("b.pdf", "Budget")
        assert (
            library.lookup.read(hit.doc).text == "Quarterly overview.\n\nHeliotrope budgets rise.\n"
        )


def test_pdfs_convert_in_bounded_processes_after_the_text_files_are_committed(
    library: Library, folder: Path, pymupdf
) -> None:
    """issue 22 (issue 10 item 3 before): the text files of a folder are written and
    committed before the first PDF conversion starts, so they are keyword-searchable
    without waiting for the PDFs, whose conversions do not take the cores from the text
    readers meanwhile; then the PDFs convert in bounded processes, each indexed."""
    import multiprocessing

    import apsw

    from kb_mcp.home import DB_FILE

    converting_while_text: list[int] = []
    committed_at_first_pdf: list[int] = []

    def progress(done: int, total: int, rel: str) -> None:
        if rel.endswith(".md"):
            converting_while_text.append(
                sum(p.name == "kb-mcp-bounded" for p in multiprocessing.active_children())
            )
        elif not committed_at_first_pdf:  # another connection sees what was committed
            other = apsw.Connection(str(library.settings.home / DB_FILE))
            [(notes,)] = other.execute(
                "SELECT count(*) FROM documents WHERE kind = 'markdown'"
            ).fetchall()
            other.close()
            committed_at_first_pdf.append(notes)

    pdfs = {f"p{n}.pdf": text_pdf(pymupdf, [f"Heliotrope report number{n}."]) for n in range(3)}
    notes = {f"n{n}.md": f"A heron note {n}.\n" for n in range(3)}
    for rel, content in {**pdfs, **notes}.items():
        path = folder / rel
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    library.folders.add_folder(folder)
    [report] = library.folders.sync(progress=progress)
    assert (report.added, report.failed) == (6, 0)
    assert converting_while_text == [0, 0, 0]
    assert committed_at_first_pdf == [3]
    assert {h.path for h in library.lookup.search("heliotrope report").hits} == set(pdfs)


@pytest.mark.parametrize("mode", ["layout", "text"])
def test_pdf_upload_is_converted_under_the_bounds_and_honours_pdf_mode(
    tmp_path: Path, pymupdf, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """issue 10 item 3: ``import_file`` (``kb-mcp add FILE``) converts a PDF as a sync
    does: in a bounded process, as ``pdf_mode`` says; past a bound it is refused with
    the reason and nothing is stored."""
    from kb_mcp.errors import Unreadable
    from kb_mcp.settings import Settings

    path = tmp_path / "budget.pdf"
    path.write_bytes(text_pdf(pymupdf, ["Quarterly overview.", "Heliotrope budgets rise."]))
    settings = Settings(home=tmp_path / "home", embedder="none", pdf_mode=mode)
    with Library(settings) as library:
        library.writing.import_file(path)
        # the text mode titles an untitled PDF by its first line, the layout mode by its
        # first heading, else the file's name
        expected = "Quarterly overview." if mode == "text" else "budget.pdf"
        assert only_hit(library, "heliotrope").title == expected
        monkeypatch.setattr(filework, "BOUNDED_SECONDS", 0.01)
        monkeypatch.setattr(workers, "WALL_FACTOR", 10_000)  # the CPU bound, not the wall's
        (tmp_path / "late.pdf").write_bytes(text_pdf(pymupdf, ["Zephyrine late page."]))
        with pytest.raises(Unreadable, match=r"took longer than 0\.01 s of CPU and was stopped"):
            library.writing.import_file(tmp_path / "late.pdf")
        assert library.lookup.search("zephyrine").hits == ()


def test_a_conversion_is_bounded_by_its_own_cpu_time_and_one_that_waits_by_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 22: the time bound counts the child's CPU, so a busy machine (a child
    waiting for a core) does not stop a conversion that is within its bound; a child
    that uses no CPU at all is still stopped, after ``WALL_FACTOR`` times the bound."""
    import time

    if not Path("/proc/self/stat").exists():
        pytest.skip("the CPU clock of a child is read from /proc")
    result, reason = workers.run_bounded(time.sleep, (0.2,), seconds=30, max_rss_bytes=2**31)
    assert (result, reason) == (None, None)  # slept 0.2 s of wall time, well inside
    monkeypatch.setattr(workers, "WALL_FACTOR", 0.05)  # a wall-clock bound of 1.5 s
    result, reason = workers.run_bounded(time.sleep, (600,), seconds=30, max_rss_bytes=2**31)
    assert (result, reason) == (None, "conversion took longer than 1.5 s and was stopped")


# --- DOCX -------------------------------------------------------------------------------------


def test_docx_headings_and_text_are_searchable_with_a_cite_read_returns(
    library: Library, folder: Path
) -> None:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_heading("Quarterly Memo", level=1)
    document.add_paragraph("The marzipan initiative launched in March.")
    document.add_heading("Risks", level=2)
    document.add_paragraph("Supply of almonds is uncertain.")
    path = folder / "memo.docx"
    document.save(path)
    report = ingest(library, folder, {})
    assert (report.added, report.failed) == (1, 0)
    hit = only_hit(library, "marzipan")
    assert (hit.path, hit.title) == ("memo.docx", "Quarterly Memo")
    cited = assert_cite_reads_back(library, hit, "The marzipan initiative launched in March.")
    assert "# Quarterly Memo" in cited
    almonds = only_hit(library, "almonds")
    assert almonds.section[-1] == "Risks"
    assert library.lookup.read(hit.doc).kind == "docx"


# --- encodings --------------------------------------------------------------------------------


def test_utf16_file_with_bom_is_decoded(library: Library, folder: Path) -> None:
    text = "Café notes\nThe résumé of the tapir über alles.\n"
    ingest(library, folder, {"wide.txt": text.encode("utf-16")})  # BOM + UTF-16 LE
    hit = only_hit(library, "tapir")
    assert hit.path == "wide.txt"
    cited = assert_cite_reads_back(library, hit, "The résumé of the tapir über alles.")
    assert "\ufeff" not in cited and "\x00" not in cited
    assert library.lookup.read(hit.doc).text == text


def test_cp1252_file_is_decoded_with_its_punctuation(library: Library, folder: Path) -> None:
    text = "Smart “quotes” — a naïve okapi costs 5 €.\n"
    ingest(library, folder, {"legacy.txt": text.encode("cp1252")})
    hit = only_hit(library, "okapi")
    assert hit.path == "legacy.txt"
    assert_cite_reads_back(library, hit, "“quotes” — a naïve okapi costs 5 €")
    assert library.lookup.read(hit.doc).text == text
    assert only_hit(library, "naïve").doc == hit.doc


# --- reST in .txt files (Django's docs, Sphinx's _sources) ------------------------------------

DJANGO_STYLE_TXT = """\
==================
QuerySet reference
==================

.. currentmodule:: example.query

Methods that return new querysets
=================================

``filter()``
~~~~~~~~~~~~

Returns a new queryset of objects that match the given lookups.

``exclude()``
~~~~~~~~~~~~~

Returns the objects that do not match; see :doc:`/topics/lookups` for the marmoset syntax.
"""


def test_rst_written_txt_file_is_chunked_by_its_sections(tmp_path: Path, folder: Path) -> None:
    """Outsider run on Django's docs: a ``.txt`` file in reST is cut at its section titles.

    Read as Markdown, the first ``~~~~`` underline opened a code fence that ran to the
    next one, so ``exclude()`` was not in the heading path of the passage holding its text.
    """
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        ingest(library, folder, {"docs/ref/querysets.txt": DJANGO_STYLE_TXT})
        hit = only_hit(library, "marmoset")
        assert hit.section[-1] == "``exclude()``", hit.section
        assert (hit.start_line, hit.end_line) == (15, 18)
        assert_cite_reads_back(library, hit, "marmoset")
    finally:
        library.close()


def test_plain_txt_with_underlined_banner_stays_plain_text() -> None:
    """The reST sniff needs reST markup too: a README.txt banner is not enough (outsider run)."""
    banner = "Release notes\n=============\n\nThe ocelot build is faster.\n"
    assert not looks_like_rst(banner)
    assert read_plain(banner.encode()).kind == "text"
    assert read_plain(DJANGO_STYLE_TXT.encode()).kind == "rst"
