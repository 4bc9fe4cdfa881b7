"""Structure of real documentation kept (issue 20 item 11): AsciiDoc headings, no site chrome.

A new user's real corpus showed two losses. AsciiDoc manual pages (git's
``Documentation/*.txt``, and ``.adoc`` files) were chunked by Markdown rules, so a
``----`` listing delimiter under a shell command made the command a section title, and
each ``--`` open block made the paragraph above it one: 11 of 55 results were named by a
command or a paragraph. And every page of a DocBook- or Sphinx-built HTML site began its
stored text with the site's navigation (Prev / Up / Home / Next tables, "Navigation" bars,
sidebars with "Quick search", "Previous topic", "Show Source").

The pages here have the shapes those tools write (asciidoc.py manual pages, DocBook XSL's
chunked HTML, Sphinx's classic layout before ``role="main"``, texinfo's node pages),
with made-up words to search for.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_mcp.chunk import split_document
from kb_mcp.chunk.asciidoc import split_asciidoc
from kb_mcp.chunk.pack import chunk_cap
from kb_mcp.ingest.readers import read_path
from kb_mcp.ingest.readers.text import plain_converted
from kb_mcp.library import Library
from kb_mcp.search.engine import Hit
from kb_mcp.settings import Settings


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    opened = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        yield opened
    finally:
        opened.close()


def sync_folder(library: Library, folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (rel path → text) into ``folder``, register it and sync it."""
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    library.folders.add_folder(folder)
    library.folders.sync()


def only_hit(library: Library, query: str) -> Hit:
    hits = library.lookup.search(query).hits
    assert len(hits) == 1, f"{query!r}: expected one hit, got {[h.path for h in hits]}"
    return hits[0]


# --- AsciiDoc -----------------------------------------------------------------------------

# asciidoc.py's manual page: a title over "=", sections over "-" as long as their title,
# "[verse]", "::" option lists whose "+" continuation opens a "--" block holding its own
# "------" listing, an anchor before a section, "----" listings and a "...." literal block.
MANPAGE_TXT = """\
tidewatch-sync(1)
=================

NAME
----
tidewatch-sync - Copy tide tables between gauges

SYNOPSIS
--------
[verse]
'tidewatch sync' [--dry-run] [-q | --quiet] <gauge>...

DESCRIPTION
-----------
Copies the tide tables of each <gauge> to the harbour office.

OPTIONS
-------
--dry-run::
\tShow what would be copied, and copy nothing.
+
--
It is a rough equivalent for:
------
\t$ tidewatch list --changed --brinewater
------
but nothing is written.
--

-q::
--quiet::
\tPrint nothing but errors.

[[examples]]
EXAMPLES
--------
Copy the harbour gauge, then check it:

------------
$ tidewatch sync harbour
$ tidewatch check harbour --kelpmeter
------------

What a copy prints:

....
gauge harbour: 12 tables copied, 0 skipped
fathomline written
....

SEE ALSO
--------
linkgit:tidewatch-check[1]
"""

# The same page as Asciidoctor writes it: one-line titles, attributes under the title, a
# section title under a comment and preprocessor lines, an example block holding a "=="
# line that is no section, a block title and a source block.
MANPAGE_ADOC = """\
= tidewatch-sync(1)
:doctype: manpage
:manmanual: Tidewatch Manual

== NAME

tidewatch-sync - Copy tide tables between gauges

== OPTIONS

--dry-run::
Show what would be copied, and copy nothing.
+
--
It is a rough equivalent for:
------
$ tidewatch list --changed --brinewater
------
but nothing is written.
--

// tag::examples[]
ifdef::env-site[]
[[examples]]
endif::[]
== EXAMPLES

.Copy the harbour gauge, then check it
[source,shell]
----
$ tidewatch sync harbour
$ tidewatch check harbour --kelpmeter
----

====
== Not a section: a line inside an example block
What a copy prints:
....
gauge harbour: 12 tables copied, 0 skipped
fathomline written
....
====

== SEE ALSO

xref:tidewatch-check.adoc[tidewatch-check(1)]
"""

MANPAGES = {"man/tidewatch-sync.txt": MANPAGE_TXT, "man/tidewatch-sync.adoc": MANPAGE_ADOC}
SECTIONS = {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "SEE ALSO"}


@pytest.mark.parametrize("rel", sorted(MANPAGES))
def test_asciidoc_manual_page_sections_are_its_headings(rel: str, tmp_path: Path) -> None:
    """Every chunk's section is the page title and one of its section titles, never a
    command, a paragraph or a line of a listing."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(MANPAGES[rel], encoding="utf-8")
    converted = read_path(path)

    paths = {chunk.heading_path for chunk in split_document(converted.markdown, converted.kind)}

    assert converted.title == "tidewatch-sync(1)"
    assert {p[0] for p in paths} == {"tidewatch-sync(1)"}, paths
    assert {p[-1] for p in paths if len(p) > 1} <= SECTIONS, paths
    assert all(len(p) == 2 for p in paths), paths


@pytest.mark.parametrize("name", ["man/tidewatch-sync.adoc", "man/tidewatch-sync.asciidoc"])
def test_both_asciidoc_suffixes_are_read_as_asciidoc_prose(name: str, tmp_path: Path) -> None:
    """``.asciidoc`` is read as ``.adoc`` is, and ranks as prose documentation as it does."""
    path = tmp_path / name
    path.parent.mkdir()
    path.write_text(MANPAGE_ADOC, encoding="utf-8")
    assert read_path(path).kind == "asciidoc"


@pytest.mark.parametrize("rel", sorted(MANPAGES))
def test_asciidoc_listing_lines_are_found_under_their_section_with_exact_cites(
    rel: str, library: Library, tmp_path: Path
) -> None:
    sync_folder(library, tmp_path / "docs", {rel: MANPAGES[rel]})
    lines = MANPAGES[rel].split("\n")

    for word, section in [
        ("kelpmeter", "EXAMPLES"),
        ("fathomline", "EXAMPLES"),
        ("brinewater", "OPTIONS"),
    ]:
        hit = only_hit(library, word)
        assert hit.section == ("tidewatch-sync(1)", section), (word, hit.section)
        assert hit.text == "\n".join(lines[hit.start_line - 1 : hit.end_line])
        assert word in library.lookup.read(hit.cite).text


# Lines of every AsciiDoc block kind the scanner knows, unbalanced delimiters and noise.
_ASCIIDOC_LINES = [
    "= Title", "== Section ==", "Name", "----", "------", "====", "~~~~", "....", "--", "+",
    "****", "____", "++++", "////", "|===", "```", "```sh", "[[anchor]]", "[verse]",
    "[source,shell]", ".Block title", ":doctype: manpage", "-a::", "* item", ". step",
    "$ tidewatch sync", "\tindented", "", "", "Short sentence. Another one!", "word " * 40,
    "中文没有空格的一段文字。第二句。",
]  # fmt: skip
_asciidoc_texts = st.lists(
    st.one_of(st.sampled_from(_ASCIIDOC_LINES), st.text(max_size=40)), max_size=60
).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(_asciidoc_texts, st.integers(min_value=1, max_value=300))
def test_split_asciidoc_chunks_are_exact_slices_within_the_cap(text: str, budget: int) -> None:
    """Whatever the input: chunks in order, within the hard cap, each the text of its lines."""
    lines = text.split("\n")
    chunks = split_asciidoc(text, budget=budget, overlap=20)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text.strip()
        assert len(chunk.text) <= chunk_cap(budget)
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.text in "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def test_a_title_line_with_a_long_run_of_spaces_is_read_in_linear_time() -> None:
    """A one-line title's pattern once backtracked over spaces: 60,000 of them took
    minutes (quadratic); read in a single pass it is milliseconds."""
    text = "= tidewatch\n\n== Options" + " " * 60_000 + "x\n\nThe quillwort gauge.\n"

    started = time.perf_counter()
    chunks = split_asciidoc(text)
    elapsed = time.perf_counter() - started

    assert elapsed < 2.0, f"{elapsed:.1f}s"
    assert chunks[-1].heading_path[0] == "tidewatch"


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(":a" * 25_000, id="reST role sniff"),
        pytest.param("== Options" + " " * 50_000 + "x", id="AsciiDoc title"),
        pytest.param("include::" + "[x" * 100_000 + "\n== Options", id="AsciiDoc macro"),
        pytest.param("# Options" + " " * 50_000 + "x", id="Markdown heading"),
    ],
)
def test_sniffing_a_txt_files_markup_is_linear_in_its_longest_line(line: str) -> None:
    """Which markup a ``.txt`` is written in is decided on every line of it: a long line
    must not cost quadratic time (the reST role pattern took 15 s on 40 KB). The text is
    sniffed as decoded; with enough prose around it such a line passes the minified gate."""
    text = f"Tidewatch\n=========\n\n{line}\n\nThe quillwort gauge.\n"

    started = time.perf_counter()
    converted = plain_converted(text)
    split_document(converted.markdown, converted.kind)
    elapsed = time.perf_counter() - started

    assert elapsed < 2.0, f"{elapsed:.1f}s"


def test_plain_text_with_a_banner_and_markdown_headings_is_not_read_as_asciidoc(
    tmp_path: Path,
) -> None:
    """A ``.txt`` whose only AsciiDoc-like line is its underlined banner stays text, so
    its ``##`` headings and ``` fences keep their Markdown meaning."""
    path = tmp_path / "NOTES.txt"
    path.write_text(
        "Release notes\n=============\n\n## Fixes\n\n```\n$ make\n```\n\nThe ocelot build.\n",
        encoding="utf-8",
    )
    converted = read_path(path)
    assert converted.kind == "text"
    chunks = split_document(converted.markdown, converted.kind)
    assert chunks[-1].heading_path == ("Release notes", "Fixes")


# --- HTML site chrome -----------------------------------------------------------------------

# DocBook XSL's chunked output: a navigation table in div.navheader (Prev / Next images),
# the chapter's table of contents, and a div.navfooter table (Prev / Up / Home / Next).
DOCBOOK_PAGE = """\
<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
  <head>
    <title>Chapter 2. Tide tables</title>
    <meta name="generator" content="DocBook XSL Stylesheets Vsnapshot"/>
    <link rel="prev" href="ch01.en.html" title="Chapter 1. Gauges"/>
    <link rel="next" href="ch03.en.html" title="Chapter 3. Harbours"/>
  </head>
  <body>
    <div class="navheader">
      <table width="100%" summary="Navigation header">
        <tr><th colspan="3" align="center">Chapter 2. Tide tables</th></tr>
        <tr>
          <td align="left"><a accesskey="p" href="ch01.en.html"
            ><img src="images/prev.png" alt="Prev"/></a> </td>
          <th width="60%" align="center"> </th>
          <td align="right"> <a accesskey="n" href="ch03.en.html"
            ><img src="images/next.png" alt="Next"/></a></td>
        </tr>
      </table>
      <hr/>
    </div>
    <div class="chapter">
      <div class="titlepage"><div><div>
        <h1 class="title"><a id="_tide_tables"/>Chapter 2. Tide tables</h1>
      </div></div></div>
      <div class="toc">
        <p><strong>Table of Contents</strong></p>
        <dl class="toc">
          <dt><span class="section"
            ><a href="ch02.en.html#_reading">2.1. Reading a table</a></span></dt>
          <dt><span class="section"
            ><a href="ch02.en.html#_copying">2.2. Copying a table</a></span></dt>
        </dl>
      </div>
      <p>A tide table lists the high and low waters of one gauge, one quillwort per day.</p>
      <div class="section">
        <div class="titlepage"><div><div>
          <h2 class="title"><a id="_reading"/>2.1. Reading a table</h2>
        </div></div></div>
        <p>Each row gives the time and the height of the water.</p>
      </div>
    </div>
    <div class="navfooter">
      <hr/>
      <table width="100%" summary="Navigation footer">
        <tr>
          <td align="left"><a accesskey="p" href="ch01.en.html"
            ><img src="images/prev.png" alt="Prev"/></a> </td>
          <td align="center"><a accesskey="u" href="index.en.html"
            ><img src="images/up.png" alt="Up"/></a></td>
          <td align="right"> <a accesskey="n" href="ch03.en.html"
            ><img src="images/next.png" alt="Next"/></a></td>
        </tr>
        <tr>
          <td align="left" valign="top">Chapter 1. Gauges </td>
          <td align="center"><a accesskey="h" href="index.en.html"
            ><img src="images/home.png" alt="Home"/></a></td>
          <td align="right" valign="top"> Chapter 3. Harbours</td>
        </tr>
      </table>
    </div>
  </body>
</html>
"""

# Sphinx's classic layout as it was before ``role="main"``: "related" bars above and
# below, the body in div.document, a div.sphinxsidebar and a div.footer.
SPHINX_PAGE = """\
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"
  "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<html xmlns="http://www.w3.org/1999/xhtml">
  <head>
    <title>Tide tables &mdash; Tidewatch 2.0 documentation</title>
    <link rel="next" title="Harbours" href="harbours.html" />
  </head>
  <body>
    <div class="related">
      <h3>Navigation</h3>
      <ul>
        <li class="right" style="margin-right: 10px">
          <a href="genindex.html" title="General Index" accesskey="I">index</a></li>
        <li class="right"><a href="harbours.html" title="Harbours" accesskey="N">next</a> |</li>
        <li class="right"><a href="gauges.html" title="Gauges" accesskey="P">previous</a> |</li>
        <li><a href="index.html">Tidewatch 2.0 documentation</a> &raquo;</li>
      </ul>
    </div>
    <div class="document">
      <div class="documentwrapper">
        <div class="bodywrapper">
          <div class="body">
  <div class="section" id="tide-tables">
<h1>Tide tables<a class="headerlink" href="#tide-tables"
  title="Permalink to this headline">¶</a></h1>
<p>A tide table lists the high and low waters of one gauge, one quillwort per day.</p>
</div>
          </div>
        </div>
      </div>
      <div class="sphinxsidebar">
        <div class="sphinxsidebarwrapper">
  <h3><a href="index.html">Table Of Contents</a></h3>
  <ul><li><a class="reference internal" href="#">Tide tables</a></li></ul>
  <h4>Previous topic</h4>
  <p class="topless"><a href="gauges.html" title="previous chapter">Gauges</a></p>
  <h4>Next topic</h4>
  <p class="topless"><a href="harbours.html" title="next chapter">Harbours</a></p>
  <h3>This Page</h3>
  <ul class="this-page-menu">
    <li><a href="_sources/tides.txt" rel="nofollow">Show Source</a></li>
  </ul>
<div id="searchbox" style="display: none">
  <h3>Quick search</h3>
    <form class="search" action="search.html" method="get">
      <input type="text" name="q" />
      <input type="submit" value="Go" />
    </form>
    <p class="searchtip" style="font-size: 90%">
    Enter search terms or a module, class or function name.
    </p>
</div>
        </div>
      </div>
      <div class="clearer"></div>
    </div>
    <div class="related">
      <h3>Navigation</h3>
      <ul>
        <li class="right"><a href="harbours.html" title="Harbours">next</a> |</li>
        <li><a href="index.html">Tidewatch 2.0 documentation</a> &raquo;</li>
      </ul>
    </div>
    <div class="footer">
      &copy; Copyright 2014, The Tidewatch Team. Created using Sphinx 1.2.3.
    </div>
  </body>
</html>
"""

# texinfo's node page: a div.header paragraph of Next / Previous / Up links (rel="next").
TEXINFO_PAGE = """\
<!DOCTYPE html>
<html>
<head><title>Tide tables (Tidewatch Manual)</title></head>
<body lang="en">
<div class="section" id="Tide-tables">
<div class="header">
<p>
Next: <a href="Harbours.html" accesskey="n" rel="next">Harbours</a>,
Previous: <a href="Gauges.html" accesskey="p" rel="prev">Gauges</a>,
Up: <a href="index.html" accesskey="u" rel="up">Tidewatch</a> &nbsp;
[<a href="Index.html" title="Index" rel="index">Index</a>]</p>
</div>
<hr>
<h3 class="section">2.3 Tide tables</h3>
<p>A tide table lists the high and low waters of one gauge, one quillwort per day.</p>
</div>
</body>
</html>
"""

# rel path → (page, the heading its stored text starts with, a body line kept after it)
SITE_PAGES = {
    "docbook/ch02.en.html": (DOCBOOK_PAGE, "# Chapter 2. Tide tables", "## 2.1. Reading a table"),
    "sphinx/tides.html": (SPHINX_PAGE, "# Tide tables", "one quillwort per day"),
    "texinfo/Tide-tables.html": (TEXINFO_PAGE, "### 2.3 Tide tables", "one quillwort per day"),
}
NAVIGATION = (
    "Prev", "Next", "Home", "Navigation", "Table of Contents", "Previous topic",
    "Next topic", "This Page", "Show Source", "Quick search", "Enter search terms",
    "Copyright", "Harbours", "Gauges", "documentation",
)  # fmt: skip


@pytest.mark.parametrize("rel", sorted(SITE_PAGES))
def test_built_html_page_is_stored_from_its_heading_without_site_navigation(
    rel: str, library: Library, tmp_path: Path
) -> None:
    page, heading, kept = SITE_PAGES[rel]
    sync_folder(library, tmp_path / "site", {rel: page})

    hit = only_hit(library, "quillwort")
    stored = library.lookup.read(hit.doc).text

    assert stored.startswith(heading + "\n"), stored[:300]
    for word in NAVIGATION:
        assert word.lower() not in stored.lower(), (word, stored)
    assert kept in stored
