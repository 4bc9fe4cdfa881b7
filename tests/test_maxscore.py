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
Cite = Callable[[Sequence[str], Sequence[int]], dict[int, int] | None]


@pytest.fixture(autouse=True)
def always_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every question pruned, however short its lists: what the tests below compare
    (a question under ``FULL_BELOW`` postings is otherwise scored whole, the reference)."""
    monkeypatch.setattr(maxscore, "FULL_BELOW", 0)


# How a round merges its essential lists and looks passages up in a list: each way
# forced, and as sizes choose (``DENSE_SHARE``, ``GATHER_SHARE``, ``GATHER_PASSAGES``).
WAYS = {
    "sorted merge, binary searches": {"DENSE_SHARE": 0, "GATHER_SHARE": 0},
    "dense merge, lists read against a mask": {
        "DENSE_SHARE": 10**9,
        "GATHER_SHARE": 10**9,
        "GATHER_PASSAGES": 10**9,
    },
    "as sizes choose": {},
}


@pytest.fixture(params=list(WAYS))
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every way of merging and looking up must give the same bits."""
    for name, value in WAYS[request.param].items():
        monkeypatch.setattr(maxscore, name, value)
    return request.param


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
def test_the_pruned_top_is_the_full_scorings_to_the_last_bit(seed: int, way: str) -> None:
    """Generated postings, 40 questions a seed, tops of 1, 10 and 60 documents, each
    way of merging lists and looking passages up."""
    index = Postings(seed)
    for _ in range(40):
        terms = index.question()
        for documents in (1, 10, 60):
            want = _full(index, terms, documents)
            got = maxscore.top_documents(terms, index.norm, documents, index.select(documents))
            assert got == want, (seed, documents, way)


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


# -- the document leg's citations -------------------------------------------------------


def _cited_full(
    index: Postings,
    terms: list[maxscore.TermList],
    document_ids: list[int],
    extra: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> dict[int, int]:
    """The citations as both stores found them before: every matching passage scored
    (``full_scores``, the dead zeroed), the documents' kept, the delta's beside them."""
    scores = maxscore.full_scores(terms, index.norm)
    scores[~index.live] = 0.0
    at = np.flatnonzero(scores)
    chunk_ids = np.concatenate([index.chunk_ids[at], extra[0]])
    doc_ids = np.concatenate([index.doc_ids[at], extra[1]])
    values = np.concatenate([scores[at], extra[2]])
    keep = np.isin(doc_ids, np.asarray(document_ids, dtype=np.int64))
    chunk_ids, doc_ids = chunk_ids[keep], doc_ids[keep]
    ranked = topk.best_sorted(chunk_ids, doc_ids, values[keep], len(document_ids))
    at_doc = dict(zip(chunk_ids.tolist(), doc_ids.tolist(), strict=True))
    return {at_doc[chunk_id]: chunk_id for chunk_id, _score in ranked}


def _delta(
    index: Postings, terms: list[maxscore.TermList], whole: np.ndarray, first: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The delta's passages, ``(chunk ids, doc ids, scores)``: the documents ``whole``
    rewritten (all their segment passages dead) with new passages at new ids, two of
    them tied; the documents ``first`` with their first passage rewritten (dead in the
    segment, in the delta under the same id, as SQLite keeps it) scoring exactly as the
    document's best live passage: a tie across segment and delta, broken by chunk id."""
    scores = maxscore.full_scores(terms, index.norm)
    scores[~index.live] = 0.0
    top = int(index.chunk_ids.max()) + 1
    chunk_ids, doc_ids, values = [], [], []
    for document in whole.tolist():
        own = np.flatnonzero(index.doc_ids == document)
        index.live[own] = False
        tied = float(index.rng.random() * 20)
        for score in (tied, float(index.rng.random() * 20), tied):
            chunk_ids.append(top + len(chunk_ids))
            doc_ids.append(document)
            values.append(score)
    for document in first.tolist():
        own = np.flatnonzero(index.doc_ids == document)
        if len(own) < 2 or not index.live[own[0]] or scores[own[1:]].max() == 0:
            continue
        index.live[own[0]] = False
        chunk_ids.append(int(index.chunk_ids[own[0]]))
        doc_ids.append(document)
        values.append(float(scores[own[1:]].max()))
    return (
        np.array(chunk_ids, dtype=np.int64),
        np.array(doc_ids, dtype=np.int64),
        np.array(values, dtype=np.float64),
    )


@pytest.mark.parametrize("seed", range(6))
def test_citations_score_only_the_cited_documents_to_the_same_bits(seed: int, way: str) -> None:
    """The document leg's best passage per document, from the documents' own passages
    (``document_scores``), equals the full scoring's: the same chunk per document (ties
    to the lowest chunk id), the same scores bit for bit, over tombstoned passages,
    documents wholly in the delta, documents no passage of which matches, repeated
    words and document ids not in the segment."""
    index = Postings(seed, passages=8_000)
    passages = maxscore.ByDocument(index.doc_ids)
    documents = int(index.doc_ids.max()) + 1
    ties = 0
    for q in range(30):
        terms = index.question()
        if q % 3 == 0:  # a repeated word, as a question may hold one
            terms.append(terms[0])
        matching = maxscore.full_scores(terms, index.norm) > 0
        unmatched = np.setdiff1d(index.doc_ids, index.doc_ids[matching])
        cited = index.rng.choice(documents, index.rng.integers(1, 120), replace=False)
        cited = np.concatenate([cited, unmatched[:3], [documents + 5]])  # unknown id too
        live = index.live.copy()
        extra = _delta(index, terms, cited[:3], cited[3:20])
        ids = cited.tolist()
        want = _cited_full(index, terms, ids, extra)
        at, values = maxscore.document_scores(
            terms, index.norm, passages, ids, np.flatnonzero(~index.live)
        )
        full = maxscore.full_scores(terms, index.norm)
        assert (values == full[at]).all() and (values > 0).all()  # bit for bit
        assert index.live[at].all() and np.isin(index.doc_ids[at], cited).all()
        scored = full > 0
        every = np.flatnonzero(np.isin(index.doc_ids, cited) & index.live & scored)
        assert at.tolist() == every.tolist()
        chunk_ids = np.concatenate([index.chunk_ids[at], extra[0]])
        doc_ids = np.concatenate([index.doc_ids[at], extra[1]])
        got = topk.best_passage_of(chunk_ids, doc_ids, np.concatenate([values, extra[2]]), ids)
        assert got == want, (seed, q, way)
        assert not set(got) & set(unmatched[:3].tolist()) - set(extra[1].tolist())
        rewritten = set(cited[3:20].tolist()) & set(extra[1].tolist())
        ties += sum(got[d] in extra[0] for d in rewritten)  # won on chunk id alone
        index.live = live
    assert ties > 0


def test_no_cited_document_and_no_passage_give_nothing() -> None:
    index = Postings(seed=5, passages=500)
    terms = index.question()
    passages = maxscore.ByDocument(index.doc_ids)
    at, values = maxscore.document_scores(terms, index.norm, passages, [])
    assert len(at) == len(values) == 0
    at, values = maxscore.document_scores([], index.norm, passages, [0, 1, 2])
    assert len(at) == len(values) == 0
    empty = np.zeros(0, dtype=np.int64)
    assert topk.best_passage_of(empty, empty, np.zeros(0), [1, 2]) == {}


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


def _citation_differences(lib: Library, cite: Cite, questions: list[str]) -> list[str]:
    """Questions whose citations (each of FTS5's top 40 documents as wholes → its best
    passage) differ from FTS5's own ``best_passage_of``."""
    wrong = []
    for text in questions:
        query = parse_query(text)
        expression = query.match_expression()
        assert expression is not None
        ids = [d for d, _ in lib.fts.best_documents(expression, 40)]
        if cite(query.match_units(), ids) != lib.fts.best_passage_of(expression, ids):
            wrong.append(text)
    return wrong


def _document_differences(
    lib: Library, index: PostgresKeywordIndex, questions: list[str]
) -> list[str]:
    """Questions whose documents ranked as wholes (the document leg's ranking: MaxScore
    over the PostgreSQL documents' index) differ from FTS5's ``docs_fts`` top."""
    wrong = []
    for text in questions:
        expression = parse_query(text).match_expression()
        assert expression is not None
        for documents in (1, 10, 40):
            if index.best_documents(expression, documents) != lib.fts.best_documents(
                expression, documents
            ):
                wrong.append(f"{documents}: {text}")
    return wrong


def test_both_stores_rank_as_fts5_on_a_generated_library(
    generated: tuple[Library, Path, np.random.Generator], postgres_url: str, way: str
) -> None:
    """issue 24: the SQLite segment and the PostgreSQL index, pruned, give FTS5's top
    1, 10 and 40 for 60 questions, PostgreSQL's documents ranked as wholes FTS5's
    ``docs_fts`` top, and FTS5's citation of each of its top 40 documents as wholes:
    built, then with new, rewritten and deleted notes in the delta and tombstones;
    each way of merging lists and looking passages up."""
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
        citing = {
            "sqlite": lib.fts.segment_best_passages,
            "postgresql": index.segment_best_passages,
        }
        for name, rank in stores.items():
            assert _fts5_differences(lib, rank, questions) == [], name
            assert _citation_differences(lib, citing[name], questions) == [], name
        assert _document_differences(lib, index, questions) == []

        _write_notes(notes, rng, 4, start=60)  # new notes: the delta
        _write_notes(notes, rng, 2, start=0)  # rewritten: tombstones and the delta
        for gone in ("note010.md", "note011.md"):
            (notes / gone).unlink()
        lib.folders.sync()
        keyword_copy.mirror(lib.db.conn, pg)
        assert pg.execute("SELECT COUNT(*) FROM kw_dead").fetchone()[0] > 0
        for name, rank in stores.items():
            assert _fts5_differences(lib, rank, questions) == [], name
            assert _citation_differences(lib, citing[name], questions) == [], name
        assert _document_differences(lib, index, questions) == []
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
