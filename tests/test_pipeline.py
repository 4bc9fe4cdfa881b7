"""Secrets go out on the way in: every source's text is redacted before it is stored or indexed.

Guards against (issue 7 items 1 and 4): a folder file stored and indexed verbatim, a
frontmatter title or tag holding a token, a chunk split that leaves ``password =`` in
one chunk and its value in the next, line numbers shifted by redaction (cites must point
at the user's lines), the user's file being rewritten, and a ``kb.db`` written before
this change going on serving the raw text it holds. Real folders, a real ``kb.db``.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import apsw
import pytest

from kb_mcp.chunk.markdown import split_markdown
from kb_mcp.chunk.pack import DEFAULT_BUDGET_CHARS
from kb_mcp.index import fts
from kb_mcp.ingest import readers
from kb_mcp.ingest.filework import prepare_file
from kb_mcp.ingest.pipeline import text_hash
from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.migrations import MIGRATIONS

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # 44 chars, digits: a real-looking token
PLAIN_TOKEN = "4f8a1c9e2b7d6f3a0c5e8b1d4f7a2c9e6b3d0f8a"  # `token: <40 chars>`
PASSWORD = "hunter2Xq99zpLw"
SECRETS = (GITHUB_TOKEN, PLAIN_TOKEN, PASSWORD)

NOTE = f"""---
title: Deploy with {GITHUB_TOKEN}
tags: [ops, "{GITHUB_TOKEN}"]
---
# Deploy

token: {PLAIN_TOKEN}
db_password = "{PASSWORD}"
The marker line says DEPLOY_DONE.
"""


def all_text(db_path: Path) -> str:
    """Every text value of every table of ``kb.db``, FTS vocabulary terms included."""
    conn = apsw.Connection(str(db_path))
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not r[0].startswith("sqlite_")
        ]
        values: list[str] = []
        for name in names:
            for row in conn.execute(f'SELECT * FROM "{name}"'):
                values += [v for v in row if isinstance(v, str)]
                # FTS5 shadow tables keep terms in blobs: look inside those too.
                values += [v.decode("utf-8", "replace") for v in row if isinstance(v, bytes)]
        return "\n".join(values)
    finally:
        conn.close()


def synced_library(home: Path, folder: Path) -> Library:
    library = Library(Settings(home=home))
    library.folders.add_folder(folder)
    library.folders.sync()
    return library


def test_folder_sync_stores_and_indexes_only_redacted_text(home: Path, tmp_path: Path) -> None:
    """issue 7 item 1: documents, chunks, titles, tags and FTS terms hold no secret."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "deploy.md").write_text(NOTE)
    with synced_library(home, folder) as library:
        [(doc, path)] = library.db.query("SELECT doc_key, title FROM documents")
        assert "[REDACTED:github_token]" in path
        text = library.lookup.read(doc).text
        assert "token: [REDACTED:token]" in text
        assert "DEPLOY_DONE" in text
        assert library.lookup.search("DEPLOY_DONE").hits
    dumped = all_text(home / DB_FILE)
    assert "DEPLOY_DONE" in dumped.upper()  # the dump does see the text it should
    for secret in SECRETS:
        assert secret not in dumped
        assert secret.lower() not in dumped  # FTS terms are case-folded
    assert (folder / "deploy.md").read_text() == NOTE  # the user's file is never touched


def test_folder_sync_keeps_line_numbers_of_the_users_file(home: Path, tmp_path: Path) -> None:
    """issue 7 item 1: redaction keeps every line where it was, so cites stay exact."""
    folder = tmp_path / "notes"
    folder.mkdir()
    lines = ["# Keys", "", "-----BEGIN RSA PRIVATE KEY-----"]
    lines += ["MIIEowIBAAKCAQEA" + f"{i:048d}" for i in range(20)]
    lines += ["-----END RSA PRIVATE KEY-----", "", f"token: {PLAIN_TOKEN}", "AFTER_THE_KEY"]
    (folder / "keys.md").write_text("\n".join(lines) + "\n")
    with synced_library(home, folder) as library:
        [hit] = library.lookup.search("AFTER_THE_KEY").hits
        assert hit.end_line == len(lines)
        read = library.lookup.read("keys.md", len(lines), len(lines))
        assert read.text == "AFTER_THE_KEY"
        assert read.total_lines == len(lines) + 1
        grep = library.lookup.grep("AFTER_THE_KEY")
        assert [m.line_number for m in grep.matches] == [len(lines)]
        assert "MIIEowIBAAKCAQEA" not in library.lookup.read("keys.md").text


def test_content_hash_is_over_redacted_text_and_edits_are_still_noticed(
    home: Path, tmp_path: Path
) -> None:
    """issue 7 item 1: no digest of raw text is kept; a changed secret alone changes nothing
    stored, any other edit replaces the document."""
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "deploy.md"
    note.write_text(NOTE)
    with synced_library(home, folder) as library:
        [(stored_text, digest, key)] = library.db.query(
            "SELECT text, content_hash, doc_key FROM documents"
        )
        assert digest == text_hash(stored_text) != text_hash(NOTE)
        note.write_text(NOTE.replace(PASSWORD, "another2Zq77"))
        [report] = library.folders.sync()
        assert (report.updated, report.unchanged) == (0, 1)
        note.write_text(NOTE.replace("DEPLOY_DONE", "DEPLOY_FINISHED"))
        [report] = library.folders.sync()
        assert report.updated == 1
        assert library.lookup.grep("DEPLOY_FINISHED").matches
        assert library.db.query("SELECT doc_key FROM documents") != [(key,)]


def test_reindex_redacts_a_hand_edited_agent_file(home: Path) -> None:
    """issue 7 item 1: a docs/ file is re-read by reindex; what it holds is redacted."""
    with Library(Settings(home=home, allow_agent_writes=True)) as library:
        added = library.writing.add_document("Runbook", "Restart the service.", "https://x/runbook")
        path = home / "docs" / f"{added.doc}.md"
        path.write_text(path.read_text() + f"\ntoken: {PLAIN_TOKEN}\n")
        library.writing.reindex(rebuild=True)
        assert "token: [REDACTED:token]" in library.lookup.read(added.doc).text
    assert PLAIN_TOKEN in path.read_text()  # the file is the user's: never rewritten
    assert PLAIN_TOKEN not in all_text(home / DB_FILE)


@pytest.mark.parametrize("kind", ["markdown", "text", "code"])
def test_no_chunk_split_separates_a_password_from_its_value(kind: str) -> None:
    """issue 7 item 4: a long line split at every position around the chunk budget never
    leaves the value of ``password =`` in clear in any chunk."""
    leaks = []
    for offset in range(DEFAULT_BUDGET_CHARS - 60, DEFAULT_BUDGET_CHARS + 60, 3):
        filler = " ".join(["lorem"] * (offset // 6))
        line = f"{filler} db_password = {PASSWORD} and more words follow here. " * 3
        text = f"# Settings\n\n{line}\n"
        converted = readers.Converted(text, kind, "python" if kind == "code" else None, None, True)
        doc, chunks = prepare_file("settings.md", converted, 0, "2024-01-01T00:00:00+00:00")
        assert len(chunks) > 1
        assert PASSWORD not in doc.text
        leaks += [offset for c in chunks if PASSWORD[:8] in c.text]
    assert leaks == []


def _old_database(home: Path, folder: Path) -> None:
    """A kb.db as the previous release wrote it: schema 2, a folder file stored verbatim
    (documents, chunks, FTS terms), inserted through the store and index functions."""
    home.mkdir(parents=True)
    conn = apsw.Connection(str(home / DB_FILE))
    conn.execute("PRAGMA foreign_keys=ON")
    for step in MIGRATIONS[:2]:
        conn.execute(step)
    conn.execute("PRAGMA user_version = 2")
    fts._create_table(conn)
    conn.execute("INSERT INTO meta(key, value) VALUES ('fts_version', ?)", (fts.FTS_VERSION,))
    now = "2024-01-01T00:00:00+00:00"
    conn.execute(  # the schema-2 table: no host (today's ensure_source writes one)
        "INSERT INTO sources(name, kind, root, ignore_globs, created_at) "
        "VALUES (?, 'folder', ?, '[]', ?)",
        (folder.name, str(folder), now),
    )
    source_id = conn.last_insert_rowid()
    stat = (folder / "deploy.md").stat()
    converted = readers.Converted(NOTE, "markdown", None, None, True)
    doc, _chunks = prepare_file("deploy.md", converted, stat.st_mtime_ns, now)
    raw = dataclasses.replace(doc, text=NOTE, title=f"Deploy {GITHUB_TOKEN}")
    document_id = rows.insert_document(conn, raw)
    raw_chunks = split_markdown(NOTE)
    ids = rows.insert_chunks(conn, document_id, raw_chunks)
    fts.add_chunks(
        conn,
        (
            (i, raw.title, c.heading_path, c.text, None)
            for i, c in zip(ids, raw_chunks, strict=False)
        ),
    )
    conn.execute(  # the schema-2 table: a raw path, no path key
        "INSERT INTO locations(source_id, path, document_id, size, mtime_ns, file_hash, seen_at) "
        "VALUES (?, 'deploy.md', ?, ?, ?, ?, ?)",
        (source_id, document_id, stat.st_size, stat.st_mtime_ns, "0" * 64, now),
    )
    conn.close()


def test_opening_an_old_database_stops_serving_its_raw_text(home: Path, tmp_path: Path) -> None:
    """issue 7 item 1: a kb.db written before ingest redaction holds raw secrets; opening it
    removes them from every table before anything is served, and the next sync re-reads
    the file redacted."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "deploy.md").write_text(NOTE)
    _old_database(home, folder)
    assert PLAIN_TOKEN in all_text(home / DB_FILE)  # the old way really stored it
    with Library(Settings(home=home)) as library:
        library.folders.add_folder(folder)
        assert library.lookup.grep(PLAIN_TOKEN[:6]).matches == ()
    assert PLAIN_TOKEN not in all_text(home / DB_FILE).lower()
    # Not in the file's free pages either: the migration deletes with secure_delete on.
    for leftover in home.glob(DB_FILE + "*"):
        assert PLAIN_TOKEN.encode() not in leftover.read_bytes(), leftover.name
    with Library(Settings(home=home)) as library:
        assert library.lookup.search("DEPLOY_DONE").hits == ()  # nothing until the re-read
        [report] = library.folders.sync()
        assert report.added == 1
        assert [m.line_number for m in library.lookup.grep("DEPLOY_DONE").matches] == [9]
        assert "[REDACTED:token]" in library.lookup.read("deploy.md").text
        library.writing.reindex(rebuild=True)
    dumped = all_text(home / DB_FILE)
    for secret in SECRETS:
        assert secret not in dumped
        assert secret.lower() not in dumped
    # Nor in the slack of live pages: an outside run found a token there after an upgrade,
    # a sync and a rebuild; the migration compacts the file.
    for leftover in home.glob(DB_FILE + "*"):
        data = leftover.read_bytes()
        assert not [s for s in SECRETS if s.encode() in data], leftover.name


# A kb.db that kb-mcp wrote at commit e000a4b (before ingest redaction) over a folder of
# FAKE secrets, kept as the real artifact an upgrade meets. Values from its notes.md.
OLD_RELEASE_DB = Path(__file__).parent / "data" / "kb-e000a4b-fake-secrets.db"
OLD_RELEASE_SECRETS = (
    "63FfkCzJr4i0B3JrTAwR4y9ojfljoQoaF1Llqsaj",
    "El2hpChYgCfrL1spNxnyVmihA/2O76UMFxFkM/R5",
    "ghp_o4gfqrc5XlrWi0B26R08qzjI6GKFSufrdZSl",
    "Tr0ub4dorUxbvJDCT",
)


def test_opening_a_database_of_the_old_release_leaves_no_raw_byte_in_the_file(
    home: Path,
) -> None:
    """Outside run after issue 7: deleting the verbatim rows, even with secure_delete,
    left a token in the unused space of a live page; the migration now compacts."""
    home.mkdir()
    shutil.copy(OLD_RELEASE_DB, home / DB_FILE)
    assert OLD_RELEASE_SECRETS[0].encode() in (home / DB_FILE).read_bytes()
    with Library(Settings(home=home)) as library:
        library.catalog.overview()
    for leftover in home.glob(DB_FILE + "*"):
        data = leftover.read_bytes()
        assert [s for s in OLD_RELEASE_SECRETS if s.encode() in data] == [], leftover.name
