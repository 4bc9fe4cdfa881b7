"""Server memory at scale (issue 10: ``kb-mcp serve`` RSS ≤ 200 MB at 300k chunks).

Not a test (pytest does not collect it): a measurement, run by hand, because building
300k chunks takes many minutes. ``python tests/server_rss.py HOME [CHUNKS]`` builds a
library of about CHUNKS chunks in HOME the scale test's fast way (once: an existing
``kb.db`` is reused), spawns ``kb-mcp serve`` on it over stdio, runs 200 searches (the
scale test's mix of the public sets' queries and hostile ones) and prints the server's
peak and current resident memory from ``/proc`` (Linux only), anonymous and file-backed
(pages of the memory-mapped ``kb.db``, which the kernel can drop) apart, and where the
resident pages are (``/proc/<pid>/smaps``: the heap, other anonymous mappings, ``kb.db``,
the shared libraries).

``--vectors`` first stores a random unit vector for every chunk under the ``local``
embedder's signature (once; embedding 300k passages with the model would take hours on
two cores, and the server's memory does not depend on which vectors they are), so a
server run with ``SERVER_RSS_EMBEDDER=local`` searches hybrid: the sign codes in memory,
the model loaded, every question embedded.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_adversarial_scale as scale

SEARCHES = 200
CHECKPOINTS = (1, 10, 50, 100)
VECTOR_BATCH = 10_000


def status(pid: int, key: str) -> int:
    """A ``/proc/<pid>/status`` field in MB."""
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
    raise KeyError(key)


def server_pid(home: Path) -> int:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except OSError:
            continue
        args = command.split(b"\0")
        if b"serve" in args and str(home).encode() in args:  # the exact --home argument
            return int(entry)
    raise RuntimeError("no kb-mcp serve process found")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> str:
    fields = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
    figures = ", ".join(f"{key} {status(pid, key)} MB" for key in fields)
    return f"{figures}, CPU {cpu_seconds(pid):.1f} s"


def resident_parts(pid: int) -> dict[str, int]:
    """Resident MB by kind of mapping: ``[heap]`` (the main malloc arena), other
    anonymous memory (thread arenas, large mallocs, numpy buffers, stacks), ``kb.db``'s
    memory map, the onnxruntime library, the other shared libraries and files."""
    parts: dict[str, int] = {}
    name = ""
    with open(f"/proc/{pid}/smaps") as file:
        for line in file:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:
                name = head[5] if len(head) > 5 else ""
            elif head[0] == "Rss:":
                if name == "[heap]":
                    kind = "heap"
                elif name == "" or name.startswith("[stack") or name.startswith("[anon"):
                    kind = "other anon"
                elif "kb.db" in name:
                    kind = "kb.db"
                elif "onnxruntime" in name:
                    kind = "onnxruntime .so"
                else:
                    kind = "libraries, files"
                parts[kind] = parts.get(kind, 0) + int(head[1])
    return {kind: kib // 1024 for kind, kib in sorted(parts.items())}


def add_vectors(home: Path) -> int:
    """A random unit vector for every chunk without one, under the local signature."""
    import numpy as np

    from kb_mcp.embed.local import LocalEmbedder
    from kb_mcp.index import vectors
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    rng = np.random.default_rng(7)
    signature = LocalEmbedder().signature
    stored, last = 0, 0
    with Library(Settings(home=home, embedder="none")) as library:
        with library.db.write() as conn:
            sig_id = vectors.ensure_signature(conn, signature)
        while True:
            found = library.db.query(
                "SELECT id FROM chunks WHERE id > ? ORDER BY id LIMIT ?", (last, VECTOR_BATCH)
            )
            ids = [row[0] for row in found]
            if not ids:
                return stored
            matrix = rng.standard_normal((len(ids), signature.dims), dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            with library.db.write() as conn:
                stored += vectors.store_vectors(conn, sig_id, ids, matrix)
            last = ids[-1]


async def measure(home: Path) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env["KB_MCP_EMBEDDER"] = env.get("SERVER_RSS_EMBEDDER", "none")
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "kb_mcp", "serve", "--home", str(home)],
        env=env,
        keep_alive=False,
        log_file=home / "server-rss.log",
    )
    questions = scale.questions(SEARCHES, long=True)
    async with Client(transport, timeout=300) as client:
        pid = server_pid(home)
        print(f"after initialize: {memory(pid)}", flush=True)
        started, errors = time.monotonic(), 0
        for n, question in enumerate(questions, 1):
            try:
                await client.call_tool("search", {"query": question})
            except Exception:  # an over-budget search is an answer too; count it
                errors += 1
            if n in CHECKPOINTS:  # when the peak came: the model's load, or later
                print(f"after {n} searches: {memory(pid)}", flush=True)
        took = time.monotonic() - started
        print(f"{SEARCHES} searches in {took:.0f} s ({errors} errors): {memory(pid)}")
        print(f"resident MB by mapping: {resident_parts(pid)}")


def main() -> None:
    flags = {arg for arg in sys.argv[1:] if arg.startswith("--")}
    args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    home = Path(args[0])
    chunks = int(args[1]) if len(args) > 1 else scale.LONG_CHUNKS
    if not (home / "kb.db").exists():
        started = time.monotonic()
        built = scale.build(home, chunks)
        print(f"built {built} chunks in {time.monotonic() - started:.0f} s", flush=True)
    if "--vectors" in flags and not (home / "vectors-added").exists():
        started = time.monotonic()
        added = add_vectors(home)
        (home / "vectors-added").write_text(f"{added}\n")
        print(f"stored {added} vectors in {time.monotonic() - started:.0f} s", flush=True)
    asyncio.run(measure(home))


if __name__ == "__main__":
    main()
