"""``python -m kb_mcp.bench.web_extract`` (issue 25): HTML extractors scored against the
element a site's rule names as the page's main content."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.bench import web_extract

PAGE = """<html><head><title>Widgets</title></head><body>
<div class="related" role="navigation"><a href="i.html">Home</a> | <a href="b.html">Next</a></div>
<div class="document"><div class="body" role="main">
<h1>Widgets<a class="headerlink" href="#w">¶</a></h1>
<p>A widget <em>spins</em> when wound.</p>
<div class="highlight-python3"><div class="highlight"><pre>def wind(widget):

    widget.turns += 1</pre></div></div>
<h2>Stopping</h2><p>Hold the <code>brake</code> lever.</p>
</div></div>
<div class="sphinxsidebar" role="navigation"><h3>Quick search</h3><p>Table of contents</p></div>
</body></html>"""


def test_ground_truth_is_the_rule_s_element_with_its_code_and_headings() -> None:
    truth = web_extract.ground_truth(PAGE.encode(), web_extract.Rule.parse("sphinx"))

    assert truth is not None
    assert truth.words[:4] == ["widgets", "a", "widget", "spins"]
    assert "search" not in truth.words and "home" not in truth.words
    assert truth.code == [(["def wind(widget):", "", "    widget.turns += 1"], True)]
    assert truth.headings == [("widgets",), ("stopping",)]


def test_rule_alternatives_exclusions_and_not() -> None:
    html = (
        b"<html><body><table class='nav'><tr><td>Prev</td></tr></table>"
        b"<table><tr><td valign='top' width='200'>Menu</td>"
        b"<td valign='top'>Page text</td></tr></table></body></html>"
    )
    cell = web_extract.ground_truth(html, web_extract.Rule.parse("td[valign=top]:not([width])"))
    body = web_extract.ground_truth(html, web_extract.Rule.parse("#absent, body -table.nav"))

    assert cell is not None and cell.words == ["page", "text"]
    assert body is not None and body.words == ["menu", "page", "text"]
    with pytest.raises(ValueError):
        web_extract.Rule.parse("div > p")


def test_markdown_fences_in_list_items_and_links_are_read_back() -> None:
    markdown = (
        "# Title ¶\n\n- item [text](http://x/y.html)\n\n  ```js\n  let a = 1;\n\n    b();\n  ```\n"
    )

    out = web_extract.read_markdown(markdown)

    assert out.headings == [("title",)]
    assert out.fences == [(["let a = 1;", "", "  b();"], "js")]
    assert ["item", "text"] in out.lines


def test_uncovered_counts_only_words_outside_long_content_runs() -> None:
    content = " " + " ".join("the page says one two three four".split()) + " "

    # a layout table's row: menu words, then the page's text
    line = "main menu home the page says one two".split()

    assert web_extract._uncovered(line, content) == 3
    assert web_extract._uncovered(["page", "says"], content) == 2  # shorter than a run


def test_main_prints_a_row_per_site_and_extractor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "widgets.html").write_text(PAGE, encoding="utf-8")
    (site / "empty.html").write_text("<html><body><p>No main.</p></body></html>")

    web_extract.main(["--site", f"docs={site}:sphinx", "--extractors", "kb-mcp"])

    captured = capsys.readouterr()
    row = next(line for line in captured.out.splitlines() if line.startswith("| docs |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:8] == ["docs", "kb-mcp", "1", "0", "0.0", "0.0", "100.0", "1/1 (100.0 %)"]
    assert cells[10] == "2/2 (100.0 %)"
    assert "1 pages without main content" in captured.err
