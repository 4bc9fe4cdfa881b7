"""read_document: line ranges are cut from the redacted document, never redacted after.

Guards against (issue 7 item 2): ``#L6-L8`` of a PEM key block returning its body lines,
because output redaction needs the BEGIN line in view. The database here holds a key
stored verbatim (as a release before ingest redaction, or rules older than today's, left
it), written through the store functions, so only read's own redaction stands between
the key and the caller.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.chunk.markdown import split_markdown
from kb_mcp.errors import InvalidInput
from kb_mcp.ingest.pipeline import store_document, text_hash
from kb_mcp.library import Library
from kb_mcp.store import documents as rows

BODY = [f"MIIEowIBAAKCAQEA{i:02d}" + "x9Kq" * 12 for i in range(10)]
BEGIN, END = "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"
KEY_NOTE = "\n".join(["# Server key", "", "Keep it safe.", "", BEGIN, *BODY, END, "", "LAST_LINE"])


def _store_verbatim(library: Library, text: str) -> str:
    library.fts.ensure_current()
    now = "2024-01-01T00:00:00+00:00"
    doc = rows.NewDocument(
        "a-0000000000000001", "Server key", "note://key", "markdown", None, text,
        text_hash(text), None, (), now, now,
    )  # fmt: skip
    with library.db.write() as conn:
        source_id = rows.ensure_source(conn, "agent", "agent", now)
    path = library.db.paths.of("key.md")
    store_document(library.db, source_id, path, doc, split_markdown(text), seen_at=now)
    return doc.doc_key


def test_read_line_range_inside_a_key_block_shows_no_body_line(library: Library) -> None:
    """issue 7 item 2: lines 6-8 of a key block (body only, no BEGIN in view) are redacted."""
    doc = _store_verbatim(library, KEY_NOTE)
    for start, end in ((6, 8), (7, 7), (10, 16), (5, 6)):
        text = library.lookup.read(f"{doc}#L{start}-L{end}").text
        assert not any(line[:18] in text for line in BODY), (start, end)
    assert library.lookup.read(doc).text.count("MIIEowIBAAKCAQEA") == 0


def test_read_line_range_after_redaction_is_the_users_line(library: Library) -> None:
    """issue 7 item 2: redacting before cutting keeps the lines where they were."""
    doc = _store_verbatim(library, KEY_NOTE)
    last = len(KEY_NOTE.split("\n"))
    assert library.lookup.read(doc, last, last).text == "LAST_LINE"
    assert library.lookup.read(doc).total_lines == last


def test_read_by_a_path_two_folders_hold_names_both_instead_of_picking_one(
    tmp_path: Path, library: Library
) -> None:
    """Found by a new user with attrs and rich added: ``kb-mcp read README.md`` printed
    attrs' README without a word about rich's. A path two documents share is refused with
    both ids and their sources; a path one document has (in one folder or, as identical
    files, in two) still reads, and so does an id."""
    for name, text in (("attrs", "# Attrs\n\nclasses\n"), ("rich", "# Rich\n\nconsoles\n")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "README.md").write_text(text, encoding="utf-8")
        (folder / "LICENSE.md").write_text("# MIT\n\nsame in both\n", encoding="utf-8")
        library.folders.add_folder(folder, name)
    library.folders.sync()
    with pytest.raises(InvalidInput) as refused:
        library.lookup.read("README.md")
    ids = [r.doc_key for r in rows.find_documents_by_path(library.db.conn, "README.md")]
    assert len(ids) == 2
    for doc_key, source in zip(ids, ("attrs", "rich"), strict=True):
        assert f"{doc_key} ({source})" in refused.value.render()
    assert library.lookup.read(ids[1]).text.startswith("# Rich")
    assert library.lookup.read("LICENSE.md").title == "MIT"
