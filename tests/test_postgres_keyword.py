"""The PostgreSQL store's keyword index (issue 24) ranks exactly as the SQLite store's FTS5.

A real corpus — the repository's documentation and a few Chinese notes, so CJK bigram
phrases are ranked too — is synced into a real SQLite library; its rows and its chunks'
keyword rows are written to a library's database on a real PostgreSQL server (fixture
``postgres_url``, migrated as ``PostgresDatabase`` migrates it), and every
question must get the same top passages per document with the same bm25 scores from
both, with the index only in its delta, after a merge, after deletes and re-adds, and
with two writers (and a merge) at work at once.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kb_mcp.bench import keyword_pg
from kb_mcp.index.postgres import keyword, keyword_copy, keyword_merge
from kb_mcp.index.postgres.keyword_reader import PostgresKeywordIndex
from kb_mcp.library import Library
from kb_mcp.search.query import parse_query
from kb_mcp.settings import Settings
from kb_mcp.store import documents as store_rows

REPO = Path(__file__).resolve().parents[1]
CHINESE = {
    "cache.md": "# 缓存\n\n## 缓存策略\n\n缓存可以减少数据库的读取次数。"
    "常见的缓存策略有最近最少使用。\n",
    "index.md": "# 索引\n\n## 倒排索引\n\n倒排索引记录每个词出现在哪些文档中，"
    "搜索引擎用它快速找到文档。\n",
    "search.md": "# 搜索\n\n## 全文搜索\n\n全文搜索按相关性排序结果。索引越新，搜索结果越准确。\n",
}
QUESTIONS = (
    "keyword search speed bm25",
    "vector embedding model passages",
    "freshness watcher polling fallback",
    "sqlite migration schema version",
    "peak memory RSS server",
    "citation line numbers",
    "how does getUserById work",
    "倒排索引的作用是什么",
    "缓存策略",
    "搜索结果 ranking",
)

# The store's rows the keyword index reads, as a copy must leave them.
STORE_ROWS = (
    "SELECT id, document_id, ordinal FROM chunks ORDER BY id",
    "SELECT id, source_id, document_id, path, file_hash, mtime_ns FROM locations ORDER BY id",
    "SELECT id, doc_key, content_hash, doc_date, text FROM documents ORDER BY id",
)


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    notes = tmp_path / "notes"
    notes.mkdir()
    for doc in [*(REPO / "docs").glob("*.md"), REPO / "README.md"]:
        shutil.copy(doc, notes / doc.name)
    for name, text in CHINESE.items():
        (notes / name).write_text(text, encoding="utf-8")
    lib = Library(Settings(home=tmp_path / "home", embedder="none"))
    lib.folders.add_folder(notes)
    lib.folders.sync()
    lib.fts.ensure_current()
    yield lib
    lib.close()


@pytest.fixture
def pg(postgres_url: str) -> Iterator[psycopg.Connection]:
    keyword_copy.create_library(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _differences(library: Library, conn: psycopg.Connection) -> list[str]:
    """Questions whose top 10 (ids, or a score by more than 1e-9) differ between FTS5
    and the PostgreSQL index, and any statistics that differ."""
    index = PostgresKeywordIndex(lambda: conn)
    result = keyword_pg.compare(library.fts, index, QUESTIONS)
    assert result.questions == len(QUESTIONS)
    wrong = list(result.different) + [f"documents: {q}" for q in result.documents_different]
    wrong += [f"segment citations: {q}" for q in result.cited_different]
    if result.max_score_difference > 1e-9:
        wrong.append(f"scores differ by {result.max_score_difference}")
    for question in QUESTIONS:  # the document leg cites each document by its best passage
        expression = parse_query(question).match_expression()
        assert expression is not None
        ids = [d for d, _ in library.fts.best_documents(expression, 10)]
        if index.best_passage_of(expression, ids) != library.fts.best_passage_of(expression, ids):
            wrong.append(f"cited passages: {question}")
    terms = [t for q in QUESTIONS for u in parse_query(q).match_units() for t in index.tokens(u)]
    if index.doc_frequencies(terms) != library.fts.doc_frequencies(terms):
        wrong.append("document frequencies")
    if index.chunk_count() != library.fts.chunk_count():
        wrong.append("passage count")
    problems = [keyword.totals_problem(conn, t) for t in (keyword.PASSAGES, keyword.DOCUMENTS)]
    return wrong + [p for p in problems if p]


def test_ranks_as_fts5_from_the_delta_and_after_a_merge(
    library: Library, pg: psycopg.Connection, postgres_url: str
) -> None:
    """issue 24: same top 10 and scores, CJK included, before and after a merge."""
    keyword_copy.mirror(library.db.conn, pg)
    assert _differences(library, pg) == []
    merged = keyword_merge.merge(lambda: _connect(postgres_url))
    assert merged == library.fts.chunk_count()
    keyword_merge.merge(lambda: _connect(postgres_url), tables=keyword.DOCUMENTS)
    assert pg.execute("SELECT COUNT(*) FROM kw_recent").fetchone()[0] == 0  # all merged
    assert _differences(library, pg) == []
    index = PostgresKeywordIndex(lambda: pg)
    top = index.segment_best_per_document(parse_query("倒排索引").match_units(), 1)
    expression = parse_query("倒排索引").match_expression()
    assert top == library.fts.best_per_document(expression, 1)


def test_a_refresh_merges_each_index_when_its_delta_is_due(
    library: Library, pg: psycopg.Connection, postgres_url: str
) -> None:
    """``refresh_segment`` (called after a sync, as on SQLite) merges the passages' and
    the documents' deltas once they are due, and not before."""
    keyword_copy.mirror(library.db.conn, pg)
    index = PostgresKeywordIndex(lambda: pg, connect=lambda: _connect(postgres_url))
    chunks = library.fts.chunk_count()
    assert index.refresh_segment(delta_min=chunks) is None  # not due: nothing merged
    assert pg.execute("SELECT COUNT(*) FROM kw_passages WHERE merged").fetchone()[0] == 0
    assert index.refresh_segment(delta_min=0) == chunks
    assert pg.execute("SELECT COUNT(*) FROM kwdoc_passages WHERE NOT merged").fetchone()[0] == 0
    assert index.integrity_problem() is None
    assert _differences(library, pg) == []


def test_a_scoped_search_ranks_the_sources_documents_as_fts5(
    library: Library, pg: psycopg.Connection
) -> None:
    """``source_id`` keeps a source's documents only, as the SQLite store's query does."""
    keyword_copy.mirror(library.db.conn, pg)  # the library's locations with its rows
    index = PostgresKeywordIndex(lambda: pg)
    (source_id,) = library.db.conn.execute(
        "SELECT source_id FROM locations WHERE document_id IS NOT NULL"
    ).fetchone()
    for question in QUESTIONS:
        expression = parse_query(question).match_expression()
        assert expression is not None
        want = library.fts.best_per_document(expression, 10, source_id=source_id)
        got = index.best_per_document(expression, 10, source_id=source_id)
        assert [c for c, _ in got] == [c for c, _ in want], question
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-9)
    assert index.best_per_document('"keyword"', 10, source_id=source_id + 1) == []


def test_a_word_fts5_splits_in_two_is_no_error(library: Library, pg: psycopg.Connection) -> None:
    """A Latin word with a character FTS5's tables do not know (``ᦰ``) is a two-token
    phrase the postings cannot key: the search leaves it out, and as no passage holds
    it the ranking is FTS5's still."""
    keyword_copy.mirror(library.db.conn, pg)
    index = PostgresKeywordIndex(lambda: pg)
    query = parse_query("keyword qzxᦰvwj search")  # no note holds qzx or vwj
    expression = query.match_expression()
    assert expression is not None
    assert index.segment_best_per_document(query.match_units(), 10) is None
    want = library.fts.best_per_document(expression, 10)
    got = index.best_per_document(expression, 10)
    assert want and [c for c, _ in got] == [c for c, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-9)


def test_deletes_and_re_adds_rank_as_fts5(
    library: Library, pg: psycopg.Connection, postgres_url: str, tmp_path: Path
) -> None:
    """Removed passages leave the ranking and the statistics at once (tombstones over a
    merged generation), rewritten ones rank by their new text, and a passage written
    again under its own id is replaced, never counted twice."""
    keyword_copy.mirror(library.db.conn, pg)
    keyword_merge.merge(lambda: _connect(postgres_url))
    keyword_merge.merge(lambda: _connect(postgres_url), tables=keyword.DOCUMENTS)
    notes = tmp_path / "notes"
    (notes / "README.md").unlink()
    (notes / "search.md").write_text("# 搜索\n\n## 排序\n\n搜索结果按时间排序。\n", "utf-8")
    (notes / "cache.md").write_text("# 缓存\n\nbm25 keyword ranking speed notes.\n", "utf-8")
    library.folders.sync()
    with library.db.write() as conn:  # a row changed in place, keeping its id
        (first,) = conn.execute("SELECT MIN(id) FROM documents").fetchone()
        store_rows.set_doc_date(conn, first, "2020-02-02")
    removed, added = keyword_copy.mirror(library.db.conn, pg)
    assert removed and added
    for sql in STORE_ROWS:  # the library's rows as they are now, gone ones gone
        assert pg.execute(sql).fetchall() == library.db.conn.execute(sql).fetchall(), sql
    assert pg.execute("SELECT COUNT(*) FROM kw_dead").fetchone()[0] >= removed
    assert _differences(library, pg) == []
    again = keyword_copy.chunk_rows(library.db.conn)[:20]  # the same rows, written again
    with pg.transaction():
        keyword.add_index_rows(pg, [(cid, head, body) for cid, _doc, head, body in again])
    assert _differences(library, pg) == []
    keyword_merge.merge(lambda: _connect(postgres_url))
    keyword_merge.merge(lambda: _connect(postgres_url), tables=keyword.DOCUMENTS)
    assert pg.execute("SELECT COUNT(*) FROM kw_dead").fetchone()[0] == 0
    assert _differences(library, pg) == []


def test_two_writers_and_a_merge_at_once(
    library: Library, pg: psycopg.Connection, postgres_url: str
) -> None:
    """Two servers writing at once, each in transactions of its own, while a third
    merges: every passage is indexed once and ranks as FTS5 ranks it."""
    rows = keyword_copy.chunk_rows(library.db.conn)
    keyword_copy.copy_store(library.db.conn, pg)  # the library's rows, no keyword rows yet
    halves = [rows[0::2], rows[1::2]]
    start = threading.Barrier(3)
    failures: list[BaseException] = []

    def write(half: list[tuple]) -> None:
        try:
            with _connect(postgres_url) as conn:
                start.wait()
                for at in range(0, len(half), 7):
                    with conn.transaction():
                        keyword.add_index_rows(
                            conn, [(r[0], r[2], r[3]) for r in half[at : at + 7]]
                        )
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    def merge_meanwhile() -> None:
        try:
            start.wait()
            keyword_merge.merge(lambda: _connect(postgres_url), part_passages=64)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(h,)) for h in halves]
    threads.append(threading.Thread(target=merge_meanwhile))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert pg.execute("SELECT COUNT(*) FROM kw_passages").fetchone()[0] == len(rows)
    assert keyword_copy.mirror(library.db.conn, pg) == (0, 0)  # and the documents' rows
    assert _differences(library, pg) == []
    keyword_merge.merge(lambda: _connect(postgres_url), part_passages=64)
    assert _differences(library, pg) == []


def test_what_a_search_derives_is_kept_while_the_database_is_unchanged() -> None:
    """``per_version`` builds once per change stamp (the engine's ``change_stamp``), as
    the SQLite index keeps it per data version; without a stamp, every time."""
    stamp = [1]
    builds: list[int] = []

    def build() -> int:
        builds.append(stamp[0])
        return len(builds)

    index = PostgresKeywordIndex(lambda: None, stamp=lambda: stamp[0])  # type: ignore[arg-type,return-value]
    assert [index.per_version("relations", build) for _ in range(3)] == [1, 1, 1]
    stamp[0] = 2
    assert index.per_version("relations", build) == 2
    unstamped = PostgresKeywordIndex(lambda: None)  # type: ignore[arg-type,return-value]
    assert [unstamped.per_version("relations", build) for _ in range(2)] == [3, 4]
