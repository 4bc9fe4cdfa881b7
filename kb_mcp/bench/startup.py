"""``kb-mcp bench startup``: how soon a spawned server answers, and how fresh it stays.

Three figures, each the median of ``runs`` (issue 10, "Start-up" and "Freshness"):

- **start-up**: spawn ``kb-mcp serve`` over stdio and time, from the spawn, the reply to
  ``initialize`` and the first ``search`` result. The client is raw JSON lines on the
  pipes (no MCP client library), so nothing on the client side is counted.
- **re-sync**: a no-change ``library.folders.sync`` of the whole library (walk, stat, compare).
- **freshness**: while one server runs, a file is edited (a new unique word), added or
  deleted, and ``search`` is asked every ``POLL_S`` until the answer shows it: seconds
  from the save to the first answer that does.

The library is built once from real text (SciFact abstracts as Markdown notes, CoSQA
functions as Python files, from ``../shared/eval-data``), so its postings look like a
real one's, and reused by later runs on the same ``--home``.
"""

from __future__ import annotations

import json
import os
import selectors
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNS = 5
POLL_S = 0.05
REPLY_TIMEOUT_S = 60.0
FRESHNESS_TIMEOUT_S = 30.0
CLIENT_VERSION = "2025-06-18"
# The shared evaluation sets of this workspace (see SOURCES.md there).
DEFAULT_EVAL_DATA = Path(__file__).resolve().parents[3] / "shared" / "eval-data"


@dataclass(frozen=True, slots=True)
class StartupFigures:
    """Medians in seconds; ``None`` where a figure was not measured."""

    files: int
    runs: int
    initialize_s: float
    first_search_s: float
    initialize_cpu_s: float
    first_search_cpu_s: float
    resync_s: float | None = None
    resync_cpu_s: float | None = None
    server_rss_mb: float | None = None
    edit_s: float | None = None
    add_s: float | None = None
    delete_s: float | None = None


def build_corpus(folder: Path, eval_data: Path, files: int) -> int:
    """Write ``files`` notes and code files of real text into ``folder``; returns how many.

    Half SciFact abstracts (``.md``, 100 to a folder), half CoSQA functions (``.py``); the
    set that runs out first is topped up by the other.
    """
    texts = _real_texts(eval_data)
    for i, (suffix, title, text) in enumerate(texts[:files]):
        path = folder / f"d{i // 100:03d}" / f"f{i:05d}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        body = f"# {title}\n\n{text}\n" if suffix == ".md" else text + "\n"
        path.write_text(body, encoding="utf-8")
    return min(files, len(texts))


def _real_texts(eval_data: Path) -> list[tuple[str, str, str]]:
    notes = [(".md", d.get("title") or d["_id"], d["text"]) for d in _jsonl(eval_data / "scifact")]
    code = [(".py", "", d["text"]) for d in _jsonl(eval_data / "cosqa")]
    mixed = [item for pair in zip(notes, code, strict=False) for item in pair]
    longer = notes if len(notes) > len(code) else code
    return mixed + longer[min(len(notes), len(code)) :]


def _jsonl(folder: Path) -> list[dict[str, Any]]:
    with open(folder / "corpus.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


class StdioClient:
    """A bare JSON-lines MCP client over a spawned ``kb-mcp serve``."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kb_mcp", "serve", "--home", str(home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "KB_MCP_EMBEDDER": "none", **(env or {})},
        )
        self._buffer = b""
        self._next_id = 0
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for the reply with its id."""
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        while True:
            message = self._read_message()
            if message.get("id") == self._next_id:
                return message

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def initialize(self) -> dict[str, Any]:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": CLIENT_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "kb-mcp-bench", "version": "1"},
            },
        )
        self.notify("notifications/initialized")
        return reply

    def search_text(self, query: str) -> str:
        """The results of a keyword search as JSON text (the query itself left out)."""
        reply = self.request(
            "tools/call", {"name": "search", "arguments": {"query": query, "mode": "keyword"}}
        )
        if "error" in reply:
            raise RuntimeError(f"search failed: {reply['error']}")
        return json.dumps(reply["result"].get("structuredContent", {}).get("results", []))

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far (Linux ``/proc``; 0.0 elsewhere).

        Wall time on a shared machine counts other people's work; this does not.
        """
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """The server's resident memory now, in MB (Linux ``/proc``; 0.0 elsewhere)."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return 0.0
        kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        return kb / 1024

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _read_message(self) -> dict[str, Any]:
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while b"\n" not in self._buffer:
            if not self._selector.select(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"no reply from the server within {REPLY_TIMEOUT_S} s")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("the server closed stdout")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


def measure_spawn(home: Path, query: str) -> tuple[float, float, float, float]:
    """Seconds from spawn to the ``initialize`` reply and to the first search result, wall
    and the server's CPU."""
    client = StdioClient(home)
    try:
        client.initialize()
        initialized, init_cpu = time.perf_counter() - client.started, client.cpu_s()
        client.search_text(query)
        return initialized, time.perf_counter() - client.started, init_cpu, client.cpu_s()
    finally:
        client.close()


def measure_resync(home: Path, runs: int = RUNS) -> tuple[float, float]:
    """Median seconds of a no-change sync of every folder source, wall and CPU."""
    from kb_mcp.library import Library
    from kb_mcp.settings import load

    with Library(load(home=home, overrides={"embedder": "none"})) as library:
        library.folders.sync()
        walls, cpus = [], []
        for _ in range(runs):
            started, cpu = time.perf_counter(), time.process_time()
            library.folders.sync()
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def wait_until_found(client: StdioClient, query: str, word: str, present: bool) -> float:
    """Seconds until a search for ``query`` does (or no longer does) mention ``word``."""
    started = time.perf_counter()
    while time.perf_counter() - started < FRESHNESS_TIMEOUT_S:
        if (word in client.search_text(query)) == present:
            return time.perf_counter() - started
        time.sleep(POLL_S)
    raise TimeoutError(f"{word!r} still {'missing' if present else 'found'} after the timeout")


def measure_freshness(
    home: Path, folder: Path, runs: int = RUNS
) -> tuple[float, float, float, float]:
    """Median seconds from saving a file to search seeing it (edited, added, deleted), and
    the server's RSS in MB at the end."""
    client = StdioClient(home)
    edits, adds, deletes = [], [], []
    try:
        client.initialize()
        client.search_text("warm up")
        target = next(iter(sorted(folder.rglob("*.md"))))
        original = target.read_text(encoding="utf-8")
        for run in range(runs):
            word = f"zqfreshedit{run}x{os.getpid()}"
            target.write_text(original + f"\n{word}\n", encoding="utf-8")
            edits.append(wait_until_found(client, word, word, True))
            added = folder / f"fresh-{run}.md"
            new_word = f"zqfreshadd{run}x{os.getpid()}"
            added.write_text(f"# Fresh {run}\n\n{new_word}\n", encoding="utf-8")
            adds.append(wait_until_found(client, new_word, new_word, True))
            added.unlink()
            deletes.append(wait_until_found(client, new_word, new_word, False))
        target.write_text(original, encoding="utf-8")
        rss = client.rss_mb()
    finally:
        client.close()
    return statistics.median(edits), statistics.median(adds), statistics.median(deletes), rss


def prepare_library(home: Path, eval_data: Path, files: int) -> Path:
    """The library at ``home`` with one folder source of ``files`` real files (built once)."""
    from kb_mcp.library import Library
    from kb_mcp.settings import load

    folder = home.parent / f"{home.name}-files"
    if not folder.exists():
        build_corpus(folder, eval_data, files)
    with Library(load(home=home, overrides={"embedder": "none"})) as library:
        if not library.folders.folder_sources():
            library.folders.add_folder(folder, name="corpus")
        library.folders.sync()
    return folder


def run_startup_bench(
    home: Path, eval_data: Path, files: int, runs: int = RUNS, *, freshness: bool = True
) -> StartupFigures:
    """Build (or reuse) the library, then measure every figure, medians of ``runs``."""
    folder = prepare_library(home, eval_data, files)
    spawns = [measure_spawn(home, "protein expression in cancer cells") for _ in range(runs)]
    resync = measure_resync(home, runs)
    fresh = measure_freshness(home, folder, runs) if freshness else (None,) * 4
    return StartupFigures(
        files=sum(1 for p in folder.rglob("*") if p.is_file()),
        runs=runs,
        initialize_s=statistics.median(s[0] for s in spawns),
        first_search_s=statistics.median(s[1] for s in spawns),
        initialize_cpu_s=statistics.median(s[2] for s in spawns),
        first_search_cpu_s=statistics.median(s[3] for s in spawns),
        resync_s=resync[0],
        resync_cpu_s=resync[1],
        server_rss_mb=fresh[3],
        edit_s=fresh[0],
        add_s=fresh[1],
        delete_s=fresh[2],
    )


def startup_table(figures: StartupFigures) -> str:
    """The figures as lines a person reads, with the targets of issue 10 beside them."""
    rows = [
        ("initialize answered", figures.initialize_s, 0.5),
        ("first search result", figures.first_search_s, 1.0),
        ("no-change re-sync", figures.resync_s, 0.5),
        ("edited file searchable", figures.edit_s, 2.0),
        ("added file searchable", figures.add_s, 2.0),
        ("deleted file gone", figures.delete_s, 2.0),
    ]
    lines = [
        f"library: {figures.files:,} files; medians of {figures.runs} runs",
        f"  server CPU: {figures.initialize_cpu_s:.3f} s to initialize, "
        f"{figures.first_search_cpu_s:.3f} s to the first search result",
        f"  no-change re-sync CPU: {figures.resync_cpu_s:.3f} s",
    ]
    if figures.server_rss_mb is not None:
        lines.append(f"  server RSS after the freshness runs: {figures.server_rss_mb:.0f} MB")
    for name, value, target in rows:
        shown = "not measured" if value is None else f"{value:.3f} s"
        lines.append(f"  {name:<24} {shown:>12}   (target ≤ {target} s)")
    return "\n".join(lines)
