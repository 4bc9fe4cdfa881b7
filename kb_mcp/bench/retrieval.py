"""``kb-mcp bench retrieval``: score a BEIR-layout collection through the real library.

The corpus is written as files into ``<home>/bench-corpus/<dataset>/`` and ingested as a
folder source, the same path a user's notes take (walk, read, frontmatter dates and
``supersedes``, chunking, FTS). Every query runs through ``library.lookup.search``, the engine
the MCP tool uses, so what is measured is what agents get. Golden-set classes with
rules of their own (abstention, retraction, hypothetical, citation, and any query naming
``stale`` docs) are scored by those rules; every class also gets the standard metrics, and
the report's ``macro`` is the mean over classes of each class's headline.
"""

from __future__ import annotations

import ast
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from kb_mcp.bench import metrics
from kb_mcp.bench.beir import BeirDoc, BeirSet, load_beir
from kb_mcp.errors import InvalidInput, SearchTimedOut
from kb_mcp.library import Library
from kb_mcp.search.engine import check_legs
from kb_mcp.settings import Settings
from kb_mcp.text.frontmatter import render_frontmatter

Progress = Callable[[int, int, str], None]
CORPUS_DIR = "bench-corpus"
RUN_DEPTH = 100  # results fetched per query: recall@100 needs 100


@dataclass(slots=True)
class QueryRun:
    query_id: str
    query_class: str | None
    ranked: list[str]
    texts: list[str]
    latency_ms: float
    fallback_reason: str | None = None  # set when the asked-for mode could not run
    embed_ms: float | None = None  # of latency_ms, the time spent embedding the question
    timed_out: bool = False  # passed the search deadline: scored as a miss (no results)
    scores: list[float] = field(default_factory=list)  # the engine's score of each ranked hit


@dataclass(slots=True)
class BenchReport:
    dataset: str
    split: str
    mode: str
    documents: int
    queries: int
    metrics: dict[str, float]
    per_class: dict[str, dict[str, float]]
    ingest_s: float
    latency_ms: dict[str, float]
    abstention: dict[str, float] = field(default_factory=dict)
    fallback: dict[str, Any] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    legs: tuple[str, ...] | None = None  # the legs named instead of the mode's plan
    macro: float | None = None  # see macro_score; None without query classes
    timeouts: int = 0  # searches stopped by the deadline, scored as misses
    runs: list[QueryRun] = field(default_factory=list)  # each query's answer (write_runs)

    def to_json(self) -> dict[str, Any]:
        macro = {} if self.macro is None else {"macro": self.macro}
        return {
            "dataset": self.dataset,
            "split": self.split,
            "mode": self.mode,
            "legs": list(self.legs) if self.legs else None,
            "documents": self.documents,
            "queries": self.queries,
            "metrics": self.metrics,
            "per_class": self.per_class,
            **macro,
            "ingest_s": round(self.ingest_s, 2),
            "latency_ms": self.latency_ms,
            "abstention": self.abstention,
            "fallback": self.fallback,
            "embedding": self.embedding,
            "timeouts": self.timeouts,
        }


def _looks_like_code(doc: BeirDoc) -> bool:
    """A title-less doc whose text parses as Python with a definition is a code file."""
    if doc.title or not doc.text.lstrip().startswith(("def ", "class ", "async def ", "@")):
        return False
    try:
        ast.parse(doc.text)
    except (SyntaxError, ValueError):
        return False
    return True


def doc_file_name(doc: BeirDoc) -> str:
    """File name for a doc: its id, quoted to be a safe name, with a fitting suffix."""
    path = doc.metadata.get("path")
    suffix = Path(str(path)).suffix if path else (".py" if _looks_like_code(doc) else ".md")
    return quote(doc.id, safe="") + (suffix or ".md")


def doc_id_from_path(path: str) -> str:
    return unquote(Path(path).name.rsplit(".", 1)[0])


def _render_doc(doc: BeirDoc, names: Mapping[str, str]) -> str:
    if not doc_file_name(doc).endswith(".md"):
        return doc.text
    meta: dict[str, Any] = {"title": doc.title or doc.id}
    if doc.metadata.get("date"):
        meta["date"] = str(doc.metadata["date"])
    supersedes = [names[s] for s in doc.metadata.get("supersedes", ()) if s in names]
    if supersedes:
        meta["supersedes"] = supersedes
    # Frontmatter a real file would carry (`status: withdrawn`, `replaces: a.md`), written
    # as given: the bench reads none of it, the engine under test may.
    for key, value in doc.metadata.get("frontmatter", {}).items():
        meta.setdefault(key, value)
    return render_frontmatter(meta, doc.text)


def write_corpus(beir: BeirSet, folder: Path) -> None:
    """Materialise the corpus as files (rewritten only when their text changed)."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {d.id: doc_file_name(d) for d in beir.docs}
    for doc in beir.docs:
        target = folder / names[doc.id]
        text = _render_doc(doc, names)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def ingest(library: Library, beir: BeirSet, progress: Progress | None) -> float:
    """Write, register and sync the corpus, then retract what is marked retracted."""
    started = time.perf_counter()
    folder = library.home / CORPUS_DIR / beir.name
    write_corpus(beir, folder)
    if beir.name not in {s.name for s in library.folders.folder_sources()}:
        library.folders.add_folder(folder, beir.name)
    library.folders.sync(beir.name, progress=progress)
    retracted = [d for d in beir.docs if d.metadata.get("retracted")]
    for doc in retracted:
        (folder / doc_file_name(doc)).unlink(missing_ok=True)
    if retracted:
        library.folders.sync(beir.name)
    return time.perf_counter() - started


def embed(library: Library, progress: Progress | None) -> dict[str, Any]:
    """Embed every passage before the queries run (as ``kb-mcp add`` waits for vectors);
    {} without an embedder. Reports passages embedded per second."""
    report = library.vectors.embed_pending(progress=progress)
    if report is None:
        return {}
    rate = report.embedded / report.seconds if report.seconds else 0.0
    return {
        "passages": report.embedded,
        "seconds": round(report.seconds, 1),
        "per_s": round(rate, 1),
        "error": report.error,
    }


def run_queries(
    library: Library,
    beir: BeirSet,
    mode: str,
    depth: int,
    legs: Sequence[str] | None = None,
) -> list[QueryRun]:
    runs = []
    for query in beir.queries:
        started = time.perf_counter()
        fallback = embed_ms = None
        timed_out = False
        try:
            result = library.lookup.search(
                query.text, top_k=depth, mode=mode, source=beir.name, legs=legs
            )
            hits, fallback = result.hits, (result.reason if result.fallback else None)
            embed_ms = result.embed_ms
        except InvalidInput:  # e.g. a blank query: the tool refuses it, the bench scores 0
            hits = ()
        except SearchTimedOut:  # one slow search under load must not lose the whole run
            hits, timed_out = (), True
        elapsed = (time.perf_counter() - started) * 1000
        ranked = [doc_id_from_path(hit.path or "") for hit in hits]
        texts = [h.text for h in hits]
        scores = [h.score for h in hits]
        runs.append(
            QueryRun(
                query.id,
                query.query_class,
                ranked,
                texts,
                elapsed,
                fallback,
                embed_ms,
                timed_out,
                scores,
            )
        )
    return runs


def _fallback(runs: list[QueryRun]) -> dict[str, Any]:
    """How many queries fell back from the asked-for mode, and the first reason given: a
    hybrid figure that is really a keyword one must say so."""
    fell = [r for r in runs if r.fallback_reason]
    if not fell:
        return {}
    # An empty answer's reason also says why it is empty: show one that answered.
    shown = next((r for r in fell if r.ranked), fell[0])
    return {"queries": len(fell), "reason": shown.fallback_reason}


def _scores_dict(scores: metrics.Scores) -> dict[str, float]:
    return {
        "ndcg@10": round(scores.ndcg10, 4),
        "recall@10": round(scores.recall10, 4),
        "recall@100": round(scores.recall100, 4),
        "mrr@10": round(scores.mrr10, 4),
        "hit@10": round(scores.hit10, 4),
        "n": scores.n,
    }


def _class_rule(beir: BeirSet, run: QueryRun) -> float | None:
    """The class-specific score of one query, for classes that have their own rule."""
    docs = {d.id: d for d in beir.docs}
    rels = beir.qrels.get(run.query_id, {})
    query = next(q for q in beir.queries if q.id == run.query_id)
    stale = query.metadata.get("stale")
    if stale:
        return current_above_stale(run.ranked, rels, stale)
    if run.query_class == "retraction":
        return metrics.avoids_all(
            run.ranked, {i for i, d in docs.items() if d.metadata.get("retracted")}
        )
    if run.query_class == "hypothetical":
        settled = max(rels, key=lambda d: rels[d]) if rels else ""
        return metrics.ranks_above(
            run.ranked, settled, {i for i, d in docs.items() if d.metadata.get("speculative")}
        )
    if run.query_class == "citation":
        evidence = str(query.metadata.get("evidence", ""))
        relevant = [t for doc, t in zip(run.ranked, run.texts, strict=True) if rels.get(doc, 0) > 0]
        return 1.0 if relevant and evidence and evidence in relevant[0] else 0.0
    return None


def current_above_stale(ranked: list[str], rels: Mapping[str, int], stale: list[str]) -> float:
    """1.0 when a doc of the query's top grade ranks above every ``stale`` doc.

    Scores golden2's retraction and supersession queries: the withdrawn notice or the
    old ADR may be retrieved, but the current answer must come first. A stale doc that
    was not retrieved counts as ranked below (``metrics.ranks_above``).
    """
    top = max((grade for grade in rels.values() if grade > 0), default=0)
    current = [doc for doc, grade in rels.items() if top and grade == top]
    return max((metrics.ranks_above(ranked, doc, set(stale)) for doc in current), default=0.0)


def macro_score(per_class: Mapping[str, Mapping[str, float]]) -> float | None:
    """Mean over classes of each class's headline: its ``rule`` if it has one, else
    nDCG@10. None for a set without classes (the public sets), where it means nothing."""
    if not per_class:
        return None
    heads = [row["rule"] if "rule" in row else row["ndcg@10"] for row in per_class.values()]
    return round(metrics.mean(heads), 4)


def _per_class(beir: BeirSet, runs: list[QueryRun]) -> dict[str, dict[str, float]]:
    classes: dict[str, list[QueryRun]] = {}
    for run in runs:
        if run.query_class:
            classes.setdefault(run.query_class, []).append(run)
    out: dict[str, dict[str, float]] = {}
    for name, members in sorted(classes.items()):
        qrels = {r.query_id: beir.qrels.get(r.query_id, {}) for r in members}
        row = _scores_dict(metrics.score_queries({r.query_id: r.ranked for r in members}, qrels))
        rule = [s for r in members if (s := _class_rule(beir, r)) is not None]
        if rule:
            row["rule"] = round(metrics.mean(rule), 4)
        if name == "abstention":
            row["rule"] = round(metrics.mean(0.0 if r.ranked else 1.0 for r in members), 4)
            row["n"] = len(members)
        out[name] = row
    return out


def _abstention(beir: BeirSet, runs: list[QueryRun]) -> dict[str, float]:
    """Empty answers where nothing is relevant, and false empties where something is."""
    absent = [r for r in runs if not any(v > 0 for v in beir.qrels.get(r.query_id, {}).values())]
    present = [r for r in runs if r not in absent]
    return {
        "abstained": round(metrics.mean(0.0 if r.ranked else 1.0 for r in absent), 4),
        "false_empty": round(metrics.mean(0.0 if r.ranked else 1.0 for r in present), 4),
        "absent_queries": len(absent),
    }


def run_retrieval_bench(
    dataset: Path,
    split: str,
    *,
    mode: str = "auto",
    home: Path | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
    top_k: int = 10,
    legs: Sequence[str] | None = None,
) -> BenchReport:
    """Ingest ``dataset`` (or reuse ``home``), run its ``split`` queries, score them.

    ``legs`` names the search legs to run instead of the mode's plan (each leg's
    contribution measured apart); validated before anything is ingested.
    """
    if legs is not None:
        legs = check_legs(legs)
    beir = load_beir(dataset, split)
    temp = None if home else Path(tempfile.mkdtemp(prefix="kb-mcp-bench-"))
    library_home = home or temp
    settings = settings or Settings(home=library_home)
    try:
        with Library(
            settings.with_overrides(
                home=library_home.resolve(), max_files_per_source=len(beir.docs) + 1
            )
        ) as lib:
            ingest_s = ingest(lib, beir, progress)
            wants_vectors = "vector" in legs if legs is not None else mode != "keyword"
            embedding = embed(lib, progress) if wants_vectors else {}
            runs = run_queries(lib, beir, mode, RUN_DEPTH, legs)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    overall = metrics.score_queries({r.query_id: r.ranked for r in runs}, beir.qrels)
    scores = _scores_dict(overall)
    judged = [r for r in runs if any(v > 0 for v in beir.qrels.get(r.query_id, {}).values())]
    scores[f"hit@{top_k}"] = round(
        metrics.mean(metrics.hit_at_k(r.ranked, beir.qrels[r.query_id], top_k) for r in judged), 4
    )
    latencies = [r.latency_ms for r in runs]
    embedded = [r for r in runs if r.embed_ms is not None]
    timing = {
        "p50": round(metrics.percentile(latencies, 50), 2),
        "p95": round(metrics.percentile(latencies, 95), 2),
    }
    if embedded:  # the question's embedding apart from the rest of the search
        rest = [r.latency_ms - (r.embed_ms or 0.0) for r in embedded]
        timing["embed_p50"] = round(
            metrics.percentile([r.embed_ms or 0.0 for r in embedded], 50), 2
        )
        timing["search_p50_without_embed"] = round(metrics.percentile(rest, 50), 2)
        timing["search_p95_without_embed"] = round(metrics.percentile(rest, 95), 2)
    per_class = _per_class(beir, runs)
    return BenchReport(
        dataset=beir.name,
        split=split,
        mode=mode,
        documents=len(beir.docs),
        queries=len(runs),
        metrics=scores,
        per_class=per_class,
        ingest_s=ingest_s,
        latency_ms=timing,
        abstention=_abstention(beir, runs),
        fallback=_fallback(runs),
        embedding=embedding,
        legs=legs,
        macro=macro_score(per_class),
        timeouts=sum(r.timed_out for r in runs),
        runs=runs,
    )


def report_table(report: BenchReport) -> str:
    """The printed table: overall metrics, then one row per query class."""
    keys = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "hit@10"]
    lines = [
        f"{report.dataset} ({report.split}, "
        + (f"legs {','.join(report.legs)}" if report.legs else f"mode {report.mode}")
        + f"): {report.documents} docs, "
        f"{report.queries} queries; ingest {report.ingest_s:.1f} s; search p50 "
        f"{report.latency_ms['p50']} ms, p95 {report.latency_ms['p95']} ms",
        f"{'class':<16}" + "".join(f"{k:>11}" for k in keys) + f"{'rule':>8}{'n':>6}",
        f"{'all':<16}"
        + "".join(f"{report.metrics[k]:>11.4f}" for k in keys)
        + f"{'':>8}{report.metrics['n']:>6}",
    ]
    for name, row in report.per_class.items():
        rule = f"{row['rule']:>8.3f}" if "rule" in row else f"{'':>8}"
        lines.append(
            f"{name:<16}" + "".join(f"{row[k]:>11.4f}" for k in keys) + rule + f"{row['n']:>6}"
        )
    if report.macro is not None:
        lines.append(
            f"{'macro':<16}{report.macro:>11.4f}  mean over {len(report.per_class)} classes "
            "of each class's rule, else its nDCG@10"
        )
    if report.embedding.get("passages"):
        e = report.embedding
        lines.append(
            f"embedded {e['passages']:,} passages in {e['seconds']} s ({e['per_s']} per s)"
        )
    if "embed_p50" in report.latency_ms:
        t = report.latency_ms
        lines.append(
            f"query embedding p50 {t['embed_p50']} ms; search without it p50 "
            f"{t['search_p50_without_embed']} ms, p95 {t['search_p95_without_embed']} ms"
        )
    if report.timeouts:
        lines.append(
            f"{report.timeouts} of {report.queries} searches passed the search deadline "
            "and were scored as misses (no results)"
        )
    if report.fallback:
        lines.append(
            f"fell back to keyword on {report.fallback['queries']} of {report.queries} "
            f"queries: {report.fallback['reason']}"
        )
    if report.abstention.get("absent_queries"):
        a = report.abstention
        lines.append(
            f"abstention: {a['abstained']:.3f} of {a['absent_queries']} absent-answer "
            f"queries answered empty; false-empty rate {a['false_empty']:.3f}"
        )
    return "\n".join(lines)


def write_json(report: BenchReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")


def write_runs(report: BenchReport, path: Path, top: int = 10) -> None:
    """Each query's top ``top`` documents and scores as JSON lines, in query order: what
    ``bench/store_compare.py`` reads to tell whether two libraries answered alike."""
    with path.open("w", encoding="utf-8") as out:
        for run in report.runs:
            row = {
                "query": run.query_id,
                "ranked": run.ranked[:top],
                "scores": [round(s, 6) for s in run.scores[:top]],
                "ms": round(run.latency_ms, 2),
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
