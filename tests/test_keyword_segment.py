"""The keyword postings segment (issue 10, keyword search): ranking from the derived
postings must answer exactly as FTS5's own bm25 does, before and after the library
changes under it (its delta), and after a rebuild.

A real corpus: the repository's own documentation (docs/*.md, README.md), plus a few
Chinese notes so CJK bigram phrases are ranked too, synced into a real ``kb.db``. The
library is far below ``SEGMENT_MIN_CHUNKS``, so the tests build it explicitly.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from library_checks import segment_mismatches

from kb_mcp.index import postings
from kb_mcp.library import Library
from kb_mcp.search.query import parse_query
from kb_mcp.settings import Settings

REPO = Path(__file__).resolve().parents[1]
CHINESE = {
    "cache.md": "# 缓存\n\n## 缓存策略\n\n缓存可以减少数据库的读取次数。"
    "常见的缓存策略有最近最少使用。\n",
    "index.md": "# 索引\n\n## 倒排索引\n\n倒排索引记录每个词出现在哪些文档中，"
    "搜索引擎用它快速找到文档。\n",
    "search.md": "# 搜索\n\n## 全文搜索\n\n全文搜索按相关性排序结果。索引越新，搜索结果越准确。\n",
}
QUERIES = (
    "keyword search speed bm25",
    "vector embedding model passages",
    "freshness watcher polling fallback",
    "sqlite migration schema version",
    "peak memory RSS server",
    "citation line numbers",
    "倒排索引的作用是什么",
    "缓存策略",
    "搜索结果 ranking",
)


def _corpus(folder: Path) -> None:
    folder.mkdir()
    for doc in [*(REPO / "docs").glob("*.md"), REPO / "README.md"]:
        shutil.copy(doc, folder / doc.name)
    for name, text in CHINESE.items():
        (folder / name).write_text(text, encoding="utf-8")


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Library]:
    _corpus(tmp_path / "notes")
    lib = Library(Settings(home=tmp_path / "home", embedder="none"))
    lib.folders.add_folder(tmp_path / "notes")
    lib.folders.sync()
    lib.fts.ensure_current()
    yield lib
    lib.close()


def _delta(lib: Library) -> int:
    size = postings.delta_size(lib.db.conn)
    assert size is not None
    return size[1]


def test_keyword_segment_ranks_as_fts5_on_a_real_corpus(library: Library) -> None:
    """issue 10: the numpy-scored segment gives FTS5's bm25 ranking, scores and all."""
    assert library.fts.segment_best_per_document(["search"], 10) is None  # not built yet
    built = library.fts.refresh_segment(min_chunks=0)
    assert built is not None and built == library.fts.chunk_count()
    assert segment_mismatches(library, QUERIES) == []
    top = library.fts.segment_best_per_document(parse_query("倒排索引").match_units(), 3)
    assert top  # the bigram phrases are keyed, so CJK queries take the segment too
    assert library.lookup.search("倒排索引", mode="keyword").hits[0].title == "索引"


def test_keyword_segment_search_results_unchanged(library: Library) -> None:
    """issue 10: the public search answers the same with the segment as without it."""
    before = [library.lookup.search(q, mode="keyword", top_k=10) for q in QUERIES]
    library.fts.refresh_segment(min_chunks=0)
    after = [library.lookup.search(q, mode="keyword", top_k=10) for q in QUERIES]
    assert [[(h.cite, h.score) for h in r.hits] for r in after] == [
        [(h.cite, h.score) for h in r.hits] for r in before
    ]


def test_keyword_segment_in_parts_ranks_the_same(library: Library) -> None:
    """issue 10: a segment written in several parts (bounded build memory) reads back
    whole: a term's rows are joined in part order."""
    built = postings.build(library.db, part_passages=16)
    parts = library.db.conn.execute("SELECT MAX(part) FROM kw_postings").fetchone()[0]
    assert parts >= built // 16 - 1 > 1
    assert segment_mismatches(library, QUERIES) == []


def test_keyword_segment_sees_added_deleted_and_replaced_chunks(
    library: Library, tmp_path: Path
) -> None:
    """issue 10: chunks written or deleted after the build (the delta) are ranked as FTS5
    ranks them: a new file is found, a deleted one is not, an edit shows its new text."""
    library.fts.refresh_segment(min_chunks=0)
    notes = tmp_path / "notes"
    (notes / "zeppelin.md").write_text("# Airships\n\nThe zeppelin keyword search note.\n")
    (notes / "cache.md").unlink()
    edited = notes / "index.md"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n## 新节\n\n飞艇 quokka 搜索。\n")
    library.folders.sync()
    assert _delta(library) > 0
    extra = ("zeppelin search", "缓存策略", "quokka 飞艇", "飞艇")
    assert segment_mismatches(library, QUERIES + extra) == []
    assert library.lookup.search("zeppelin", mode="keyword").hits[0].title == "Airships"
    assert library.fts.segment_best_per_document(parse_query("缓存").match_units(), 5) == []
    assert library.lookup.search("quokka", mode="keyword").hits[0].title == "索引"


def test_keyword_segment_rebuilds_when_the_delta_grows(library: Library, tmp_path: Path) -> None:
    """issue 10: a delta past its threshold is folded into a new segment, same answers."""
    library.fts.refresh_segment(min_chunks=0)
    (tmp_path / "notes" / "README.md").unlink()
    library.folders.sync()
    delta = _delta(library)
    assert delta > 0
    assert library.fts.refresh_segment(min_chunks=0, delta_min=delta) is None  # not due
    assert library.fts.refresh_segment(min_chunks=0, delta_min=0) == library.fts.chunk_count()
    assert _delta(library) == 0
    assert segment_mismatches(library, QUERIES) == []


def test_keyword_segment_dropped_by_a_rebuild_of_the_index(library: Library) -> None:
    """issue 10: `reindex --rebuild` renumbers chunks, so the segment goes with the old
    index and search falls back to FTS5 until the next build."""
    library.fts.refresh_segment(min_chunks=0)
    library.writing.reindex(rebuild=True)
    assert postings.delta_size(library.db.conn) is None
    assert library.fts.segment_best_per_document(["search"], 10) is None
    assert library.lookup.search("keyword search speed bm25", mode="keyword").hits


def test_keyword_segment_not_built_for_a_small_library(library: Library) -> None:
    """issue 10: below ``SEGMENT_MIN_CHUNKS`` a sync leaves the segment out."""
    assert library.fts.chunk_count() < postings.SEGMENT_MIN_CHUNKS
    assert not postings.refresh_due(library.db.conn)
    assert postings.delta_size(library.db.conn) is None


def test_keyword_segment_rebuilt_by_another_connection_is_read_anew(
    library: Library, tmp_path: Path
) -> None:
    """issue 10: a segment rebuilt by another process (another connection) replaces the
    arrays this one cached; its searches rank from the new build, as FTS5 does."""
    library.fts.refresh_segment(min_chunks=0)
    assert segment_mismatches(library, QUERIES) == []  # the first build's arrays are cached now
    (tmp_path / "notes" / "README.md").unlink()
    (tmp_path / "notes" / "zeppelin.md").write_text("# Airships\n\nA zeppelin search note.\n")
    other = Library(Settings(home=tmp_path / "home", embedder="none"))
    try:
        other.folders.sync()
        assert other.fts.refresh_segment(min_chunks=0, delta_min=0) is not None
    finally:
        other.close()
    assert _delta(library) == 0
    assert segment_mismatches(library, (*QUERIES, "zeppelin search")) == []
    assert library.lookup.search("zeppelin", mode="keyword").hits[0].title == "Airships"


def test_keyword_segment_cites_each_document_by_the_passage_fts5_picks(
    library: Library, tmp_path: Path
) -> None:
    """issue 22: the document leg cites each document it ranks by its best passage; from
    the segment that is the passage FTS5 picks, ties and all, also for chunks written
    after the build (the delta)."""
    library.fts.refresh_segment(min_chunks=0)
    notes = tmp_path / "notes"
    (notes / "zeppelin.md").write_text("# Airships\n\nThe zeppelin keyword search note.\n")
    library.folders.sync()
    assert _delta(library) > 0
    checked = 0
    for text in (*QUERIES, "zeppelin search"):
        query = parse_query(text)
        expression = query.match_expression()
        assert expression is not None
        ranked = [doc for doc, _score in library.fts.best_documents(expression, 100)]
        from_segment = library.fts.segment_best_passages(query.match_units(), ranked)
        assert from_segment == library.fts.best_passage_of(expression, ranked)
        checked += len(ranked)
    assert checked > 50
