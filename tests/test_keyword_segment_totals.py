"""The keyword collection statistics the postings segment scores with (issue 23): kept in
a table of our own (``index/keyword_totals.py``), equal to what FTS5 itself reports
through its documented interfaces after every kind of write, filled for a library from
before the table, and never read from an FTS5 shadow table's private record.

Two independent routes to the truth: FTS5's auxiliary-function API (``xRowCount``,
``xColumnTotalSize``: what its bm25() reads), and the chunk rows themselves, each
indexed as FTS5 indexes it (``columns.index_row``) and counted with the table's own
tokenizer.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from library_checks import fts5_totals, keyword_library, segment_mismatches, stored_totals

import kb_mcp
from kb_mcp.index.columns import index_row
from kb_mcp.index.textprep import FTS_TOKENIZER
from kb_mcp.ingest.pipeline import rewrite_in_place
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.migrations import MIGRATIONS

PACKAGE = Path(kb_mcp.__file__).resolve().parent
NOTES = {
    "cache.md": "# Caching\n\n## Policies\n\nA cache keeps recent reads close. "
    "Least recently used evicts the oldest entry first.\n",
    "index.md": "# Inverted index\n\nAn inverted index maps each term to the passages "
    "holding it; search engines read it to find documents fast.\n",
    "search.md": "# 搜索\n\n## 全文搜索\n\n全文搜索按相关性排序结果。索引越新，搜索结果越准确。\n",
    "code.py": '"""Loads settings."""\n\n\ndef load_settings(path):\n    return read(path)\n',
}
QUERIES = ("cache reads", "inverted index search", "全文搜索", "load settings")


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    lib = keyword_library(tmp_path, NOTES)
    lib.fts.ensure_current()
    yield lib
    lib.close()


def _tokenized_totals(conn: apsw.Connection) -> tuple[int, int, int]:
    """``(chunks, head tokens, body tokens)`` from the chunk rows, each tokenized as FTS5
    tokenizes its index copy (colocated tokens aside, as FTS5 counts them)."""
    name, *args = FTS_TOKENIZER.split()
    tokenizer = conn.fts5_tokenizer(name, args)

    def count(text: str) -> int:
        return len(
            tokenizer(
                text.encode("utf-8"),
                apsw.FTS5_TOKENIZE_DOCUMENT,
                None,
                include_offsets=False,
                include_colocated=False,
            )
        )

    chunks = head = body = 0
    for title, path, text, language in conn.execute(
        "SELECT d.title, c.heading_path, c.text, CASE WHEN d.kind = 'code' THEN d.language END "
        "FROM chunks c JOIN documents d ON d.id = c.document_id"
    ):
        h, b = index_row(title, json.loads(path), text, language)
        chunks, head, body = chunks + 1, head + count(h), body + count(b)
    return chunks, head, body


def _assert_totals_are_fts5s(lib: Library) -> None:
    conn = lib.db.conn
    stored = stored_totals(conn)
    assert stored[0] > 0
    assert stored == fts5_totals(conn)
    assert stored == _tokenized_totals(conn)


def test_keyword_totals_are_fts5s_after_inserts_replacements_deletions_and_a_rebuild(
    library: Library, tmp_path: Path
) -> None:
    """Every path that writes FTS rows keeps the totals FTS5's: a sync's inserts, a
    file's edit and deletion, an agent document written and replaced, a document
    rewritten in place (re-redaction), and a rebuild of the whole index."""
    _assert_totals_are_fts5s(library)
    notes = tmp_path / "notes"
    (notes / "zeppelin.md").write_text("# Airships\n\nA zeppelin floats over the cache.\n")
    (notes / "index.md").write_text(NOTES["index.md"] + "\n## Postings\n\nPacked positions.\n")
    (notes / "cache.md").unlink()
    library.folders.sync()
    _assert_totals_are_fts5s(library)
    library.writing.add_document(
        "bm25", "Agent note on bm25 and its averages.", "note://a", by_agent=False
    )
    library.writing.add_document(
        "bm25", "The note replaced, longer: idf, tf, lengths.", "note://a", by_agent=False
    )
    _assert_totals_are_fts5s(library)
    with library.db.write() as conn:
        first = conn.execute("SELECT min(id) FROM documents").fetchone()[0]
        doc = rows.get_document_by_id(conn, first)
        assert doc is not None
        rewrite_in_place(
            conn, doc, text=doc.text + "\nOne more line.\n", title="Retitled", uri=doc.uri, tags=()
        )
    _assert_totals_are_fts5s(library)
    library.writing.reindex(rebuild=True)
    _assert_totals_are_fts5s(library)


def test_keyword_totals_zero_for_an_emptied_library(library: Library, tmp_path: Path) -> None:
    """Every document removed: nothing counted, as FTS5 counts nothing."""
    for name in NOTES:
        (tmp_path / "notes" / name).unlink()
    library.folders.sync()
    assert stored_totals(library.db.conn) == fts5_totals(library.db.conn) == (0, 0, 0)


def test_keyword_segment_scores_with_the_stored_totals(library: Library, tmp_path: Path) -> None:
    """The segment's bm25, scored with ``kw_totals``, is FTS5's to 1e-9, before and after
    writes that move the averages."""
    library.fts.refresh_segment(min_chunks=0)
    assert segment_mismatches(library, QUERIES) == []
    (tmp_path / "notes" / "long.md").write_text("# Long\n\n" + "cache index search " * 300)
    library.folders.sync()
    assert segment_mismatches(library, QUERIES) == []


def test_keyword_totals_filled_for_a_library_from_before_them(tmp_path: Path) -> None:
    """A library from before the table (the schema before the step that makes it) gets
    it filled from its index on open."""
    lib = keyword_library(tmp_path, NOTES)
    lib.fts.ensure_current()
    lib.writing.add_document("varints", "An agent note about varints.", "note://v", by_agent=False)
    expected = fts5_totals(lib.db.conn)
    before = [getattr(step, "__name__", "") for step in MIGRATIONS].index("_v14_keyword_totals")
    with lib.db.write() as conn:
        conn.execute("DROP TABLE kw_totals")
    lib.db.conn.execute(f"PRAGMA user_version = {before}")
    lib.close()
    reopened = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        assert stored_totals(reopened.db.conn) == expected
        assert expected[0] > 0
        _assert_totals_are_fts5s(reopened)
    finally:
        reopened.close()


def test_keyword_totals_of_a_new_library_start_at_zero(tmp_path: Path) -> None:
    """A new library (no FTS table yet) starts with a zero row the first rebuild fills."""
    lib = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        assert stored_totals(lib.db.conn) == (0, 0, 0)
        assert lib.db.conn.execute("SELECT count(*) FROM kw_totals").fetchone()[0] == 1
    finally:
        lib.close()


def test_doctor_reports_totals_that_differ_from_fts5s_and_a_rebuild_mends_them(
    library: Library,
) -> None:
    """``kb-mcp doctor``'s keyword index check compares the stored totals with FTS5's own:
    a drift (here made by hand) is named with its repair, which counts them again."""
    assert library.fts.integrity_problem() is None
    with library.db.write() as conn:
        conn.execute("UPDATE kw_totals SET body_tokens = body_tokens + 7")
    problem = library.fts.integrity_problem()
    assert problem is not None
    assert "keyword statistics" in problem and "kb-mcp reindex --rebuild" in problem
    library.writing.reindex(rebuild=True)
    assert library.fts.integrity_problem() is None
    _assert_totals_are_fts5s(library)


# An FTS5 table's shadow tables hold its private on-disk records (``%_data``: the
# segments and the averages record; ``%_docsize``, ``%_idx``, ``%_config``, ``%_content``).
# A SQL statement naming one, as the table a FROM, JOIN, INTO or UPDATE reads or writes.
SHADOW_TABLE_SQL = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE)\s+[\w{}.\"'`]*_(?:data|docsize|idx|config|content)\b",
    re.IGNORECASE,
)


def _sql_texts(path: Path) -> Iterator[tuple[int, str]]:
    """Every string literal and f-string in ``path`` with its line, an f-string as its
    source (``{TABLE}_data`` keeps the table's name and its suffix together)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside_fstring = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, ast.unparse(node)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in inside_fstring
        ):
            yield node.lineno, node.value


def test_no_module_reads_an_fts5_shadow_tables_private_record() -> None:
    """FTS5 is read through documented interfaces only (MATCH, bm25(), fts5vocab, the
    auxiliary-function API): its shadow tables' records are private, and a SQLite upgrade
    may change them without a word (issue 23)."""
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the whole package is scanned
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text.strip()[:80]}"
        for path in modules
        for line, text in _sql_texts(path)
        if SHADOW_TABLE_SQL.search(text)
    ]
    assert found == []


def test_the_shadow_table_scan_finds_a_read_of_the_averages_record() -> None:
    """The scan above recognises the statement it forbids, plain and as an f-string."""
    assert SHADOW_TABLE_SQL.search("SELECT block FROM chunks_fts_data WHERE id = 1")
    assert SHADOW_TABLE_SQL.search("SELECT count(*) FROM {TABLE}_docsize")
    assert not SHADOW_TABLE_SQL.search("SELECT term, doc FROM chunks_fts_vocab WHERE term = ?")
    assert not SHADOW_TABLE_SQL.search("every result passes through render.to_data first")
