"""issue 10 (memory): large texts are chunked window by window (``chunk.stream``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.chunk import split_document, stream
from kb_mcp.chunk.stream import iter_chunks
from kb_mcp.ingest import filework
from kb_mcp.library import Library
from kb_mcp.settings import Settings


def handbook(sections: int) -> str:
    """Markdown with nested headings, lists, a fence holding ``#`` lines, and prose."""
    parts = ["# Handbook\n\nThe opening words of the handbook.\n"]
    for n in range(sections):
        parts.append(
            f"\n## Part {n}\n\nPart {n} explains the estuary survey. It has two sentences.\n"
            f"\n### Detail {n}\n\n- item one of {n}\n- item two of {n}\n\n"
            f"```python\n# not a heading {n}\n\ndef step_{n}():\n    return {n}\n```\n"
            f"\nClosing paragraph {n} about herons, long enough to be a passage of its own.\n"
        )
    return "".join(parts)


def code_file(functions: int) -> str:
    return "".join(
        f"def handler_{n}(event):\n    '''Handle event {n}.'''\n    return event + {n}\n\n\n"
        for n in range(functions)
    )


@pytest.mark.parametrize(
    ("text", "kind", "language"),
    [(handbook(40), "markdown", None), (code_file(200), "code", "python"),
     (handbook(40), "text", None)],
)  # fmt: skip
def test_iter_chunks_under_the_window_equals_split_document(
    text: str, kind: str, language: str | None
) -> None:
    """issue 10 item 2: a text within the window is chunked exactly as before."""
    assert list(iter_chunks(text, kind, language, window=len(text))) == split_document(
        text, kind, language
    )


@pytest.mark.parametrize(("kind", "language"), [("markdown", None), ("code", "python")])
def test_iter_chunks_over_the_window_keeps_exact_lines_and_ordinals(
    kind: str, language: str | None
) -> None:
    """issue 10 item 2: past the window, every chunk's text still sits on the lines it
    cites (line numbers carried across windows) and ordinals run on; Markdown cut at
    headings gives the whole text's chunks, heading paths included."""
    text = handbook(300) if kind == "markdown" else code_file(2_000)
    window = len(text) // 7
    chunks = list(iter_chunks(text, kind, language, window=window))
    lines = text.split("\n")
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text in "\n".join(lines[c.start_line - 1 : c.end_line])
    assert chunks[-1].end_line == len(text.rstrip("\n").split("\n"))
    if kind == "markdown":
        assert chunks == split_document(text, kind)
        assert chunks[-1].heading_path == ("Handbook", "Part 299", "Detail 299")


def test_sync_of_a_large_file_cites_a_late_line_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 10 item 2: a file over ``LARGE_FILE_BYTES`` is chunked in windows and
    stored slice by slice; a word on one of its last lines is found with the cite of
    that line, and ``read`` returns it."""
    monkeypatch.setattr(filework, "LARGE_FILE_BYTES", 10_000)
    monkeypatch.setattr(stream, "WINDOW_CHARS", 20_000)
    folder = tmp_path / "notes"
    folder.mkdir()
    text = handbook(400) + "\n## Coda\n\nThe zephyrine kestrel closes the handbook.\n"
    (folder / "handbook.md").write_text(text, encoding="utf-8")
    late_line = text.split("\n").index("The zephyrine kestrel closes the handbook.") + 1
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder, "notes")
        [report] = library.folders.sync("notes")
        assert (report.added, report.failed) == (1, 0)
        [hit] = library.lookup.search("zephyrine kestrel").hits
        assert (hit.start_line, hit.end_line) == (late_line - 2, late_line)
        assert hit.section == ("Handbook", "Coda")
        assert library.lookup.read(hit.cite).text == hit.text
        assert library.catalog.overview().chunks == len(split_document(text, "markdown"))


@pytest.mark.parametrize(("kind", "language"), [("markdown", None), ("code", "python")])
@pytest.mark.parametrize("long_line", [False, True])
def test_iter_utf8_chunks_keeps_exact_lines(
    kind: str, language: str | None, long_line: bool
) -> None:
    """issue 10 item 2: chunks made from the UTF-8 of a text with CJK and emoji (windows
    cut in bytes, never inside a character, also inside a line longer than the window)
    sit on the lines they cite; Markdown cut at headings gives the whole text's chunks."""
    text = handbook(200) if kind == "markdown" else code_file(1_000)
    text = text.replace("estuary", "河口 🚀").replace("Handle", "处理 ✅")
    if long_line:
        text += "长" * 5_000 + "\n"
    window = len(text.encode("utf-8")) // 9
    chunks = list(stream.iter_utf8_chunks(text.encode("utf-8"), kind, language, window=window))
    lines = text.split("\n")
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text in "\n".join(lines[c.start_line - 1 : c.end_line])
    assert chunks[-1].end_line == len(text.rstrip("\n").split("\n"))
    if kind == "markdown" and not long_line:
        assert chunks == split_document(text, kind)
