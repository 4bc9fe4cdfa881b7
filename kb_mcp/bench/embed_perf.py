"""``kb-mcp bench perf --embedder local``: what the vector side costs, on real text.

Four figures (issue 8, "Speed"), each from one run:

1. **Hybrid search at 100k chunks**, p50 / p95, through ``library.lookup.search(mode="hybrid")``
   but EXCLUDING the query embedding: the queries (real SciFact questions) are embedded
   beforehand and ``BenchEmbedder`` hands those vectors back, so the engine, the index
   and the fusion run exactly as in production. Embedding 100k passages with the local
   model takes hours on two cores, so the bulk library's passage vectors are DERIVED
   from the model's vectors of the abstracts its chunks mix (``bench/model_vectors.py``);
   a smaller library is timed twice in the same run, once with the model's own vectors
   and once with derived ones, to show the timing does not depend on which.
2. **The query embedding**, p50 / p95 ms, one question per call as a search embeds it.
3. **Passages embedded per second** by the production path (``library.vectors.embed_pending``:
   ``embed/queue.py`` batches into ``LocalEmbedder``), on real chunk text.
4. **``kb-mcp add`` to full vector coverage** (``run_add``): the CLI as a user runs it on
   a folder of real-text files, wall time, chunks, passages/s and peak RSS.

The text is real, from a BEIR-layout ``eval-data`` folder: the search libraries hold the
SciFact abstracts whose model vectors the bench has (``bench/model_vectors.py``), ``add``
every SciFact and NFCorpus abstract and CoSQA code. To reach 100k chunks each abstract is
repeated with variation (``variant``): its sentences rotated and one sentence of another
abstract added, so no two chunks are equal and the postings look like a real library's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.bench.corpus import Doc, read_corpus, read_queries, standin_vectors, variant
from kb_mcp.bench.metrics import percentile
from kb_mcp.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np

    from kb_mcp.embed.base import Availability, Embedder, EmbeddingSignature, EmbedKind
    from kb_mcp.library import Library

PROSE_SETS = ("scifact", "nfcorpus-testsplit-preproc")
PassageVectors = Callable[[list[str]], "np.ndarray"]
CODE_SET = "cosqa"
QUERY_SET = "scifact"
SEARCHES = 200
BULK_CHUNKS = 100_000
REAL_CHUNKS = 2_000
RATE_CHUNKS = 200  # passages the model embeds through the queue for the passages/s figure
# Chunks per file of the varied copies: the last full run wrote 79,042 files and got
# 119,946 chunks (copies are longer than the abstracts, 1.2 chunks per file).
BULK_CHUNKS_PER_FILE = 1.52
BUILT_MARK = "bench-built"  # written in a library's home once it is fully built
ADD_FILES = 10_000
FILES_PER_FOLDER = 500
BENCH_TIMEOUT_MS = 600_000  # the limit's maximum (limits.SEARCH_TIMEOUT_MS)


def _dataset(eval_data: Path, name: str) -> Path:
    folder = eval_data / name
    if not (folder / "corpus.jsonl").is_file():
        raise InvalidInput(
            f"no {name} corpus at {folder / 'corpus.jsonl'}",
            hint="pass --eval-data DIR: the folder holding scifact/, nfcorpus-testsplit-preproc/ "
            "and cosqa/ in BEIR layout",
        )
    return folder


def prose(eval_data: Path) -> list[Doc]:
    """SciFact then NFCorpus abstracts (those with text)."""
    docs = []
    for name in PROSE_SETS:
        docs.extend(d for d in read_corpus(_dataset(eval_data, name) / "corpus.jsonl") if d.text)
    return docs


def _markdown(doc: Doc) -> str:
    return f"# {doc.title}\n\n{doc.text}\n" if doc.title else f"{doc.text}\n"


def _path(folder: Path, n: int, suffix: str) -> Path:
    sub = folder / f"part{n // FILES_PER_FOLDER:03d}"
    sub.mkdir(parents=True, exist_ok=True)
    return sub / f"doc-{n}{suffix}"


def _titled(doc: Doc) -> str:
    """A Markdown file with the title in its frontmatter, as ``bench retrieval`` writes
    its corpus: the chunks of an unvaried abstract are then exactly those whose model
    vectors a SciFact library holds (``bench/model_vectors.py`` reuses them)."""
    from kb_mcp.text.frontmatter import render_frontmatter

    return render_frontmatter({"title": doc.title}, doc.text) if doc.title else f"{doc.text}\n"


def write_prose_folder(folder: Path, docs: list[Doc], files: int) -> int:
    """``files`` Markdown files, one (varied) abstract of ``docs`` each; bytes written."""
    return sum(
        _path(folder, n, ".md").write_bytes(_titled(variant(docs, n)).encode("utf-8"))
        for n in range(files)
    )


def write_mixed_folder(folder: Path, eval_data: Path, files: int) -> int:
    """``files`` files of real text as a user's folder might hold: every SciFact and
    NFCorpus abstract as Markdown, then CoSQA snippets as Python (``files`` ≤ their sum,
    about 14.6k); bytes written."""
    docs = prose(eval_data)
    code = read_corpus(_dataset(eval_data, CODE_SET) / "corpus.jsonl")
    if files > len(docs) + len(code):
        raise InvalidInput(f"at most {len(docs) + len(code)} real files, not {files}")
    total = 0
    for n in range(files):
        if n < len(docs):
            path, text = _path(folder, n, ".md"), _markdown(docs[n])
        else:
            path, text = _path(folder, n, ".py"), code[n - len(docs)].text + "\n"
        total += path.write_bytes(text.encode("utf-8"))
    return total


@dataclass(frozen=True, slots=True)
class AddRow:
    """``kb-mcp add`` of a real-text folder, from the command to full vector coverage."""

    files: int
    megabytes: float
    chunks: int
    embedded: int
    pending: int
    wall_s: float
    cpu_s: float  # the child's user + system CPU time
    passages_per_s: float  # chunks / wall time: ingest included, as a user waits for it
    peak_rss_mb: float


def run_add(folder: Path, home: Path, *, embedder: str, embed_model: str | None) -> AddRow:
    """Run ``kb-mcp add FOLDER --yes`` in a child process, as a user would, and time it to
    its return (the CLI embeds every chunk before returning); its own peak RSS."""
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    command = [sys.executable, "-m", "kb_mcp", "add", str(folder), "--yes", "--home", str(home)]
    command += ["--embedder", embedder] + (["--embed-model", embed_model] if embed_model else [])
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise InvalidInput(f"kb-mcp add failed ({child.returncode}): {output.decode()[-2000:]}")
    embedded, pending, chunks = _coverage(home, embedder, embed_model)
    return AddRow(
        files=files,
        megabytes=round(size / 1e6, 1),
        chunks=chunks,
        embedded=embedded,
        pending=pending,
        wall_s=round(wall, 1),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 1),
        passages_per_s=round(chunks / wall, 1),
        peak_rss_mb=round(usage.ru_maxrss / 1024, 1),
    )


def _coverage(home: Path, embedder: str, embed_model: str | None) -> tuple[int, int, int]:
    """(embedded, pending, chunks) of the library at ``home`` for the configured embedder."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    settings = Settings(home=home, embedder=embedder, embed_model=embed_model or "")
    with Library(settings) as library:
        state = library.vectors.state()
        return state.embedded, state.pending, library.catalog.overview().chunks


class BenchEmbedder:
    """The bench's embedder: the real model's signature, queries answered from vectors
    the real model embedded beforehand (so a timed search does no model call), passages
    given vectors by ``passages`` (the model, model vectors looked up or derived) or,
    when None, by ``standin_vectors``.

    A query that was not embedded beforehand is refused: a timing that silently
    included a model call would be wrong.
    """

    def __init__(
        self,
        signature: EmbeddingSignature,
        queries: dict[str, np.ndarray],
        passages: PassageVectors | None = None,
    ) -> None:
        self._signature, self._queries, self._passages = signature, queries, passages

    @property
    def signature(self) -> EmbeddingSignature:
        return self._signature

    def availability(self) -> Availability:
        from kb_mcp.embed.base import Availability

        return Availability(True)

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        import numpy as np

        if kind == "query":
            missing = [text for text in texts if text not in self._queries]
            if missing:
                raise InvalidInput(f"query not embedded beforehand: {missing[0]!r}")
            return np.stack([self._queries[text] for text in texts])
        if self._passages is not None:
            return self._passages(texts)
        return standin_vectors(texts, self._signature.dims)


def timed_ms(
    function: Callable[[str], object], items: list[str]
) -> tuple[list[float], list[float]]:
    """Wall and process-CPU milliseconds of ``function(item)`` for each item. On a shared
    machine the wall time includes waiting for a core; the CPU time is what it cost."""
    wall, cpu = [], []
    for item in items:
        started, started_cpu = time.perf_counter(), time.process_time()
        function(item)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return wall, cpu


@dataclass(frozen=True, slots=True)
class Latency:
    p50_ms: float
    p95_ms: float

    @classmethod
    def of(cls, values: list[float]) -> Latency:
        return cls(round(percentile(values, 50), 2), round(percentile(values, 95), 2))


@dataclass(frozen=True, slots=True)
class HybridRow:
    """Search latency over one library: hybrid (query embedding excluded) and keyword."""

    label: str
    vectors: str  # "model" or "derived" (from model vectors, bench/model_vectors.py)
    chunks: int
    hybrid: Latency
    hybrid_cpu: Latency
    keyword: Latency
    keyword_cpu: Latency


def build_library(
    folder: Path, home: Path, embedder: BenchEmbedder
) -> tuple[int, float, tuple[float, float]]:
    """Ingest ``folder`` as a source and embed every chunk with ``embedder`` through the
    production queue; (chunks, ingest s, (embed wall s, embed CPU s)). A home a previous
    run built completely (``BUILT_MARK``) is reused as it is: (chunks, 0, (0, 0))."""
    mark = home / BUILT_MARK
    if mark.is_file():
        return int(mark.read_text()), 0.0, (0.0, 0.0)
    shutil.rmtree(home, ignore_errors=True)  # a build that did not finish starts over
    with _open(home, embedder) as library:
        library.folders.add_folder(folder, "corpus")
        started = time.perf_counter()
        library.folders.sync("corpus")
        ingest_s = time.perf_counter() - started
        started, started_cpu = time.perf_counter(), time.process_time()
        report = library.vectors.embed_pending()
        embed_s = (time.perf_counter() - started, time.process_time() - started_cpu)
        if report is None or not report.complete:
            raise InvalidInput(f"embedding did not complete: {report}")
        chunks = library.catalog.overview().chunks
    mark.write_text(str(chunks))
    return chunks, ingest_s, embed_s


def written_folder(folder: Path, docs: list[Doc], files: int) -> Path:
    """``folder`` holding ``files`` varied abstracts, written unless a previous run did."""
    mark = folder.with_name(folder.name + ".written")
    if not mark.is_file():
        shutil.rmtree(folder, ignore_errors=True)
        write_prose_folder(folder, docs, files)
        mark.write_text(str(files))
    return folder


def _open(home: Path, embedder: BenchEmbedder) -> Library:
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    # A latency bench must not abort on a slow query: on a loaded machine one search at
    # 120k chunks passed the 2 s production deadline and the whole run was lost.
    settings = Settings(
        home=home,
        embedder="local",
        max_files_per_source=1_000_000,
        search_timeout_ms=BENCH_TIMEOUT_MS,
    )
    return Library(settings, make_embedder=lambda provider, model: embedder)


@dataclass(frozen=True, slots=True)
class Timed:
    """One library to time: its home, the embedder it was built with, and its labels."""

    home: Path
    embedder: BenchEmbedder
    label: str
    vectors: str


def time_searches(timed: list[Timed], queries: list[str]) -> list[HybridRow]:
    """p50 / p95 of hybrid and keyword search over ``queries`` (default top_k) in each
    library, after one warm-up pass (codes loaded, caches filled: a server's steady
    state). Libraries timed together take turns query by query (the first one rotating),
    so a change of the machine's load falls on all of them alike: the neutrality check
    compares two libraries this way."""
    with ExitStack() as stack:
        libraries = [stack.enter_context(_open(t.home, t.embedder)) for t in timed]
        for library in libraries:
            library.vectors.warm()
            for query in queries[:20]:
                library.lookup.search(query, mode="hybrid")
        hybrid = _turns(libraries, queries, _hybrid)
        keyword = _turns(libraries, queries, lambda lib, q: lib.lookup.search(q, mode="keyword"))
        return [
            HybridRow(
                t.label,
                t.vectors,
                library.catalog.overview().chunks,
                Latency.of(hybrid[i][0]),
                Latency.of(hybrid[i][1]),
                Latency.of(keyword[i][0]),
                Latency.of(keyword[i][1]),
            )
            for i, (t, library) in enumerate(zip(timed, libraries, strict=True))
        ]


def _turns(
    libraries: list[Library], queries: list[str], search: Callable[[Library, str], object]
) -> list[tuple[list[float], list[float]]]:
    """(wall ms, CPU ms) per query for each library, the libraries taking turns. The
    question's embedding step (``embed_ms``: the hand-over of the vector embedded
    beforehand, in the thread that bounds its time) is taken out of the wall time."""
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in libraries]
    for n, query in enumerate(queries):
        for k in range(len(libraries)):
            i = (n + k) % len(libraries)
            started, started_cpu = time.perf_counter(), time.process_time()
            result = search(libraries[i], query)
            wall = (time.perf_counter() - started) * 1000
            times[i][0].append(wall - (getattr(result, "embed_ms", None) or 0.0))
            times[i][1].append((time.process_time() - started_cpu) * 1000)
    return times


def _hybrid(library: Library, query: str) -> object:
    result = library.lookup.search(query, mode="hybrid")
    if getattr(result, "fallback", None):
        raise InvalidInput(f"hybrid search fell back to keyword: {result}")
    return result


@dataclass(frozen=True, slots=True)
class EmbedPerfReport:
    """Everything one ``bench perf --embedder`` run measured, and the load it ran under."""

    model: str
    searched: int  # queries timed, for each latency figure
    query_embed: Latency
    query_embed_cpu: Latency
    passages: int  # embedded by the production queue for the passages/s figure
    passages_per_s: float
    passages_per_cpu_s: float  # per second of this process's CPU: the load-free rate
    searches: list[HybridRow]
    add: AddRow | None
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    vectors_from: str = ""  # where the model vectors behind "model" / "derived" came from


def run_embed_perf(
    eval_data: Path,
    real: Embedder,
    *,
    searches: int = SEARCHES,
    bulk_chunks: int = BULK_CHUNKS,
    real_chunks: int = REAL_CHUNKS,
    rate_chunks: int = RATE_CHUNKS,
    add_files: int = ADD_FILES,
    add_embedder: tuple[str, str | None] = ("local", None),
    workdir: Path | None = None,
    reuse: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> EmbedPerfReport:
    """Run the four measurements of the module docstring with ``real`` (the model under
    test), in one process; ``kb-mcp add`` runs in a child with ``add_embedder``
    (provider, model). With ``workdir`` the libraries are kept there and a later run
    reuses them (only the timings run again); without, a temporary folder goes.
    ``reuse``: a library holding the model's vectors (``--vectors-from``), or None."""
    from kb_mcp.bench.model_vectors import model_vectors

    load_before = os.getloadavg()
    queries = read_queries(_dataset(eval_data, QUERY_SET) / "queries.jsonl", searches)
    real.embed(queries[:5], kind="query")  # the model loads outside the timings
    query_ms, query_cpu = timed_ms(lambda q: real.embed([q], kind="query"), queries)
    say = log or (lambda line: None)  # each figure as soon as it is measured
    say(f"query embedding p50/p95 {Latency.of(query_ms)}, CPU {Latency.of(query_cpu)}")
    cache = dict(zip(queries, real.embed(queries, kind="query"), strict=True))
    keep = workdir is not None
    workdir = workdir or Path(tempfile.mkdtemp(prefix="kb-mcp-embed-perf-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        model = model_vectors(real, prose(eval_data), workdir, reuse, say)
        docs = model.docs

        def embed(texts: list[str]) -> np.ndarray:
            return real.embed(texts, kind="passage")

        # passages/s of the production queue: the model embeds real chunks.
        rate_files = max(1, round(rate_chunks / 1.2))  # SciFact: 6,223 chunks / 5,183 docs
        write_prose_folder(workdir / "rate", docs[-rate_files:], rate_files)
        rate = BenchEmbedder(real.signature, cache, passages=embed)
        shutil.rmtree(workdir / "ratehome", ignore_errors=True)
        passages, _, (embed_s, embed_cpu_s) = build_library(
            workdir / "rate", workdir / "ratehome", rate
        )
        say(f"{passages} chunks embedded in {embed_s:.1f} s wall, {embed_cpu_s:.1f} s CPU")
        # The neutrality check: the same small library with the model's own vectors
        # and with derived ones, timed in the same run.
        real_files = max(1, round(real_chunks / 1.2))
        small = written_folder(workdir / "small", docs, real_files)
        own = BenchEmbedder(real.signature, cache, lambda t: model.exact_or(t, embed))
        chunks, _, _ = build_library(small, workdir / "real", own)
        say(f"small library: {model.embedded_anew} of {chunks} passages embedded anew")
        label = f"{chunks:,} chunks"
        derived = BenchEmbedder(real.signature, cache, model.derived)
        build_library(small, workdir / "derived", derived)
        rows = time_searches(
            [
                Timed(workdir / "real", own, label, "model"),
                Timed(workdir / "derived", derived, label, "derived"),
            ],
            queries,
        )
        say("\n".join(map(str, rows)))
        bulk_files = max(1, round(bulk_chunks / BULK_CHUNKS_PER_FILE))
        bulk_folder = written_folder(workdir / "bulk", docs, bulk_files)
        bulk, ingest_s, _ = build_library(bulk_folder, workdir / "bulkhome", derived)
        say(f"{bulk} chunks ingested in {ingest_s:.0f} s, derived vectors stored")
        bulk_home = Timed(workdir / "bulkhome", derived, f"{bulk:,} chunks", "derived")
        rows += time_searches([bulk_home], queries)
        say(str(rows[-1]))
        add = None
        if add_files:
            shutil.rmtree(workdir / "add", ignore_errors=True)
            shutil.rmtree(workdir / "addhome", ignore_errors=True)
            write_mixed_folder(workdir / "add", eval_data, add_files)
            add = run_add(
                workdir / "add",
                workdir / "addhome",
                embedder=add_embedder[0],
                embed_model=add_embedder[1],
            )
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    source = (
        f"model vectors of {len(docs):,} real abstracts; {model.unmatched} derived passages "
        "matched no abstract (stand-in vectors)"
    )
    return EmbedPerfReport(
        real.signature.describe(),
        len(queries),
        Latency.of(query_ms),
        Latency.of(query_cpu),
        passages,
        round(passages / embed_s, 1),
        round(passages / embed_cpu_s, 1),
        rows,
        add,
        tuple(round(x, 2) for x in load_before),
        tuple(round(x, 2) for x in os.getloadavg()),
        source,
    )


def real_embedder(provider: str, model: str | None) -> Embedder:
    """The configured provider's real embedder, or a clear error when it cannot run."""
    from kb_mcp.embed.registry import build_embedder
    from kb_mcp.settings import load

    embedder = build_embedder(provider, model, load())
    if embedder is None:
        raise InvalidInput("bench perf needs an embedder for its vector figures, not none")
    available = embedder.availability()
    if not available.ok:
        raise InvalidInput(f"the {provider} embedder cannot run: {available.reason}")
    return embedder


def embed_perf_table(report: EmbedPerfReport) -> str:
    """The run as a few lines of text: the search table, then the embedding figures."""
    lines = [
        f"vectors ({report.model}); hybrid search EXCLUDES the query embedding "
        "(queries embedded beforehand); 'model' = the model's own passage vectors, "
        "'derived' = derived from model vectors (each chunk: the mean of its source "
        "abstracts' model vectors plus small Gaussian noise)",
        f"  ({report.vectors_from})",
        f"{'library':>16} {'vectors':>8} {'hybrid p50 / p95 wall':>22} {'CPU':>16} "
        f"{'keyword p50 / p95 wall':>23} {'CPU':>16}",
    ]
    for r in report.searches:
        lines.append(
            f"{r.label:>16} {r.vectors:>8} {_pair(r.hybrid):>22} {_pair(r.hybrid_cpu):>16} "
            f"{_pair(r.keyword):>23} {_pair(r.keyword_cpu):>16}"
        )
    lines.append(
        f"query embedding: p50 {report.query_embed.p50_ms} ms, p95 {report.query_embed.p95_ms} ms"
        f" (CPU {report.query_embed_cpu.p50_ms} / {report.query_embed_cpu.p95_ms} ms;"
        f" {report.searched} SciFact queries, one per call)"
    )
    lines.append(
        f"passages embedded: {report.passages_per_s} per second, "
        f"{report.passages_per_cpu_s} per CPU second "
        f"({report.passages:,} real chunks embedded by the model, library.vectors.embed_pending)"
    )
    if report.add is not None:
        a = report.add
        lines.append(
            f"kb-mcp add to full coverage: {a.files:,} files ({a.megabytes} MB), {a.chunks:,} "
            f"chunks, {a.wall_s} s wall ({a.cpu_s} s CPU), {a.passages_per_s} chunks/s, "
            f"{a.embedded:,} embedded, {a.pending} pending, peak RSS {a.peak_rss_mb} MB"
        )
    lines.append(
        f"load average (1, 5, 15 min) before {report.load_before}, after {report.load_after}"
        f" on {os.cpu_count()} cores"
    )
    return "\n".join(lines)


def _pair(latency: Latency) -> str:
    return f"{latency.p50_ms} / {latency.p95_ms} ms"
