"""Server memory at scale (issue 10: ``kb-mcp serve`` RSS ≤ 200 MB at 300k chunks).

Not a test (pytest does not collect it): a measurement, run by hand, because building
300k chunks takes many minutes. ``python tests/server_rss.py HOME [CHUNKS]`` builds a
library of about CHUNKS chunks in HOME the scale test's fast way (once: an existing
``kb.db`` is reused), spawns ``kb-mcp serve`` on it over stdio, runs 200 searches (the
scale test's mix of the public sets' queries and hostile ones) and prints the server's
peak and current resident memory from ``/proc`` (Linux only), anonymous and file-backed
(pages of the memory-mapped ``kb.db``, which the kernel can drop) apart.
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
        if b"kb_mcp\0serve" in command and str(home).encode() in command:
            return int(entry)
    raise RuntimeError("no kb-mcp serve process found")


def memory(pid: int) -> str:
    fields = ("VmHWM", "VmRSS", "RssAnon", "RssFile")
    return ", ".join(f"{key} {status(pid, key)} MB" for key in fields)


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
        for question in questions:
            try:
                await client.call_tool("search", {"query": question})
            except Exception:  # an over-budget search is an answer too; count it
                errors += 1
        took = time.monotonic() - started
        print(f"{SEARCHES} searches in {took:.0f} s ({errors} errors): {memory(pid)}")


def main() -> None:
    home = Path(sys.argv[1])
    chunks = int(sys.argv[2]) if len(sys.argv) > 2 else scale.LONG_CHUNKS
    if not (home / "kb.db").exists():
        started = time.monotonic()
        built = scale.build(home, chunks)
        print(f"built {built} chunks in {time.monotonic() - started:.0f} s", flush=True)
    asyncio.run(measure(home))


if __name__ == "__main__":
    main()
