"""MaxScore's top-k (``index/maxscore.py``) is the full scoring's top-k to the last bit.

Issue 24: at 1M passages scoring every posting of a question's common words missed the
keyword p95 target, so both stores rank their top documents by MaxScore. Pruning must
never change an answer: the same documents, the same best passage of each, the same
scores (compared with ``==``, not a tolerance).

Two levels:
- the mechanism over generated postings (fixed seeds): Zipf-like document frequencies,
  so questions mix rare and very common words, several passages per document,
  tombstoned passages and a filter in the store's ``select``, repeated words, tops of
  1 to 60 documents — against ``full_scores`` ranked by the same ``select``;
- both stores on a generated library: the SQLite segment (and its delta) and the
  PostgreSQL index (merged, then with a delta and deletes) against FTS5's own bm25 over
  the full OR, which knows nothing of the pruning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kb_mcp.index import maxscore, topk
from kb_mcp.index.bm25 import bm25_idf, length_norm
from kb_mcp.index.postgres import keyword, keyword_copy, keyword_merge
from kb_mcp.index.postgres.keyword_reader import PostgresKeywordIndex
from kb_mcp.library import Library
from kb_mcp.search.query import parse_query
from kb_mcp.settings import Settings

PRESELECT = 8
Found = list[tuple[int, float]]
Select = Callable[[np.ndarray, np.ndarray], Found]
Rank = Callable[[Sequence[str], int], Found | None]


@pytest.fixture(autouse=True)
def always_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every question pruned, however short its lists: what the tests below compare
    (a question under ``FULL_BELOW`` postings is otherwise scored whole, the reference)."""
    monkeypatch.setattr(maxscore, "FULL_BELOW", 0)


class Postings:
    """A generated index: ``passages`` passages in documents of one to five passages,
    a vocabulary whose i-th word is held by about ``share / (i + 1)`` of them."""

    def __init__(self, seed: int, passages: int = 20_000, words: int = 60) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.passages = passages
        self.norm = length_norm(rng.integers(1, 600, passages).astype(np.float64), 180.0)
        self.chunk_ids = np.cumsum(rng.integers(1, 4, passages)).astype(np.int64)
        self.doc_ids = np.cumsum(rng.random(passages) < 0.4).astype(np.int64)
        self.live = rng.random(passages) > 0.02  # tombstoned passages: select drops them
        self.lists = []
        for i in range(words):
            df = max(1, int(passages * 0.9 / (i + 1) ** 1.2))
            positions = np.sort(rng.choice(passages, df, replace=False)).astype(np.uint32)
            heads = rng.integers(0, 3, df)
            bodies = rng.integers(1, 9, df) * (rng.random(df) < 0.9)
            self.lists.append((positions, (10.0 * heads + bodies).astype(np.float64)))

    def question(self) -> list[maxscore.TermList]:
        """One to twelve words (a word may repeat, as a question's may), query order."""
        picked = self.rng.integers(0, len(self.lists), self.rng.integers(1, 13))
        return [
            maxscore.TermList(bm25_idf(len(self.lists[w][0]), self.passages), *self.lists[w])
            for w in picked
        ]

    def select(self, documents: int, handed: list[int] | None = None) -> Select:
        """A store's ``select``: live passages only, best passage per document."""

        def pick(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
            if handed is not None:
                handed.append(len(at))
            keep = self.live[at]
            at, values = at[keep], values[keep]
            return topk.best_per_document(
                self.chunk_ids[at], self.doc_ids[at], values, documents, PRESELECT
            )

        return pick


def _full(index: Postings, terms: list[maxscore.TermList], documents: int) -> Found:
    scores = maxscore.full_scores(terms, index.norm)
    at = np.flatnonzero(scores)
    return index.select(documents)(at, scores[at])


@pytest.mark.parametrize("seed", range(8))
def test_the_pruned_top_is_the_full_scorings_to_the_last_bit(seed: int) -> None:
    """Generated postings, 40 questions a seed, tops of 1, 10 and 60 documents."""
    index = Postings(seed)
    for _ in range(40):
        terms = index.question()
        for documents in (1, 10, 60):
            want = _full(index, terms, documents)
            got = maxscore.top_documents(terms, index.norm, documents, index.select(documents))
            assert got == want, (seed, documents)


def test_a_common_word_is_looked_up_not_scored_whole() -> None:
    """The point of it: a rare word and a word nearly every passage holds hand the
    store's ranking a few hundred passages, not the common word's twenty thousand."""
    index = Postings(seed=11)
    rare, common = index.lists[-1], index.lists[0]
    assert len(common[0]) > 15_000 and len(rare[0]) < 300
    terms = [maxscore.TermList(bm25_idf(len(p), index.passages), p, f) for p, f in (common, rare)]
    handed: list[int] = []
    got = maxscore.top_documents(terms, index.norm, 10, index.select(10, handed))
    assert got == _full(index, terms, 10)
    assert max(handed) < 1_000


def test_fewer_matching_documents_than_asked_gives_them_all() -> None:
    """A top larger than the documents that match: every one of them, as in full."""
    index = Postings(seed=3, passages=2_000)
    terms = [maxscore.TermList(bm25_idf(len(p), 2_000), p, f) for p, f in index.lists[-3:]]
    got = maxscore.top_documents(terms, index.norm, 500, index.select(500))
    assert got == _full(index, terms, 500)
    assert maxscore.top_documents([], index.norm, 10, index.select(10)) == []


# -- both stores on a generated library ------------------------------------------------

VOCABULARY = 400
WORDS = [f"w{i:03d}" for i in range(VOCABULARY)]


def _zipf_text(rng: np.random.Generator, length: int) -> str:
    ranks = np.minimum(rng.zipf(1.3, length) - 1, VOCABULARY - 1)
    return " ".join(WORDS[r] for r in ranks)


def _write_notes(folder: Path, rng: np.random.Generator, files: int, start: int = 0) -> None:
    folder.mkdir(exist_ok=True)
    for f in range(start, start + files):
        sections = [f"# note {f} {_zipf_text(rng, 3)}\n"]
        for s in range(12):
            sections.append(f"## part {s} {_zipf_text(rng, 2)}\n\n{_zipf_text(rng, 40)}\n")
        (folder / f"note{f:03d}.md").write_text("\n".join(sections), encoding="utf-8")


def _questions(rng: np.random.Generator, count: int) -> list[str]:
    """Questions of 1 to 10 words, common and rare alike (ranks drawn uniformly)."""
    return [
        " ".join(WORDS[r] for r in rng.integers(0, VOCABULARY, rng.integers(1, 11)))
        for _ in range(count)
    ]


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[tuple[Library, Path, np.random.Generator]]:
    rng = np.random.default_rng(24)
    _write_notes(tmp_path / "notes", rng, 60)
    lib = Library(Settings(home=tmp_path / "home", embedder="none"))
    lib.folders.add_folder(tmp_path / "notes")
    lib.folders.sync()
    lib.fts.ensure_current()
    yield lib, tmp_path / "notes", rng
    lib.close()


def _fts5_differences(lib: Library, rank: Rank, questions: list[str]) -> list[str]:
    """Questions whose top (ids or scores, exactly) differ from FTS5's full OR."""
    wrong = []
    for text in questions:
        query = parse_query(text)
        expression = query.match_expression()
        assert expression is not None
        for documents in (1, 10, 40):
            if rank(query.match_units(), documents) != lib.fts.best_per_document(
                expression, documents
            ):
                wrong.append(f"{documents}: {text}")
    return wrong


def test_both_stores_rank_as_fts5_on_a_generated_library(
    generated: tuple[Library, Path, np.random.Generator], postgres_url: str
) -> None:
    """issue 24: the SQLite segment and the PostgreSQL index, pruned, give FTS5's top
    1, 10 and 40 for 60 questions: built, then with new, rewritten and deleted notes in
    the delta and tombstones."""
    lib, notes, rng = generated
    assert lib.fts.chunk_count() > 600
    questions = _questions(rng, 60)
    assert lib.fts.refresh_segment(min_chunks=0) == lib.fts.chunk_count()
    keyword_copy.create_library(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as pg:
        keyword_copy.mirror(lib.db.conn, pg)
        keyword_merge.merge(lambda: psycopg.connect(postgres_url, autocommit=True))
        keyword_merge.merge(
            lambda: psycopg.connect(postgres_url, autocommit=True), tables=keyword.DOCUMENTS
        )
        index = PostgresKeywordIndex(lambda: pg)
        stores = {
            "sqlite": lib.fts.segment_best_per_document,
            "postgresql": index.segment_best_per_document,
        }
        for name, rank in stores.items():
            assert _fts5_differences(lib, rank, questions) == [], name

        _write_notes(notes, rng, 4, start=60)  # new notes: the delta
        _write_notes(notes, rng, 2, start=0)  # rewritten: tombstones and the delta
        for gone in ("note010.md", "note011.md"):
            (notes / gone).unlink()
        lib.folders.sync()
        keyword_copy.mirror(lib.db.conn, pg)
        assert pg.execute("SELECT COUNT(*) FROM kw_dead").fetchone()[0] > 0
        for name, rank in stores.items():
            assert _fts5_differences(lib, rank, questions) == [], name
        source = lib.db.conn.execute("SELECT id FROM sources").fetchone()[0]
        for text in questions[:20]:  # scoped: PostgreSQL's source filter inside select
            expression = parse_query(text).match_expression()
            assert index.best_per_document(expression, 10, source_id=source) == (
                lib.fts.best_per_document(expression, 10, source_id=source)
            ), text


def test_a_question_of_short_lists_is_scored_whole_without_pruning_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under ``FULL_BELOW`` postings the rounds cost more than they save: ``select`` is
    handed every matching passage at once, the full scoring's answer."""
    monkeypatch.setattr(maxscore, "FULL_BELOW", 20_000)
    index = Postings(seed=3, passages=4_000)
    terms = [maxscore.TermList(bm25_idf(len(p), index.passages), p, f) for p, f in index.lists[:4]]
    assert sum(len(t.positions) for t in terms) < maxscore.FULL_BELOW
    handed: list[int] = []
    got = maxscore.top_documents(terms, index.norm, 10, index.select(10, handed))
    matching = np.flatnonzero(maxscore.full_scores(terms, index.norm))  # freq 0 adds nothing
    assert handed == [len(matching)]
    assert got == _full(index, terms, 10)
