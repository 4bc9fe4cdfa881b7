"""``kb-mcp bench perf``: what ingest, re-sync, search and start-up cost as a library grows.

For each size a corpus of Markdown notes and Python files is generated (seeded, so runs
compare), ingested as a folder source through ``Library.sync``, re-synced unchanged, and
searched. Each size runs in a child process so its peak memory (max RSS) is its own.
Start-up is measured as an agent sees it: spawn ``kb-mcp serve`` over stdio, initialize,
and wait for the first ``search`` result (median of 5).
"""

from __future__ import annotations

import itertools
import json
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kb_mcp.bench.metrics import percentile

SEED = 7
SEARCHES = 200
STARTUP_RUNS = 5
_SYLLABLES = "ka to ri mo sen lar vi dex pra shu nel gor tam ble quo fin zer wat".split()


def _vocabulary(size: int = 4_000) -> list[str]:
    """Seeded pseudo-words; sampled with Zipf weights like real text (a few very common
    words, a long tail), so postings lists and query costs look like a real library's."""
    rng = random.Random(SEED)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(_SYLLABLES, k=rng.randint(2, 3))))
    ordered = sorted(words)
    rng.shuffle(ordered)  # Zipf rank must not follow the alphabet
    return ordered


_WORDS = _vocabulary()
_ZIPF_CUMULATIVE = list(itertools.accumulate(1 / rank**1.07 for rank in range(1, len(_WORDS) + 1)))


def _words(rng: random.Random, k: int) -> list[str]:
    return rng.choices(_WORDS, cum_weights=_ZIPF_CUMULATIVE, k=k)


def _word(rng: random.Random) -> str:
    return _words(rng, 1)[0]


@dataclass(frozen=True, slots=True)
class PerfRow:
    files: int
    megabytes: float
    chunks: int
    ingest_s: float
    files_per_s: float
    mb_per_s: float
    resync_s: float
    db_mb: float
    peak_rss_mb: float
    search_p50_ms: float
    search_p95_ms: float


def _sentence(rng: random.Random) -> str:
    words = _words(rng, rng.randint(8, 16))
    return " ".join(words).capitalize() + "."


def _markdown(rng: random.Random, n: int) -> str:
    parts = [f"# Note {n}: {' '.join(_words(rng, 3))}\n"]
    for section in range(rng.randint(3, 8)):
        parts.append(f"## {_word(rng).title()} {section}\n")
        for _ in range(rng.randint(1, 3)):
            parts.append(" ".join(_sentence(rng) for _ in range(rng.randint(3, 8))) + "\n")
        if rng.random() < 0.3:
            parts.append("```python\n" + f"{_word(rng)}_{n} = fetch('{n}')\n" + "```\n")
        parts.append("\n".join(f"- {_sentence(rng)}" for _ in range(rng.randint(1, 4))) + "\n")
    return "\n".join(parts)


def _python(rng: random.Random, n: int) -> str:
    funcs = []
    for i in range(rng.randint(3, 6)):
        name = f"{_word(rng)}_{_word(rng)}_{i}"
        body = "\n".join(f"    {_word(rng)} = {_word(rng)}({i})" for _ in range(4))
        funcs.append(f'def {name}(value):\n    """{_sentence(rng)}"""\n{body}\n    return value\n')
    return f'"""Module {n}."""\n\nimport os\n\n\n' + "\n\n".join(funcs)


def generate_corpus(folder: Path, files: int) -> int:
    """Write ``files`` files (4 of 5 Markdown, 1 of 5 Python) in nested folders; bytes."""
    rng = random.Random(SEED)
    total = 0
    for n in range(files):
        sub = folder / f"area{n % 20:02d}" / f"topic{n % 7}"
        sub.mkdir(parents=True, exist_ok=True)
        if n % 5 == 4:
            path, text = sub / f"mod_{n}.py", _python(rng, n)
        else:
            path, text = sub / f"note-{n}.md", _markdown(rng, n)
        total += path.write_bytes(text.encode("utf-8"))
    return total


def measure_size(files: int, workdir: Path) -> PerfRow:
    """Generate, ingest, re-sync and search one corpus size (run this in a child process)."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    corpus, home = workdir / "corpus", workdir / "home"
    size = generate_corpus(corpus, files)
    with Library(Settings(home=home, max_files_per_source=files + 1)) as library:
        library.add_folder(corpus, "corpus")
        started = time.perf_counter()
        library.sync("corpus")
        ingest_s = time.perf_counter() - started
        started = time.perf_counter()
        library.sync("corpus")
        resync_s = time.perf_counter() - started
        chunks = library.overview().chunks
        rng = random.Random(SEED)
        latencies = []
        for _ in range(SEARCHES):
            query = " ".join(_words(rng, rng.randint(2, 4)))
            started = time.perf_counter()
            library.search(query)
            latencies.append((time.perf_counter() - started) * 1000)
    db_bytes = sum(p.stat().st_size for p in home.glob("kb.db*"))
    return PerfRow(
        files=files,
        megabytes=round(size / 1e6, 1),
        chunks=chunks,
        ingest_s=round(ingest_s, 2),
        files_per_s=round(files / ingest_s),
        mb_per_s=round(size / 1e6 / ingest_s, 2),
        resync_s=round(resync_s, 2),
        db_mb=round(db_bytes / 1e6, 1),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        search_p50_ms=round(percentile(latencies, 50), 2),
        search_p95_ms=round(percentile(latencies, 95), 2),
    )


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


def run_perf_bench(sizes: list[int], keep: bool = False) -> list[tuple[PerfRow, float | None]]:
    """One row per size, each measured in a fresh child process; start-up for each too."""
    rows = []
    for files in sizes:
        workdir = Path(tempfile.mkdtemp(prefix=f"kb-mcp-perf-{files}-"))
        try:
            out = subprocess.run(
                [sys.executable, "-m", "kb_mcp.bench.perf", str(files), str(workdir)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            row = PerfRow(**json.loads(out.strip().splitlines()[-1]))
            rows.append((row, measure_startup(workdir / "home")))
        finally:
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
    return rows


def perf_table(rows: list[tuple[PerfRow, float | None]]) -> str:
    head = (
        f"{'files':>7} {'MB':>6} {'chunks':>7} {'ingest s':>9} {'files/s':>8} {'MB/s':>6} "
        f"{'resync s':>9} {'db MB':>6} {'peak MB':>8} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'start s':>8}"
    )
    lines = [head]
    for r, startup in rows:
        lines.append(
            f"{r.files:>7} {r.megabytes:>6} {r.chunks:>7} {r.ingest_s:>9} {r.files_per_s:>8} "
            f"{r.mb_per_s:>6} {r.resync_s:>9} {r.db_mb:>6} {r.peak_rss_mb:>8} "
            f"{r.search_p50_ms:>7} {r.search_p95_ms:>7} "
            f"{'' if startup is None else round(startup, 2):>8}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(asdict(measure_size(int(sys.argv[1]), Path(sys.argv[2])))))
