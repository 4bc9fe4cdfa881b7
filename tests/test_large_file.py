"""ingest.large: a large file decoded, redacted and chunked window by window (issue 10).

Small windows are forced (``LARGE_FILE_BYTES``, the decode, redaction and chunking
windows) so a few hundred kilobytes cross dozens of window edges; the stored document
must be the one the whole-file path stores, byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.chunk import split_document
from kb_mcp.chunk import stream as chunk_stream
from kb_mcp.errors import Unreadable
from kb_mcp.ingest import filework, large
from kb_mcp.ingest.large import read_large
from kb_mcp.ingest.readers.generated import check_not_generated
from kb_mcp.library import Library
from kb_mcp.redact import redact
from kb_mcp.redact import stream as redact_stream
from kb_mcp.settings import Settings


def _alnum(length: int) -> str:
    return ("a1B2c3D4e5F6g7H8i9J0kLmN" * 20)[:length]


_B64 = ("MIIEowIBAAKCAQEAx9" + _alnum(46))[:64]


def _notes(sections: int) -> str:
    """Markdown in Chinese with emoji and English, secrets of every multi-line shape."""
    parts = ["---\ntitle: 大手册 Handbook\ntags: [survey]\n---\n\n# 手册\n\n开头的话。\r\n"]
    for n in range(sections):
        parts.append(
            f"\n## 第{n}部分 Part {n} 🚀\n\n河口调查的第{n}部分。It explains the survey. ✅\n"
        )
        if n % 7 == 3:
            key = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *[_B64] * 8, "Zm9v"])
            parts.append(f"\n{key}\n-----END RSA PRIVATE KEY-----\n")
        if n % 11 == 5:
            rows = "".join(f"u{i},Pw{i}xK9{_alnum(8)}\n" for i in range(40))
            parts.append(f"\nname,password\n{rows}\n")
        if n % 5 == 1:
            parts.append(f'\n```ini\npassword = "S3cret{n}{_alnum(6)}"\n```\n')
    parts.append("\n## 结尾 Coda\n\nThe zephyrine kestrel 🐦 closes the handbook.\n")
    return "".join(parts)


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filework, "LARGE_FILE_BYTES", 10_000)
    monkeypatch.setattr(large, "WINDOW_BYTES", 997)
    monkeypatch.setattr(redact_stream, "WINDOW_CHARS", 613)
    monkeypatch.setattr(chunk_stream, "WINDOW_CHARS", 20_000)


@pytest.mark.parametrize("window", [64, 997, 4096])
def test_read_large_equals_the_whole_file_reading(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 10 item 2: the redacted text made window by window is the whole text's
    redaction (CRLF, CJK, emoji, keys, tables and assignments over window edges)."""
    monkeypatch.setattr(large, "WINDOW_BYTES", window)
    monkeypatch.setattr(redact_stream, "WINDOW_CHARS", window // 2)
    text = _notes(120)
    whole = redact(text.replace("\r\n", "\n")).text
    found = read_large(text.encode("utf-8"), ".md")
    assert found is not None
    assert found.utf8.decode("utf-8") == whole
    assert "[REDACTED:private_key]" in whole and "[REDACTED:password]" in whole
    assert found.head.title == "大手册 Handbook"


def test_read_large_declines_other_encodings_and_formats() -> None:
    """Issue 10: only UTF-8 pass-through files are windowed; the rest is read whole."""
    assert read_large("ü naïve\n".encode("latin-1"), ".md") is None
    assert read_large("text\n".encode("utf-16"), ".txt") is None
    assert read_large(b"<html></html>", ".html") is None


def _stored(home: Path, folder: Path) -> tuple[tuple, int, Library]:
    library = Library(Settings(home=home, embedder="none"))
    library.folders.add_folder(folder, "notes")
    [report] = library.folders.sync("notes")
    assert (report.added, report.failed) == (1, 0)
    row = library.db.query("SELECT doc_key, content_hash, text, title, tags FROM documents")[0]
    return row, library.catalog.overview().chunks, library


def test_sync_of_a_large_file_stores_what_the_whole_path_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_windows: None
) -> None:
    """Issue 10 items 2-3: a large file read in windows is stored as the whole-file path
    stores it (key, hash, redacted text, title, tags, chunks), and a late line is cited
    exactly."""
    calls: list[str] = []

    def recorded(data: bytes, key: str) -> large.Large | None:
        calls.append(key)
        return read_large(data, key)

    monkeypatch.setattr(filework, "read_large", recorded)
    folder = tmp_path / "notes"
    folder.mkdir()
    text = _notes(300)
    (folder / "handbook.md").write_bytes(text.encode("utf-8"))
    windowed, chunks, library = _stored(tmp_path / "windowed", folder)
    assert calls == [".md"]  # read window by window
    redacted = redact(text.replace("\r\n", "\n")).text
    assert windowed[2] == redacted
    assert chunks == len(split_document(redacted, "markdown"))
    late = redacted.split("\n").index("The zephyrine kestrel 🐦 closes the handbook.") + 1
    with library:
        [hit] = library.lookup.search("zephyrine kestrel").hits
        assert (hit.start_line, hit.end_line) == (late - 2, late)
        assert library.lookup.read(hit.cite).text == hit.text
    monkeypatch.setattr(filework, "LARGE_FILE_BYTES", 10 * len(text))  # the whole-file path
    whole, whole_chunks, library = _stored(tmp_path / "whole", folder)
    library.close()
    assert (windowed, chunks) == (whole, whole_chunks)


def test_read_large_refuses_a_minified_file_as_the_reader_does() -> None:
    """Issue 10: the minified check is the whole file's, summed over the windows."""
    line = "a=1;b=[2,3];" * 3_000 + "\n"
    data = (line * 200).encode("utf-8")
    with pytest.raises(Unreadable) as whole:
        check_not_generated(data.decode("utf-8"))
    with pytest.raises(Unreadable) as windowed:
        read_large(data, ".js")
    assert windowed.value.message == whole.value.message
