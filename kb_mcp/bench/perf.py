"""``kb-mcp bench perf``: what ingest, re-sync, search and start-up cost as a library grows,
side by side with a naive FTS5 table over the same text in the same process.

**Corpus.** Built from the public sets' own text (``../shared/eval-data``): SciFact and
NFCorpus abstracts and CMRC2018 Chinese Wikipedia paragraphs, in proportion to their
size. Each passage is one section (``## title`` + text) of a Markdown note holding
``SECTIONS_PER_FILE`` of them, so one passage is one chunk. The first pass over a set
uses its documents as they are; later passages are variants of a real document: its
sentences, each kept with probability ``KEEP_SENTENCE``, plus one or two sentences of
another document of the set, shuffled. So the vocabulary, term frequencies and the
co-occurrence of query words are those of real text at any size. Seeded, so runs compare.

**Searches.** Real queries: ``SEARCHES`` of each set's test queries (SciFact claims,
NFCorpus titles, CMRC2018 questions), ``top_k`` 10, keyword mode, through
``library.lookup.search`` (what agents get), and the same text through ``NaiveIndex``.

Each size runs in a child process so its peak memory (max RSS) is its own. Start-up is
measured as an agent sees it: spawn ``kb-mcp serve`` over stdio, initialize, and wait for
the first ``search`` result (median of 5).

**Hybrid** (``--hybrid``, issue 22): the same library with a vector for every chunk, timed
in ``hybrid`` mode without the question embedding. The vectors are STAND-INS
(``bench/corpus.py``'s ``standin_vectors``: unit vectors seeded by each text's digest,
the questions' too), stored once by the production queue under the default local model's
signature so the engine weighs the leg as it would the model's: embedding 100k passages
for real takes hours here, and the vector index's cost does not depend on what the
vectors mean (uniformly random ones are its worst case). Questions in Chinese are left
out: the model does not read them, and the vector leg sits them out.

**Over stdio** (``--stdio``, issue 22): what an agent waits for. ``kb-mcp serve`` is
spawned on the library and asked each query (``search``, keyword, top 10) as JSON-RPC
over its pipes; the naive table answers the same queries from a process of its own
behind a pipe (``index/naive.py``, JSON lines: less framing than MCP). Both are timed
client side, taking turns query by query so a change of load falls on both alike.

**On PostgreSQL** (issue 24): with ``--store URL`` (or ``$KB_MCP_STORE``) each size's
library is built on that server through the library's own write path (the folder synced,
stand-in vectors stored by the queue) and timed as above; the naive table stays a SQLite
file (it is the baseline). Give an empty database: a size's run starts from nothing, and
``--only search`` reuses the library it left. The children and ``kb-mcp serve`` read the
store from ``$KB_MCP_STORE``, as every kb-mcp process does, so no URL is on a command line.
"""

from __future__ import annotations

import json
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kb_mcp.bench.metrics import percentile
from kb_mcp.errors import InvalidInput, NotFound, Unavailable
from kb_mcp.home import DB_FILE
from kb_mcp.settings import Store

if TYPE_CHECKING:
    from kb_mcp.bench.embed_perf import BenchEmbedder

SEED = 7
SEARCHES = 200  # per query set
WARMUP = 20  # queries run once before timing: the page cache, not the first query, is measured
TOP_K = 10
STARTUP_RUNS = 5
SECTIONS_PER_FILE = 8
KEEP_SENTENCE = 0.75
MAX_PASSAGE_CHARS = 1_500  # under the chunk budget (1,800), so a section stays one chunk
DEFAULT_SIZES = (10_000, 100_000)  # chunks; 300,000 under --sizes (about 15 minutes here)
DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "eval-data"

# (folder, query set label): the sets whose text builds the corpus and whose queries run.
SETS = (
    ("scifact", "scifact"),
    ("nfcorpus-testsplit-preproc", "nfcorpus"),
    ("cmrc2018-ctx", "cmrc2018"),
)
_SENTENCE = re.compile(r"(?<=[.!?。！？；])\s*")
_NO_PUNCTUATION_WORDS = 25  # NFCorpus text is preprocessed: no punctuation, so cut by words


@dataclass(frozen=True, slots=True)
class RealDoc:
    title: str
    sentences: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RealSet:
    """One public set: its documents split into sentences, and its test queries."""

    name: str
    docs: tuple[RealDoc, ...]
    queries: tuple[str, ...]


def _sentences(text: str) -> tuple[str, ...]:
    parts = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    if len(parts) > 1:
        return tuple(parts)
    words = text.split()
    step = _NO_PUNCTUATION_WORDS
    return tuple(" ".join(words[i : i + step]) for i in range(0, len(words), step)) or (text,)


def load_sets(data: Path = DATA_DIR) -> list[RealSet]:
    """The public sets the corpus and the queries come from; NotFound names what is missing."""
    from kb_mcp.bench.beir import load_beir

    if not data.is_dir():
        raise NotFound(
            f"no eval data at {data}",
            hint="pass --data with the folder holding scifact/, nfcorpus-testsplit-preproc/ "
            "and cmrc2018-ctx/ (BEIR layout)",
        )
    sets = []
    for folder, label in SETS:
        beir = load_beir(data / folder, "test")
        docs = tuple(
            RealDoc(d.title or " ".join(d.text.split()[:6]), _sentences(d.text))
            for d in beir.docs
            if d.text.strip()
        )
        rng = random.Random(SEED)
        queries = [q.text for q in beir.queries]
        rng.shuffle(queries)
        sets.append(RealSet(label, docs, tuple(queries[:SEARCHES])))
    return sets


def _variant(rng: random.Random, real: RealSet, index: int) -> tuple[str, str]:
    """Passage ``index`` of a set: the real document first, then variants of it."""
    doc = real.docs[index % len(real.docs)]
    if index < len(real.docs):
        sentences = list(doc.sentences)
    else:
        sentences = [s for s in doc.sentences if rng.random() < KEEP_SENTENCE] or [doc.sentences[0]]
        for _ in range(rng.randint(1, 2)):
            other = real.docs[rng.randrange(len(real.docs))]
            sentences.append(rng.choice(other.sentences))
        rng.shuffle(sentences)
    text, kept = "", []
    for sentence in sentences:
        if len(text) + len(sentence) + 1 > MAX_PASSAGE_CHARS and kept:
            break
        kept.append(sentence)
        text = " ".join(kept)
    return doc.title.replace("\n", " ").strip() or "untitled", text[:MAX_PASSAGE_CHARS]


def passages(sets: Sequence[RealSet], count: int) -> Iterator[tuple[str, str]]:
    """``count`` ``(title, text)`` passages, the sets interleaved by their document counts."""
    rng = random.Random(SEED)
    total = sum(len(s.docs) for s in sets)
    taken = [0] * len(sets)
    for _ in range(count):
        # The set furthest behind its share goes next: proportions hold at every size.
        i = min(range(len(sets)), key=lambda j: taken[j] / len(sets[j].docs) * total)
        yield _variant(rng, sets[i], taken[i])
        taken[i] += 1


def write_corpus(folder: Path, items: Sequence[tuple[str, str]]) -> int:
    """Write the passages as Markdown notes of ``SECTIONS_PER_FILE`` sections; bytes written."""
    total = 0
    for start in range(0, len(items), SECTIONS_PER_FILE):
        group = items[start : start + SECTIONS_PER_FILE]
        n = start // SECTIONS_PER_FILE
        sub = folder / f"area{n % 40:02d}" / f"topic{n % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        body = [f"# Notes {n}: {group[0][0]}\n"]
        body += [f"## {title}\n\n{text}\n" for title, text in group]
        total += (sub / f"note-{n}.md").write_bytes("\n".join(body).encode("utf-8"))
    return total


@dataclass(frozen=True, slots=True)
class PerfRow:
    chunks_asked: int
    files: int
    megabytes: float
    chunks: int
    ingest_s: float
    mb_per_s: float
    naive_ingest_s: float
    resync_s: float
    db_mb: float
    peak_rss_mb: float


@dataclass(frozen=True, slots=True)
class SearchRow:
    """Latency of one query set at one size: kb-mcp and the naive table, same queries.

    Wall time is what a caller waits; CPU time (this thread's) is what the search costs,
    and it is the figure to compare when other work shares the cores.
    """

    chunks: int
    queries: str
    engine: str  # what ran: "keyword", "hybrid", "stdio" (keyword over MCP, client side)
    p50_ms: float
    p95_ms: float
    cpu_p50_ms: float | None  # None over stdio: the server's CPU is not the client's
    cpu_p95_ms: float | None
    naive_p50_ms: float | None = None
    naive_p95_ms: float | None = None
    naive_cpu_p50_ms: float | None = None
    naive_cpu_p95_ms: float | None = None
    stopped: int = 0  # searches stopped by the time budget (their time still counts)


@dataclass(frozen=True, slots=True)
class SizeReport:
    perf: PerfRow | None  # None under ``--only search``: nothing was built or ingested
    searches: list[SearchRow] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Timings:
    wall_ms: list[float]
    cpu_ms: list[float]
    stopped: int

    def summary(self) -> tuple[float, float, float, float]:
        """Wall p50, wall p95, CPU p50, CPU p95."""
        return (
            _p(self.wall_ms, 50),
            _p(self.wall_ms, 95),
            _p(self.cpu_ms, 50),
            _p(self.cpu_ms, 95),
        )


def time_queries(
    run: Callable[[str], object],
    queries: Sequence[str],
    clock: Callable[[], float] = time.thread_time,
) -> Timings:
    """Wall and CPU milliseconds per query, after ``WARMUP`` untimed ones, and how many
    ran out of the search time budget (``Unavailable``): those count with their time.
    ``clock`` is the CPU clock: this thread's, or the process's where the search uses
    other threads (numpy's in the vector leg). A result's ``embed_ms`` (the question's
    embedding) is left out of the wall time."""
    for query in queries[:WARMUP]:
        _timed(run, query, clock)
    wall, cpu, stopped = [], [], 0
    for query in queries:
        wall_ms, cpu_ms, ok = _timed(run, query, clock)
        wall.append(wall_ms)
        cpu.append(cpu_ms)
        stopped += not ok
    return Timings(wall, cpu, stopped)


def _timed(
    run: Callable[[str], object], query: str, clock: Callable[[], float] = time.thread_time
) -> tuple[float, float, bool]:
    started, cpu = time.perf_counter(), clock()
    ok, embed_ms = True, 0.0
    try:
        embed_ms = getattr(run(query), "embed_ms", None) or 0.0
    except Unavailable:
        ok = False
    wall_ms = (time.perf_counter() - started) * 1000 - embed_ms
    return wall_ms, (clock() - cpu) * 1000, ok


def _p(values: list[float], p: float) -> float:
    return round(percentile(values, p), 2)


def keyword_rows(library, naive, sets: Sequence[RealSet], chunks: int) -> list[SearchRow]:
    """The keyword part of the run: each set's queries through kb-mcp, then the naive table.

    The seam for other legs: a caller appends its own ``SearchRow``s after these.
    """
    rows = []
    for real in sets:
        kb = time_queries(
            lambda q: library.lookup.search(q, top_k=TOP_K, mode="keyword"), real.queries
        )
        base = time_queries(lambda q: naive.search(q, TOP_K), real.queries)
        rows.append(
            SearchRow(chunks, real.name, "keyword", *kb.summary(), *base.summary(), kb.stopped)
        )
    return rows


STANDIN_MARK = "standin-vectors"  # written in a home once every chunk has a stand-in vector


def standin_embedder(sets: Sequence[RealSet]) -> BenchEmbedder:
    """The local model's signature with stand-in vectors: passages get
    ``standin_vectors``, and the sets' questions that are not Chinese (the model reads
    none) are answered from stand-ins made beforehand, so a timed search calls no model."""
    from kb_mcp.bench.corpus import standin_vectors
    from kb_mcp.bench.embed_perf import BenchEmbedder
    from kb_mcp.embed import local
    from kb_mcp.embed.base import EmbeddingSignature
    from kb_mcp.search.calibration import has_cjk

    signature = EmbeddingSignature(
        local.PROVIDER, local.DEFAULT_MODEL, local.DIMS, local.MAX_CHARS, "none"
    )
    texts = [q for real in sets for q in real.queries if not has_cjk(q)]
    return BenchEmbedder(
        signature, dict(zip(texts, standin_vectors(texts, signature.dims), strict=True))
    )


def hybrid_rows(
    home: Path, sets: Sequence[RealSet], chunks: int, store: Store | None = None
) -> list[SearchRow]:
    """Hybrid search latency per query set (Chinese questions left out), over stand-in
    vectors stored once for every chunk (the module docstring says why stand-ins)."""
    from kb_mcp.library import Library
    from kb_mcp.search.calibration import has_cjk
    from kb_mcp.settings import Settings

    asked = {real.name: [q for q in real.queries if not has_cjk(q)] for real in sets}
    embedder = standin_embedder(sets)
    settings = Settings(
        home=home, max_files_per_source=10**7, embedder="local", store=store or Store()
    )
    rows = []
    with Library(settings, make_embedder=lambda provider, model: embedder) as library:
        if not (home / STANDIN_MARK).is_file():
            report = library.vectors.embed_pending()
            if report is None or not report.complete:
                raise InvalidInput(f"stand-in vectors were not all stored: {report}")
            (home / STANDIN_MARK).write_text(str(library.catalog.overview().chunks))
        library.vectors.warm()

        def hybrid(query: str) -> object:
            result = library.lookup.search(query, top_k=TOP_K, mode="hybrid")
            if result.fallback:
                raise InvalidInput(f"hybrid search fell back: {result.reason}")
            return result

        for name, queries in asked.items():
            if not queries:
                continue
            timed = time_queries(hybrid, queries, time.process_time)
            rows.append(SearchRow(chunks, name, "hybrid", *timed.summary(), stopped=timed.stopped))
    return rows


def stdio_rows(home: Path, naive_db: Path, sets: Sequence[RealSet], chunks: int) -> list[SearchRow]:
    """Client-side latency of keyword search over stdio: ``kb-mcp serve`` and the naive
    table's line server, the same queries, taking turns (the module docstring)."""
    from kb_mcp.bench.startup import StdioClient

    client = StdioClient(home)
    naive = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp.index.naive", str(naive_db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert naive.stdin is not None and naive.stdout is not None

    def ours(query: str) -> None:
        arguments = {"query": query, "top_k": TOP_K, "mode": "keyword"}
        reply = client.request("tools/call", {"name": "search", "arguments": arguments})
        if "error" not in reply and not reply["result"].get("isError"):
            return
        said = str(reply.get("result", {}).get("content", reply))
        if "[unavailable] search took longer" in said:  # stopped by the time budget
            raise Unavailable(said)
        raise InvalidInput(f"search over stdio failed: {reply}")

    def theirs(query: str) -> None:
        naive.stdin.write(" ".join(query.split()) + "\n")
        naive.stdin.flush()
        naive.stdout.readline()

    rows = []
    try:
        client.initialize()
        for real in sets:
            for query in real.queries[:WARMUP]:
                _timed(ours, query)
                theirs(query)
            kb: list[float] = []
            base: list[float] = []
            stopped = 0
            for query in real.queries:
                wall_ms, _cpu_ms, ok = _timed(ours, query)
                kb.append(wall_ms)
                stopped += not ok
                base.append(_timed(theirs, query)[0])
            rows.append(
                SearchRow(
                    chunks,
                    real.name,
                    "stdio",
                    _p(kb, 50),
                    _p(kb, 95),
                    None,
                    None,
                    _p(base, 50),
                    _p(base, 95),
                    stopped=stopped,
                )
            )
    finally:
        client.close()
        naive.stdin.close()
        naive.wait(10)
    return rows


def measure_search(
    workdir: Path,
    data: Path = DATA_DIR,
    hybrid: bool = False,
    stdio: bool = False,
    store: Store | None = None,
) -> SizeReport:
    """Only the search pass, over a corpus an earlier run built and kept in ``workdir``.

    Trigger: building the 100k corpus takes most of half an hour on the shared cores,
    and tuning the keyword leg needs its search figures many times over one index.
    """
    from kb_mcp.index.naive import NaiveIndex
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    home, naive_db, store = workdir / "home", workdir / "naive.db", store or Store()
    if not _built(home, store) or not naive_db.is_file():
        raise NotFound(
            f"no built corpus in {workdir}",
            hint="run `kb-mcp bench perf --sizes N --workdir DIR` once to build it",
        )
    sets = load_sets(data)
    settings = Settings(home=home, max_files_per_source=10**7, embedder="none", store=store)
    with Library(settings) as library:
        library.fts.ensure_current()
        library.fts.refresh_segment()  # a corpus kept from before the postings segment
        naive = NaiveIndex(naive_db)
        chunks = library.catalog.overview().chunks
        searches = keyword_rows(library, naive, sets, chunks)
        naive.close()
    searches += later_rows(home, naive_db, sets, chunks, hybrid, stdio, store)
    return SizeReport(None, searches)


def later_rows(
    home: Path,
    naive_db: Path,
    sets: Sequence[RealSet],
    chunks: int,
    hybrid: bool,
    stdio: bool,
    store: Store | None = None,
) -> list[SearchRow]:
    """The rows timed after the keyword ones, each with the library closed in between:
    hybrid (stored stand-in vectors) and over stdio (a server of its own), when asked."""
    rows = hybrid_rows(home, sets, chunks, store) if hybrid else []
    return rows + (stdio_rows(home, naive_db, sets, chunks) if stdio else [])


def measure_size(
    chunks: int,
    workdir: Path,
    data: Path = DATA_DIR,
    hybrid: bool = False,
    stdio: bool = False,
    store: Store | None = None,
) -> SizeReport:
    """Build, ingest, re-sync and search one corpus size (run this in a child process)."""
    from kb_mcp.index.naive import NaiveIndex
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    sets = load_sets(data)
    items = list(passages(sets, chunks))
    corpus, home = workdir / "corpus", workdir / "home"
    size = write_corpus(corpus, items)
    files = -(-len(items) // SECTIONS_PER_FILE)
    store = store or Store()
    settings = Settings(home=home, max_files_per_source=files + 1, embedder="none", store=store)
    with Library(settings) as library:
        library.folders.add_folder(corpus, "corpus")
        started = time.perf_counter()
        library.folders.sync("corpus")
        ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        library.folders.sync("corpus")
        resync_s = time.perf_counter() - started
        indexed = library.catalog.overview().chunks
        naive = NaiveIndex(workdir / "naive.db")
        started = time.perf_counter()
        naive.add(items)
        naive_ingest_s = time.perf_counter() - started
        searches = keyword_rows(library, naive, sets, indexed)
        naive.close()
    searches += later_rows(home, workdir / "naive.db", sets, indexed, hybrid, stdio, store)
    db_bytes = _database_bytes(home, store)
    perf = PerfRow(
        chunks_asked=chunks,
        files=files,
        megabytes=round(size / 1e6, 1),
        chunks=indexed,
        ingest_s=round(ingest_s, 2),
        mb_per_s=round(size / 1e6 / ingest_s, 2),
        naive_ingest_s=round(naive_ingest_s, 2),
        resync_s=round(resync_s, 2),
        db_mb=round(db_bytes / 1e6, 1),
        peak_rss_mb=round(_peak_rss_kb() / 1024, 1),
    )
    return SizeReport(perf, searches)


def _built(home: Path, store: Store) -> bool:
    """Whether an earlier run left a library to search: its file, or on a server its home."""
    return home.is_dir() if store.postgres_url else (home / DB_FILE).is_file()


def _database_bytes(home: Path, store: Store) -> int:
    """The library's size: its SQLite files, or its PostgreSQL database (tables, indexes)."""
    if store.postgres_url is None:
        return sum(p.stat().st_size for p in home.glob("kb.db*"))
    from kb_mcp.store.postgres.database import database_bytes

    return database_bytes(store.postgres_url)


def _peak_rss_kb() -> int:
    """The larger peak RSS of this process and of its largest finished child (the sync's
    reader processes, joined at the end of each sync): issue 10 bounds both."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def measure_startup(home: Path) -> float:
    """Median seconds from spawning ``kb-mcp serve`` to the first search result over stdio."""
    import anyio

    async def once() -> float:
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport

        started = time.perf_counter()
        transport = StdioTransport(
            command=sys.executable,
            args=["-m", "kb_mcp", "serve", "--home", str(home)],
            keep_alive=False,
        )
        async with Client(transport) as client:
            await client.call_tool("search", {"query": "cache latency"})
            return time.perf_counter() - started

    return statistics.median(anyio.run(once) for _ in range(STARTUP_RUNS))


def _report_from_json(line: str) -> SizeReport:
    raw = json.loads(line)
    perf = PerfRow(**raw["perf"]) if raw["perf"] else None
    return SizeReport(perf, [SearchRow(**r) for r in raw["searches"]])


ONLY = ("search",)  # the parts ``--only`` can run alone


def run_perf_bench(
    sizes: Sequence[int],
    keep: bool = False,
    data: Path = DATA_DIR,
    startup: bool = True,
    workdir: Path | None = None,
    only: str | None = None,
    hybrid: bool = False,
    stdio: bool = False,
) -> list[tuple[SizeReport, float | None]]:
    """One report per size (in chunks), each measured in a fresh child process.

    With ``workdir`` each size's corpus, library and naive table are kept in
    ``workdir/<chunks>``; ``only="search"`` then times the searches over them again
    without building anything (and without the start-up figure). ``hybrid`` and
    ``stdio`` add those rows (the module docstring).
    """
    load_sets(data)  # a missing data folder fails here, before any child starts
    if only is not None and (only not in ONLY or workdir is None):
        raise InvalidInput(
            f"--only {only} needs --workdir and one of: {', '.join(ONLY)}",
            hint="build once with --workdir DIR, then rerun with --only search --workdir DIR",
        )
    reports = []
    for chunks in sizes:
        kept = workdir / str(chunks) if workdir is not None else None
        if only is not None and kept is not None and not (kept / "home").is_dir():
            raise NotFound(f"no built corpus in {kept}", hint="run once without --only first")
        if kept is not None and only is None:
            shutil.rmtree(kept, ignore_errors=True)  # a full run builds afresh
        if kept is not None:
            kept.mkdir(parents=True, exist_ok=True)
        here = kept or Path(tempfile.mkdtemp(prefix=f"kb-mcp-perf-{chunks}-"))
        try:
            command = [sys.executable, "-m", "kb_mcp.bench.perf", str(chunks), str(here), str(data)]
            flags = [*([only] if only else []), *(["--hybrid"] if hybrid else [])]
            flags += ["--stdio"] if stdio else []
            out = subprocess.run(
                [*command, *flags], check=True, capture_output=True, text=True
            ).stdout
            report = _report_from_json(out.strip().splitlines()[-1])
            started = measure_startup(here / "home") if startup and only is None else None
            reports.append((report, started))
        finally:
            if not keep and kept is None:
                shutil.rmtree(here, ignore_errors=True)
    return reports


def _blank(value: float | None) -> str:
    return "" if value is None else str(value)


def _ratio(naive: float | None, ours: float | None) -> str:
    return "" if naive is None or ours is None or ours <= 0 else f"{naive / ours:.1f}x"


def perf_table(reports: Sequence[tuple[SizeReport, float | None]]) -> str:
    """Two tables: ingest and size by corpus, then search latency by corpus and query set."""
    lines = [
        f"{'chunks':>7} {'files':>6} {'MB':>6} {'ingest s':>9} {'MB/s':>6} {'naive s':>8} "
        f"{'resync s':>9} {'db MB':>6} {'peak MB':>8} {'start s':>8}"
    ]
    for report, startup in reports:
        r = report.perf
        if r is None:
            continue
        lines.append(
            f"{r.chunks:>7} {r.files:>6} {r.megabytes:>6} {r.ingest_s:>9} {r.mb_per_s:>6} "
            f"{r.naive_ingest_s:>8} {r.resync_s:>9} {r.db_mb:>6} {r.peak_rss_mb:>8} "
            f"{'' if startup is None else round(startup, 2):>8}"
        )
    lines += [
        "",
        f"{'chunks':>7} {'queries':>9} {'engine':>8} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'naive p50':>10} {'naive p95':>10} {'x p50':>6} {'x p95':>6} "
        f"{'cpu p50':>8} {'cpu p95':>8} {'naive cpu p95':>14} {'x cpu p95':>10} {'stopped':>8}",
    ]
    for report, _ in reports:
        for s in report.searches:
            lines.append(
                f"{s.chunks:>7} {s.queries:>9} {s.engine:>8} {s.p50_ms:>7} {s.p95_ms:>7} "
                f"{_blank(s.naive_p50_ms):>10} {_blank(s.naive_p95_ms):>10} "
                f"{_ratio(s.naive_p50_ms, s.p50_ms):>6} {_ratio(s.naive_p95_ms, s.p95_ms):>6} "
                f"{_blank(s.cpu_p50_ms):>8} {_blank(s.cpu_p95_ms):>8} "
                f"{_blank(s.naive_cpu_p95_ms):>14} "
                f"{_ratio(s.naive_cpu_p95_ms, s.cpu_p95_ms):>10} {s.stopped:>8}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    rest = sys.argv[4:]
    from kb_mcp.settings import load

    hybrid, stdio = "--hybrid" in rest, "--stdio" in rest
    store = load(home=Path(sys.argv[2]) / "home").store  # $KB_MCP_STORE (module docstring)
    if "search" in rest:
        report = measure_search(Path(sys.argv[2]), Path(sys.argv[3]), hybrid, stdio, store)
    else:
        workdir, data = Path(sys.argv[2]), Path(sys.argv[3])
        report = measure_size(int(sys.argv[1]), workdir, data, hybrid, stdio, store)
    print(json.dumps(asdict(report)))
