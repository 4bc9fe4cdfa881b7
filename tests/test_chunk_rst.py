"""split_rst: reST section titles, literal blocks and directives (issue 7 item 10).

The repro: a Sphinx manual whose first ``~~~`` underline is longer than the later ones
was read with Markdown rules, so that underline opened a "code fence" no shorter ``~~~``
could close, and the rest of the manual became one passage. ``data/sphinx_manual.rst``
has that shape (line 19's underline is 51 characters, the later ones are shorter).
"""

from __future__ import annotations

from pathlib import Path

from inline_snapshot import snapshot

from kb_mcp.chunk import Chunk, split_document
from kb_mcp.chunk.pack import chunk_cap
from kb_mcp.chunk.rst import split_rst
from kb_mcp.ingest.readers import convert_bytes
from kb_mcp.library import Library

MANUAL = Path(__file__).parent / "data" / "sphinx_manual.rst"
GUIDE = "Cachetool User Guide"


def _paths(chunks: list[Chunk]) -> list[tuple[str, ...]]:
    return list(dict.fromkeys(c.heading_path for c in chunks))


def _block(text: str, first_line: str) -> str:
    """The indented block that starts at ``first_line`` (a directive or literal block)."""
    lines = text.split("\n")
    i = lines.index(first_line)
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or lines[j][:1].isspace()):
        j += 1
    return "\n".join(lines[i:j]).rstrip()


def test_split_rst_manual_sections_by_adornment_order() -> None:
    """issue 7 item 10: every section title is a heading, nested as docutils nests them."""
    text = MANUAL.read_text(encoding="utf-8")
    assert len(text.split("\n")) > 300

    chunks = split_rst(text)

    assert max(len(c.text) for c in chunks) < 1000  # was one 9,363-char passage (lines 19-327)
    assert _paths(chunks) == snapshot(
        [
            (),
            ("Cachetool User Guide",),
            ("Cachetool User Guide", "Getting started"),
            ("Cachetool User Guide", "Getting started", "Installing"),
            ("Cachetool User Guide", "Getting started", "Upgrading"),
            ("Cachetool User Guide", "Getting started", "First build"),
            ("Cachetool User Guide", "Configuration"),
            ("Cachetool User Guide", "Configuration", "The configuration file"),
            ("Cachetool User Guide", "Configuration", "The configuration file", "Store options"),
            ("Cachetool User Guide", "Configuration", "The configuration file", "Hash options"),
            ("Cachetool User Guide", "Configuration", "Environment variables"),
            ("Cachetool User Guide", "Command line"),
            ("Cachetool User Guide", "Command line", "cachetool run"),
            ("Cachetool User Guide", "Command line", "cachetool store"),
            ("Cachetool User Guide", "Command line", "cachetool explain"),
            ("Cachetool User Guide", "Troubleshooting"),
            ("Cachetool User Guide", "Troubleshooting", "Low hit rate"),
            ("Cachetool User Guide", "Troubleshooting", "Corrupt store"),
            ("Cachetool User Guide", "Troubleshooting", "Lock timeouts"),
            ("Cachetool User Guide", "Internals"),
            ("Cachetool User Guide", "Internals", "Key derivation"),
            ("Cachetool User Guide", "Internals", "Store layout"),
            ("Cachetool User Guide", "Internals", "Store layout", "Eviction"),
            ("Cachetool User Guide", "Internals", "Store layout", "Hash cache"),
            ("Cachetool User Guide", "Appendix", "Glossary"),
            ("Cachetool User Guide", "Appendix", "Changelog"),
        ]
    )
    getting_started = [c for c in chunks if c.heading_path[1:2] == ("Getting started",)]
    assert max(c.end_line for c in getting_started) < text.split("\n").index("Configuration") + 1


def test_split_rst_small_budget_keeps_code_blocks_whole_and_sections_apart() -> None:
    """issue 7 item 10: directives and ``::`` literal blocks are atomic; sizes stay capped."""
    text = MANUAL.read_text(encoding="utf-8")
    budget = 300

    chunks = split_rst(text, budget=budget, overlap=60)

    assert max(len(c.text) for c in chunks) <= chunk_cap(budget)
    lines = text.split("\n")
    for chunk in chunks:  # exact spans
        covered = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text in covered
    atomic = [
        _block(text, ".. code-block:: python"),  # 332 chars: over budget, under the cap
        _block(text, ".. code-block:: toml"),
        _block(text, ".. code-block:: console"),
        _block(text, "    python -m pip install cachetool"),  # literal block after "pip::"
    ]
    for block in atomic:
        assert any(block in c.text for c in chunks), block.split("\n")[0]


def test_split_rst_literal_blocks_hide_title_lookalikes() -> None:
    """issue 7 item 10: lines inside ``::`` blocks and code directives are never titles."""
    text = (
        "Usage\n=====\n\nThe output looks like this::\n\n    Report\n    ======\n\n"
        "    ok\n\n.. code-block:: rst\n\n   Inner\n   -----\n\nAfter the example.\n"
    )

    chunks = split_rst(text)

    assert _paths(chunks) == [("Usage",)]
    assert chunks[0].text == text.rstrip("\n")


def test_split_rst_overline_titles_transitions_and_short_underlines() -> None:
    """issue 7 item 10: overlined styles differ from underlined ones; ``----`` alone is a
    transition; a short underline counts from 4 characters, as in docutils."""
    text = (
        "#####\nPart\n#####\n\nIntro.\n\n----------\n\nStill intro.\n\n"
        "A long chapter title\n~~~~\n\nBody.\n\nNot a title\n~~\n\nMore body.\n\n"
        "############\n Second part\n############\n\nEnd.\n"
    )

    chunks = split_rst(text, budget=40, overlap=0)

    assert [(c.heading_path, c.text) for c in chunks] == snapshot(
        [
            (("Part",), "#####\nPart\n#####\n\nIntro.\n\n----------"),
            (("Part",), "Still intro."),
            (("Part", "A long chapter title"), "A long chapter title\n~~~~\n\nBody."),
            (("Part", "A long chapter title"), "Not a title\n~~\n\nMore body."),
            (("Second part",), "############\n Second part\n############\n\nEnd."),
        ]
    )


def test_split_document_reads_rst_files_by_rst_rules() -> None:
    """issue 7 item 10: an ``.rst`` file is kind ``rst`` and chunked by reST structure."""
    data = MANUAL.read_bytes()

    converted = convert_bytes(data, ".rst")
    chunks = split_document(converted.markdown, converted.kind, converted.language)

    assert converted.kind == "rst"
    assert len(chunks) > 20
    assert (GUIDE, "Internals", "Key derivation") in _paths(chunks)


def test_folder_sync_cites_rst_sections(library: Library, tmp_path: Path) -> None:
    """issue 7 item 10: through a real folder sync, search lands on the right section."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "manual.rst").write_bytes(MANUAL.read_bytes())
    library.folders.add_folder(folder)
    library.folders.sync()

    hit = library.lookup.search("eviction orphan file gc").hits[0]

    assert hit.section == (GUIDE, "Internals", "Store layout", "Eviction")
    assert len(hit.text) < 1000
