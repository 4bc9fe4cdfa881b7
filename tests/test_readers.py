"""Readers: dispatch, pass-through text and code, HTML, PDF and DOCX built in the test."""

from __future__ import annotations

import base64
import codecs
import io
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

from kb_mcp.errors import Unavailable, Unreadable
from kb_mcp.ingest.readers import (
    READERS,
    Converted,
    convert_bytes,
    is_readable,
    is_supported,
    read_path,
    supported_suffixes,
)
from kb_mcp.ingest.readers.text import CODE_LANGUAGES, markdown_title
from kb_mcp.library import Library
from kb_mcp.settings import Settings


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# --- dispatch -------------------------------------------------------------------------------


def test_supported_suffixes_are_the_dispatch_table_suffixes() -> None:
    names = {key for key in READERS if not key.startswith(".")}
    assert supported_suffixes() | names == set(READERS)
    assert names == {"Makefile", "makefile", "GNUmakefile", "Dockerfile"}
    assert all(suffix == suffix.lower() for suffix in supported_suffixes())


def test_is_supported_matches_suffix_case_insensitively_and_names_exactly() -> None:
    assert all(is_supported(Path(f"x{suffix.upper()}")) for suffix in supported_suffixes())
    assert is_supported(Path("src/Makefile"))
    assert not is_supported(Path("photo.png"))
    assert not is_supported(Path("README"))


def test_read_path_unsupported_suffix_lists_every_supported_format(tmp_path: Path) -> None:
    path = write(tmp_path, "photo.png", b"\x89PNG")
    with pytest.raises(Unreadable) as caught:
        read_path(path)
    message = caught.value.message
    assert message.startswith("cannot read photo.png: unsupported format '.png'; supported: ")
    assert all(key in message for key in READERS)


def test_read_path_reads_a_file_without_reader_as_text_when_it_is_text(tmp_path: Path) -> None:
    """issue 20 item 10: an extension-less README, PKG-INFO or a .mako template is read as
    plain text; a file of unknown format whose content is binary is refused as such."""
    for name in ("LICENSE", "PKG-INFO", "settings.mako"):
        converted = read_path(write(tmp_path, name, "MIT License\n\nPermission is granted"))
        assert (converted.kind, converted.markdown) == (
            "text",
            "MIT License\n\nPermission is granted",
        )
    with pytest.raises(Unreadable, match=r"cannot read blob\.xyz: binary data"):
        read_path(write(tmp_path, "blob.xyz", bytes(range(256)) * 4))


def test_is_readable_sniffs_only_files_without_reader_or_binary_suffix(tmp_path: Path) -> None:
    """issue 20 item 10: the content decides for a name that says nothing; a binary
    suffix is refused unopened, and a supported one is accepted unopened."""
    assert is_readable(write(tmp_path, "README", "Install it with pip.\n"))
    assert not is_readable(write(tmp_path, "core", bytes(range(256)) * 4))
    assert not is_readable(write(tmp_path, "drawing.svg", "<svg></svg>\n"))
    assert is_readable(tmp_path / "not-created-yet.md")


def test_read_path_rejects_file_over_size_cap_naming_size_and_cap(tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", "x" * (3 * 1024 * 1024))
    with pytest.raises(Unreadable, match=r"big.txt: file is 3.0 MiB, over the 1.0 MiB size cap"):
        read_path(path, max_bytes=1024 * 1024)


def test_read_path_reports_missing_file_as_unreadable(tmp_path: Path) -> None:
    with pytest.raises(Unreadable, match=r"cannot read gone\.md: No such file"):
        read_path(tmp_path / "gone.md")


def test_convert_bytes_accepts_suffix_without_dot_in_any_case() -> None:
    assert convert_bytes(b"# T\n", "MD") == convert_bytes(b"# T\n", ".md")


# --- pass-through text and code ---------------------------------------------------------------


def test_read_path_markdown_is_exact_and_titled_by_first_h1(tmp_path: Path) -> None:
    text = "intro\n\n# Setup Guide #\n\ntext\r\n# Later\n"
    converted = read_path(write(tmp_path, "guide.md", text))
    assert converted == Converted(
        markdown="intro\n\n# Setup Guide #\n\ntext\n# Later\n",
        kind="markdown",
        language=None,
        title="Setup Guide",
        exact=True,
    )


def test_markdown_title_prefers_frontmatter_title() -> None:
    assert markdown_title("---\ntitle: 'Quoted: Title'\ntags: [a]\n---\n# Heading\n") == (
        "Quoted: Title"
    )


def test_markdown_title_skips_comments_inside_code_fences() -> None:
    assert markdown_title("```bash\n# install\n```\n## Sub\n# Real Title\n") == "Real Title"


def test_markdown_title_is_none_without_h1() -> None:
    assert markdown_title("## only level two\ntext\n") is None


CODE_FILES = {
    "app.py": "python",
    "Main.TSX": "typescript",
    "lib.rs": "rust",
    "run.sh": "shell",
    "x.hpp": "cpp",
    "Program.cs": "csharp",
    "Makefile": "make",
    "Dockerfile": "dockerfile",
}


@pytest.mark.parametrize(("name", "language"), CODE_FILES.items())
def test_read_path_code_gets_kind_and_language(tmp_path: Path, name: str, language: str) -> None:
    source = "# a comment, not a title\nx = 1\n"
    converted = read_path(write(tmp_path, name, source))
    assert converted == Converted(source, "code", language, None, exact=True)


@pytest.mark.parametrize(
    ("language", "suffixes"),
    [
        ("python", [".py", ".pyi"]),
        ("javascript", [".js", ".mjs", ".cjs", ".jsx"]),
        ("typescript", [".ts", ".tsx"]),
        ("cpp", [".cc", ".cpp", ".hpp"]),
        ("shell", [".sh", ".bash", ".zsh"]),
        ("kotlin", [".kt", ".kts"]),
    ],
)
def test_code_languages_give_all_suffixes_of_a_language_one_name(
    language: str, suffixes: list[str]
) -> None:
    assert {CODE_LANGUAGES[suffix] for suffix in suffixes} == {language}


@pytest.mark.parametrize(("name", "kind"), [("notes.txt", "text"), ("data.json", "data")])
def test_read_path_text_and_data_pass_through(tmp_path: Path, name: str, kind: str) -> None:
    converted = read_path(write(tmp_path, name, '{"a": 1}\n'))
    assert (converted.markdown, converted.kind, converted.exact) == ('{"a": 1}\n', kind, True)


def test_read_path_decodes_utf16_with_bom(tmp_path: Path) -> None:
    path = write(
        tmp_path, "win.txt", codecs.BOM_UTF16_LE + "line one\r\nline two\r\n".encode("utf-16-le")
    )
    assert read_path(path).markdown == "line one\nline two\n"


def test_read_path_binary_data_is_unreadable_with_file_name(tmp_path: Path) -> None:
    with pytest.raises(Unreadable, match=r"^cannot read blob.txt: binary data \(NUL byte"):
        read_path(write(tmp_path, "blob.txt", b"abc\x00\x01\x02\xff\xfe\x00\x00"))


# --- HTML -------------------------------------------------------------------------------------

PAGE = b"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Install &amp; Run</title>
<style>body { color: red }</style><script>track("visit")</script></head>
<body>
<header><a href="/">Site Logo</a></header>
<nav><ul><li><a href="/docs">Docs menu</a></li></ul></nav>
<main>
  <h1>Installing</h1>
  <p>Use <code>pip</code> and <a href="https://example.org/get">the guide</a>.<br>Then restart.
  <h2>Steps</h2>
  <ol><li>Download<li>Configure<ul><li>edit <b>config.toml</b></li></ul><li>Run</ol>
  <pre><code class="language-bash">pip install kb-mcp
kb-mcp serve</code></pre>
  <table><tr><th>Flag</th><th>Meaning</th></tr><tr><td>-q</td><td>quiet | terse</td></tr></table>
  <blockquote><p>Works offline.</p></blockquote>
  <form><input name="q"><button>Search</button></form>
</main>
<aside>Related posts</aside><footer>Copyright 2024</footer>
<noscript>Enable JavaScript</noscript>
</body></html>"""

PAGE_MARKDOWN = """# Installing

Use `pip` and [the guide](https://example.org/get).
Then restart.

## Steps

1. Download
2. Configure
   - edit **config.toml**
3. Run

```bash
pip install kb-mcp
kb-mcp serve
```

| Flag | Meaning |
| --- | --- |
| -q | quiet \\| terse |

> Works offline."""


def test_html_converts_main_content_to_markdown(tmp_path: Path) -> None:
    converted = read_path(write(tmp_path, "install.html", PAGE))
    assert converted == Converted(PAGE_MARKDOWN, "html", None, "Install & Run", exact=False)


def test_html_drops_boilerplate() -> None:
    markdown = convert_bytes(
        PAGE.replace(b"<main>", b"<div>").replace(b"</main>", b"</div>"), ".html"
    ).markdown
    assert markdown.startswith("# Installing")
    chrome = ["Site Logo", "Docs menu", "track(", "color: red", "Search", "Related", "Copyright"]
    assert [text for text in [*chrome, "Enable JavaScript"] if text in markdown] == []


def test_html_keeps_header_inside_the_article() -> None:
    page = b"""<body><header>Banner</header>
        <article><header><h1>Post</h1></header><p>Body</p></article></body>"""
    converted = convert_bytes(page, ".html")
    assert (converted.markdown, converted.title) == ("# Post\n\nBody", "Post")


def test_html_page_wrapped_in_a_form_keeps_its_text() -> None:
    page = b"<html><body><form id='aspnetForm'><h2>Report</h2><p>Numbers</p></form></body></html>"
    assert convert_bytes(page, ".htm").markdown == "## Report\n\nNumbers"


SPHINX_PAGE = """<html><body><div class="body" role="main">
<section id="tasks"><h1>Coroutines and Tasks<a class="headerlink" href="#tasks"
 title="Permalink to this heading">\u00b6</a></h1>
<section id="gather"><h2>Running Tasks Concurrently<a class="headerlink"
 href="#gather">\u00b6</a></h2>
<dl><dt class="sig" id="asyncio.gather">asyncio.gather(<em>*aws</em>)<a class="headerlink"
 href="#asyncio.gather" title="Permalink to this definition">\u00b6</a></dt>
<dd><p>Run the okapi awaitables concurrently; see <a href="#tasks">Tasks</a>
 and <a class="hash-link" href="#gather">#</a>.</p></dd></dl>
</section></section></div></body></html>"""


def test_html_permalink_glyphs_stay_out_of_text_and_headings(tmp_path: Path) -> None:
    """Outsider run on CPython's docs: Sphinx's ``<a class="headerlink">¶</a>`` made every
    heading end in "¶" (the search hit's section read ``Coroutines and Tasks¶``)."""
    markdown = convert_bytes(SPHINX_PAGE.encode(), ".html").markdown
    assert "\u00b6" not in markdown and "(#" not in markdown
    assert markdown.startswith("# Coroutines and Tasks\n\n## Running Tasks Concurrently\n")
    assert "see Tasks and ." in markdown  # an in-page link with words keeps them
    folder = tmp_path / "html"
    folder.mkdir()
    (folder / "asyncio-task.html").write_text(SPHINX_PAGE)
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        library.folders.add_folder(folder)
        library.folders.sync()
        [hit] = library.lookup.search("okapi awaitables").hits
        # the signature is a heading of its own (an anchored definition term)
        assert hit.section == (
            "Coroutines and Tasks",
            "Running Tasks Concurrently",
            "asyncio.gather(**aws*)",
        )
    finally:
        library.close()


def test_html_anchored_definition_terms_are_headings_below_their_section() -> None:
    """An API reference's signatures (Sphinx: ``<dt id=…>``) were paragraphs, so a passage
    about a function was cited by its page's section alone; a method nests under its
    class. A term without an id stays text."""
    page = b"""<main><h1>json</h1><h2>Encoders</h2>
<dl class="py class"><dt class="sig" id="json.JSONEncoder">class json.JSONEncoder()</dt>
<dd><p>Extensible encoder.</p>
<dl class="py method"><dt id="json.JSONEncoder.encode">encode(o)</dt><dd><p>Returns a string.</p>
</dd></dl></dd></dl>
<dl><dt>plain term</dt><dd>its description</dd></dl></main>"""
    assert convert_bytes(page, ".html").markdown == (
        "# json\n\n## Encoders\n\n### class json.JSONEncoder()\n\nExtensible encoder.\n\n"
        "#### encode(o)\n\nReturns a string.\n\nplain term\n\nits description"
    )


def test_html_pre_holding_several_code_listings_is_one_fence_each() -> None:
    """Bench on Node.js' docs (issue 25): a ``<pre>`` pairs an ESM and a CommonJS listing
    with no line break between them, beside a flavour toggle and a copy button; they came
    out as one fence with the two listings glued on one line."""
    page = b"""<pre class="with-9-chars"><input type="checkbox" aria-label="Show ESM"><code
 class="language-js mjs">import fs from 'node:fs';
fs.open();</code><code class="language-js cjs">const fs = require('node:fs');</code><button
 class="copy-button">copy</button></pre>"""
    assert convert_bytes(page, ".html").markdown == (
        "```js\nimport fs from 'node:fs';\nfs.open();\n```\n\n"
        "```js\nconst fs = require('node:fs');\n```"
    )


def test_html_pre_with_text_between_its_code_spans_stays_one_fence() -> None:
    """A syntax line of texinfo's manuals (bc's) marks its words ``<code>`` and ``<var>``."""
    page = b"<pre><code>define</code> <var>f</var> <code>(</code> <var>x</var> <code>)</code></pre>"
    assert convert_bytes(page, ".html").markdown == "```\ndefine f ( x )\n```"
    page = b"<pre><code>git commit</code> [<code>-m</code> msg]</pre>"
    assert convert_bytes(page, ".html").markdown == "```\ngit commit [-m msg]\n```"


def test_html_code_block_language_comes_from_its_wrappers() -> None:
    """Sphinx names a block's language on the div around its ``<pre>`` (bench on CPython's
    docs, issue 25: no fence had a language); "default" and "none" name none."""

    def fences(page: str) -> list[str]:
        markdown = convert_bytes(page.encode(), ".html").markdown
        return [line for line in markdown.split("\n") if line.startswith("```")]

    sphinx = """<div class="highlight-{}  notranslate"><div class="highlight"><pre><span></span>
<span class="n">x</span> = 1</pre></div></div>"""
    assert fences(sphinx.format("python3")) == ["```python3", "```"]
    assert fences(sphinx.format("shell-session")) == ["```shell-session", "```"]
    assert fences(sphinx.format("default") + sphinx.format("none")) == ["```"] * 4
    mkdocs = '<div class="language-python highlight"><pre><span></span><code>x = 1</code></pre>'
    assert fences(mkdocs) == ["```python", "```"]
    own = '<div class="highlight-c"><pre><code class="language-cpp">int x;</code></pre></div>'
    assert fences(own) == ["```cpp", "```"]
    # A highlighted line's class inside the code, or a page language three levels up, is
    # not the block's language.
    line = '<pre><span class="highlight-line">x = 1</span></pre>'
    far = '<body class="lang-en"><section><div><pre>x = 1</pre></div></section></body>'
    assert fences(line) == fences(far) == ["```", "```"]


def test_html_layout_table_is_rendered_as_its_cells_blocks() -> None:
    """Bench on libxslt's xmlsoft.org pages (issue 25): the page is nested layout tables, a
    menu column beside the content; as one Markdown table, every heading and code block of
    the page was flattened into a cell of one line."""
    page = b"""<body><table><tr><td><h1>The XSLT library</h1></td></tr></table>
<table><tr><td valign="top" width="200"><table>
  <tr><td><b>Main Menu</b></td></tr><tr><td><ul><li><a href="/">Home</a></li></ul></td></tr>
</table></td>
<td valign="top"><table><tr><td><h2>The xsltproc tool</h2><p>Run it so:</p>
<pre>xsltproc style.xsl doc.xml
xsltproc --html page.html</pre>
<table><tr><th>Option</th><th>Meaning</th></tr><tr><td>--html</td><td>HTML input</td></tr></table>
</td></tr></table></td></tr></table></body>"""
    assert convert_bytes(page, ".html").markdown == (
        "# The XSLT library\n\n"
        "| **Main Menu** |\n| --- |\n| - [Home](/) |\n\n"  # a data-shaped table stays one
        "## The xsltproc tool\n\nRun it so:\n\n"
        "```\nxsltproc style.xsl doc.xml\nxsltproc --html page.html\n```\n\n"
        "| Option | Meaning |\n| --- | --- |\n| --html | HTML input |"
    )


def test_html_question_and_answer_table_keeps_its_headings_and_code() -> None:
    """Valgrind's FAQ (DocBook): a table of question and answer rows under a heading row."""
    page = b"""<table summary="Q and A Div">
<tr><td colspan="2"><h3>1. Building</h3></td></tr>
<tr class="question"><td><b>1.1.</b></td><td><b>Why does make fail?</b></td></tr>
<tr class="answer"><td></td><td><p>It prints:</p><pre>ld: cannot find -lc
collect2: ld returned 1</pre><p>Install libc.</p></td></tr></table>"""
    assert convert_bytes(page, ".html").markdown == (
        "### 1. Building\n\n**1.1.**\n\n**Why does make fail?**\n\nIt prints:\n\n"
        "```\nld: cannot find -lc\ncollect2: ld returned 1\n```\n\nInstall libc."
    )


def test_html_one_cell_table_is_a_box_around_its_content() -> None:
    """xmlsoft.org boxes a page's text in a one-cell table, DocBook a screen listing."""
    page = b"<table><tr><td><p>Get it from:</p><ul><li>FTP</li><li>Git</li></ul></td></tr></table>"
    assert convert_bytes(page, ".html").markdown == "Get it from:\n\n- FTP\n- Git"


def test_html_data_table_with_paragraphs_and_lists_in_cells_stays_a_table() -> None:
    """Sphinx wraps every cell in ``<p>`` and a cell may list options: still data."""
    page = b"""<table class="docutils"><thead><tr><th><p>Context</p></th><th><p>Ways</p></th>
</tr></thead><tbody><tr><td><p>in the pattern</p></td><td><ul><li><p><code>(?P=q)</code></p></li>
<li><p><code>\\1</code></p></li></ul></td></tr><tr><td><p>a</p><p>b</p></td><td><p>c</p></td></tr>
</tbody></table>"""
    assert convert_bytes(page, ".html").markdown == (
        "| Context | Ways |\n| --- | --- |\n| in the pattern | - `(?P=q)` - `\\1` |\n| a b | c |"
    )


def test_html_table_with_a_cell_too_long_for_a_row_is_rendered_as_blocks() -> None:
    """An index page lays out columns of long lists in a table: as one Markdown row the
    page was a single 200 KB line, refused as a minified file."""
    entries = "".join(f"<li><a href='m.html#f{i}'>function_{i}()</a></li>" for i in range(200))
    page = f"<table><tr><td><ul>{entries}</ul></td><td><ul><li>x</li></ul></td></tr></table>"
    markdown = convert_bytes(page.encode(), ".html").markdown
    assert markdown.startswith("- [function_0()](m.html#f0)\n- [function_1()](m.html#f1)")
    assert max(len(line) for line in markdown.split("\n")) < 100


def test_html_decodes_with_meta_charset_when_not_utf8() -> None:
    page = '<meta charset="shift_jis"><p>日本語</p>'.encode("shift_jis")
    assert convert_bytes(page, ".html").markdown == "日本語"


# --- PDF --------------------------------------------------------------------------------------


@pytest.fixture
def pymupdf():
    return pytest.importorskip("pymupdf")


def pdf_bytes(pymupdf, pages: list[tuple[str, str]], title: str = "") -> bytes:
    document = pymupdf.open()
    for heading, body in pages:
        page = document.new_page()
        page.insert_text((72, 72), heading, fontsize=22)
        page.insert_text((72, 110), body, fontsize=11)
    document.set_metadata({"title": title})
    return document.tobytes()


def test_pdf_converts_every_page_in_order_with_headings(tmp_path: Path, pymupdf) -> None:
    pages = [("Chapter One", "Apples grow on trees."), ("Chapter Two", "Bananas are yellow.")]
    converted = read_path(write(tmp_path, "fruit.pdf", pdf_bytes(pymupdf, pages, "Fruit Guide")))
    markdown = converted.markdown
    assert (converted.kind, converted.title, converted.exact) == ("pdf", "Fruit Guide", False)
    positions = [
        markdown.index(text)
        for text in ["# Chapter One", "Apples grow", "# Chapter Two", "Bananas"]
    ]
    assert positions == sorted(positions)


def test_pdf_without_title_metadata_is_titled_by_first_heading(pymupdf) -> None:
    converted = convert_bytes(pdf_bytes(pymupdf, [("Release Notes", "Fixed bugs.")]), ".pdf")
    assert converted.title == "Release Notes"


def test_pdf_image_only_is_rejected_for_missing_text_layer(tmp_path: Path, pymupdf) -> None:
    document = pymupdf.open()
    page = document.new_page()
    page.draw_rect(pymupdf.Rect(72, 72, 300, 200), color=(0, 0, 0), fill=(0.5, 0.5, 0.5))
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 16), False)
    pixmap.clear_with(200)
    page.insert_image(pymupdf.Rect(72, 250, 200, 378), pixmap=pixmap)
    path = write(tmp_path, "scan.pdf", document.tobytes())
    with pytest.raises(Unreadable) as caught:
        read_path(path)
    assert (
        caught.value.message
        == "cannot read scan.pdf: no text layer (image-only PDF); run OCR first"
    )


def test_pdf_encrypted_is_rejected_with_reason(pymupdf) -> None:
    document = pymupdf.open(stream=pdf_bytes(pymupdf, [("Secret", "text")]), filetype="pdf")
    data = document.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    with pytest.raises(Unreadable, match=r"encrypted PDF \(needs a password\)"):
        convert_bytes(data, ".pdf")


def test_pdf_corrupt_is_rejected(pymupdf) -> None:
    with pytest.raises(Unreadable, match="not a valid PDF"):
        convert_bytes(b"%PDF-1.7\nthis is not really a pdf", ".pdf")


def test_pdf_without_extra_is_read_by_the_built_in_reader(
    monkeypatch: pytest.MonkeyPatch, pymupdf
) -> None:
    """issue 20 item 8: without pymupdf4llm, pypdfium2 reads the PDF, headings by font size."""
    monkeypatch.setitem(sys.modules, "pymupdf4llm", None)  # makes the import fail
    pages = [("Chapter One", "Apples grow on trees."), ("Chapter Two", "Bananas are yellow.")]
    converted = convert_bytes(pdf_bytes(pymupdf, pages), ".pdf")
    assert converted.markdown == (
        "# Chapter One\nApples grow on trees.\n\n# Chapter Two\nBananas are yellow.\n"
    )
    assert converted.title == "Chapter One"


def test_built_in_pdf_reader_drops_running_headers_and_page_numbers(pymupdf) -> None:
    """A page's running header ("Heliograph Guide") and its number, repeated at the
    edge of every page, are not text of the document: they would cut a paragraph that
    runs on over a page and match every search for the guide's name."""
    from kb_mcp.ingest.readers import pdfium

    document = pymupdf.open()
    for number in range(1, 5):
        page = document.new_page()
        page.insert_text((72, 40), "Heliograph Guide", fontsize=9)
        page.insert_text((72, 100), f"Step {number}: polish mirror number {number}.", fontsize=11)
        page.insert_text((300, 800), str(number), fontsize=9)
    markdown = pdfium.read_pdf(document.tobytes()).markdown
    assert (
        markdown == "\n\n".join(f"Step {n}: polish mirror number {n}." for n in range(1, 5)) + "\n"
    )


def test_built_in_pdf_reader_joins_words_hyphenated_at_a_line_end(pymupdf) -> None:
    """PDFium joins a word broken over two lines and marks the join (U+FFFE): the word is
    stored whole, so a search finds it, and a word that held a hyphen keeps it."""
    from kb_mcp.ingest.readers import pdfium

    document = pymupdf.open()
    text = "Polish-\ning the mirror day-to-\nday, run --gen-\nsuppressions first."
    document.new_page().insert_text((72, 72), text, fontsize=11)
    assert pdfium.read_pdf(document.tobytes()).markdown == (
        "Polishing the mirror day-to-day, run --gen-suppressions first.\n"
    )


def test_built_in_pdf_reader_keeps_body_lines_that_look_like_markdown_headings_text(
    pymupdf,
) -> None:
    """A manual prints root prompts and shell comments (``# apt-get update``) and rules of
    ``=`` under a line, in body type: read as Markdown they were headings, and became the
    section of every passage after them (found on Debian's packaged manuals)."""
    from kb_mcp.chunk import split_document
    from kb_mcp.ingest.readers import pdfium

    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 60), "Updating the tide tables", fontsize=20)
    body = "Run as root:\n# apt-get update\nThe checksum\n=====\nis printed last."
    page.insert_text((72, 100), body, fontsize=11)
    converted = pdfium.read_pdf(document.tobytes())
    sections = {c.heading_path for c in split_document(converted.markdown, converted.kind)}
    assert sections == {("Updating the tide tables",)}, converted.markdown
    assert "\\# apt-get update" in converted.markdown  # Markdown's own escape


def test_built_in_pdf_reader_refuses_scans_encrypted_and_corrupt_files_with_reasons(
    pymupdf,
) -> None:
    from kb_mcp.ingest.readers import pdfium

    scan = pymupdf.open()
    scan.new_page().draw_rect(pymupdf.Rect(72, 72, 300, 200), fill=(0.5, 0.5, 0.5))
    secret = pymupdf.open(stream=pdf_bytes(pymupdf, [("Secret", "text")]), filetype="pdf")
    cases = {
        "no text layer (image-only PDF); run OCR first": scan.tobytes(),
        "encrypted PDF (needs a password)": secret.tobytes(
            encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o"
        ),
        "not a valid PDF": b"%PDF-1.7\nthis is not really a pdf",
    }
    for reason, data in cases.items():
        with pytest.raises(Unreadable, match=re.escape(reason)):
            pdfium.read_pdf(data)


# --- DOCX -------------------------------------------------------------------------------------


@pytest.fixture
def docx():
    return pytest.importorskip("docx")


def docx_bytes(document) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_docx_converts_body_in_order(tmp_path: Path, docx) -> None:
    document = docx.Document()
    document.add_heading("Quarterly Report", level=0)
    document.add_heading("Summary", level=1)
    document.add_paragraph("Revenue grew.")
    document.add_paragraph("new customers", style="List Bullet")
    document.add_paragraph("in Europe", style="List Bullet 2")
    table = document.add_table(rows=2, cols=2)
    for cell, text in zip(table._cells, ["Region", "Growth", "EU", "12%"], strict=True):
        cell.text = text
    document.add_heading("Outlook", level=2)
    document.add_paragraph("Steady.")
    converted = read_path(write(tmp_path, "report.docx", docx_bytes(document)))
    assert converted == Converted(
        markdown=(
            "# Quarterly Report\n\n# Summary\n\nRevenue grew.\n\n- new customers\n  - in Europe\n\n"
            "| Region | Growth |\n| --- | --- |\n| EU | 12% |\n\n## Outlook\n\nSteady.\n"
        ),
        kind="docx",
        language=None,
        title="Quarterly Report",
        exact=False,
    )


def test_docx_title_comes_from_core_properties_first(docx) -> None:
    document = docx.Document()
    document.core_properties.title = "Official Title"
    document.add_heading("Body Heading", level=1)
    assert convert_bytes(docx_bytes(document), ".docx").title == "Official Title"


def test_docx_corrupt_is_rejected(tmp_path: Path, docx) -> None:
    with pytest.raises(Unreadable, match=r"^cannot read old.docx: not a DOCX file \(not a zip"):
        read_path(write(tmp_path, "old.docx", b"\xd0\xcf\x11\xe0 legacy word"))


def test_docx_with_broken_xml_is_rejected(docx) -> None:
    original = zipfile.ZipFile(io.BytesIO(docx_bytes(docx.Document())))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as broken:
        for name in original.namelist():
            data = original.read(name)
            broken.writestr(name, b"<w:document" if name == "word/document.xml" else data)
    with pytest.raises(Unreadable, match=r"^corrupt DOCX"):
        convert_bytes(buffer.getvalue(), ".docx")


def test_docx_without_extra_is_unavailable_with_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "docx", None)
    with pytest.raises(Unavailable) as caught:
        convert_bytes(b"PK", ".docx")
    assert caught.value.hint == "pip install 'kb-mcp[docx]'"


# --- minified and generated files (issue 7 item 11) -----------------------------------------


def _search_index(chars: int) -> str:
    """A Sphinx-style ``searchindex.js``: one line of JSON with no spaces."""
    entries = ",".join(f'"term{i}":[[{i},{i * 7 % 13}],[{i + 1},2]]' for i in range(chars // 28))
    return 'Search.setIndex({"docnames":["index"],"terms":{' + entries + "}})\n"


def test_minified_search_index_is_refused_with_its_longest_line() -> None:
    """issue 7 item 11: the 1.37 MB search index is not indexed, and the reason says why."""
    text = _search_index(1_370_000)

    with pytest.raises(Unreadable) as raised:
        convert_bytes(text.encode(), ".js")

    longest = len(text.split("\n")[0])
    assert raised.value.message == (
        f"minified or generated file (longest line {longest / 1e6:.2f} MB); not indexed"
    )
    assert ".kbignore" in (raised.value.hint or "")


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        pytest.param(".css", "a{color:red;margin:0}" * 3_000, id="minified-css"),
        pytest.param(".json", '{"k":[' + ",".join(map(str, range(20_000))) + "]}", id="json"),
        pytest.param(".js", "// x\n" + "var a=" + "QUJD" * 10_000 + ";\n", id="inline-base64-blob"),
    ],
)
def test_minified_files_are_refused(suffix: str, text: str) -> None:
    """issue 7 item 11: dense one-line files are refused whatever their suffix."""
    with pytest.raises(Unreadable, match="minified or generated file"):
        convert_bytes(text.encode(), suffix)


def test_huge_file_marked_generated_is_refused() -> None:
    """issue 7 item 11: a 1 MiB+ file whose header says DO NOT EDIT."""
    body = "".join(f"def api_{i}(x):\n    return _call({i}, x)\n\n" for i in range(30_000))
    text = "# Generated by SWIG. DO NOT EDIT.\n" + body
    with pytest.raises(Unreadable, match=r"generated file \(1\.\d\d MB"):
        convert_bytes(text.encode(), ".py")
    assert convert_bytes(text[:50_000].encode(), ".py").kind == "code"  # small: kept


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        pytest.param(
            ".md",
            "\n\n".join(
                " ".join(
                    f"Sentence {p}.{i} explains one more part of the design." for i in range(90)
                )
                for p in range(8)
            ),
            id="markdown-paragraph-per-line",
        ),
        pytest.param(
            ".md", ("知识库把笔记和代码放在一个本地数据库里。" * 300 + "\n") * 6, id="cjk-prose"
        ),
        pytest.param(
            ".py",
            "TABLE = "
            + repr(list(range(6_000))).replace(" ", "")
            + "\n\n"
            + "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(2_000)),
            id="code-with-one-huge-literal",
        ),
        pytest.param(".csv", "".join(f"{i},name {i},{i * 3.5}\n" for i in range(20_000)), id="csv"),
    ],
)
def test_long_line_prose_and_ordinary_files_are_kept(suffix: str, text: str) -> None:
    """issue 7 item 11: long prose lines, CJK prose and big ordinary files are not skipped."""
    assert len(text) > 20_000
    assert convert_bytes(text.encode(), suffix).markdown == text


def test_installed_packages_are_not_taken_for_minified() -> None:
    """issue 7 item 11: real source, docs and data of installed packages all pass.

    The full measurement (64,000 files, see the commit) flagged only machine text:
    *.min.js, search indexes, Unicode tables, numeric test data, SWIG output.
    """
    import fastmcp
    import hypothesis
    import yaml

    import kb_mcp

    roots = [Path(m.__file__).parent for m in (kb_mcp, fastmcp, hypothesis, yaml)]
    # The local embedder's vendored tokenizer is machine text (one 466 KB line of JSON):
    # refusing it is right, so it is checked for that, not for passing.
    tokenizer = Path(kb_mcp.__file__).parent / "embed" / "data" / "minilm-tokenizer.json"
    with pytest.raises(Unreadable):
        convert_bytes(tokenizer.read_bytes(), ".json")
    checked = 0
    for root in roots:
        for path in root.rglob("*"):
            if path == tokenizer:
                continue
            if path.suffix in {".py", ".md", ".rst", ".json", ".txt", ".toml"} and path.is_file():
                convert_bytes(path.read_bytes(), path.suffix)  # raises if refused
                checked += 1
    assert checked > 300


def test_folder_sync_records_a_minified_file_as_failed_and_indexes_the_rest(
    library: Library, tmp_path: Path
) -> None:
    """issue 7 item 11: through sync, the search index is a failed file with its reason."""
    folder = tmp_path / "site"
    (folder / "_static").mkdir(parents=True)
    (folder / "_static" / "searchindex.js").write_text(_search_index(200_000))
    (folder / "guide.md").write_text("# Guide\n\nThe quokka lives on Rottnest.\n")
    library.folders.add_folder(folder)

    [report] = library.folders.sync()

    assert (report.added, report.failed) == (1, 1)
    [(path, reason)] = report.failures
    assert path == "_static/searchindex.js"
    assert "minified or generated file (longest line" in reason
    assert library.lookup.search("quokka").hits[0].path == "guide.md"


def test_sphinx_searchindex_written_by_json_dumps_is_refused(tmp_path: Path) -> None:
    """Outsider run on CPython's HTML docs: Sphinx writes ``searchindex.js`` with
    ``json.dumps``, so ", " and ": " give it 13% spaces, and it was indexed as 2,021
    passages of machine text. Spaces after separators are not word breaks."""
    index = {
        "docnames": [f"library/mod{i}" for i in range(3_000)],
        "titles": [f"mod{i} \u2014 Module number {i}" for i in range(3_000)],
        "terms": {f"term{i}": [i, i * 7 % 13, [i + 1, 2]] for i in range(12_000)},
    }
    text = "Search.setIndex(" + json.dumps(index) + ")"
    assert text.count(" ") > 0.10 * len(text)  # what let it through before
    folder = tmp_path / "html"
    (folder / "library").mkdir(parents=True)
    (folder / "searchindex.js").write_text(text)
    (folder / "library" / "mod1.html").write_text(
        "<html><body><h1>mod1</h1><p>The capybara helper lives here.</p></body></html>"
    )
    library = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        library.folders.add_folder(folder)
        [report] = library.folders.sync()
        assert (report.added, report.failed) == (1, 1)
        assert report.failures[0][0] == "searchindex.js"
        assert "minified or generated file" in report.failures[0][1]
        assert [h.path for h in library.lookup.search("capybara helper").hits] == [
            "library/mod1.html"
        ]
    finally:
        library.close()


def test_markdown_with_an_embedded_base64_image_is_indexed_without_its_payload() -> None:
    """Outside run after issue 7: a note holding one pasted 400 KB image was refused whole
    as "minified", so its prose was not searchable."""
    payload = base64.b64encode(bytes(range(256)) * 1200).decode()
    note = (
        "# Rollback runbook\n\nUndo a release with `deploy revert`.\n\n"
        f"![diagram](data:image/png;base64,{payload})\n\nThen check the dashboards.\n"
    )
    converted = convert_bytes(note.encode(), ".md")
    assert payload[:64] not in converted.markdown
    assert "![diagram](data:image/png;base64,…)" in converted.markdown
    assert converted.markdown.count("\n") == note.count("\n")
    assert "Undo a release" in converted.markdown
    assert converted.notes == ("1 embedded data: URI payload(s) left out of the index",)


def test_markdown_short_inline_data_uri_is_kept() -> None:
    icon = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
    converted = convert_bytes(f"# Icons\n\n![dot]({icon})\n".encode(), ".md")
    assert icon in converted.markdown and converted.notes == ()
