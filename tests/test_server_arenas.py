"""``kb-mcp serve`` caps glibc's malloc arenas (``server/arenas.py``, issue 10 memory).

A served subprocess takes tool calls from four threads at once (its worker pool then
runs several threads that allocate), and its ``/proc/<pid>/maps`` is read: every arena
but the main one lives in heaps that glibc maps ``HEAP_MAX_SIZE`` (64 MiB) at a time,
aligned to 64 MiB, the part in use read-write and the rest reserved (``---p``). Without
the cap each allocating thread gets an arena of its own (up to 8 per core), so this
server held several such heaps; with it, the main arena and one more.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from raw_server import RawServer

from kb_mcp.library import Library
from kb_mcp.server import arenas
from kb_mcp.settings import Settings

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or arenas._glibc() is None,
    reason="malloc arenas are glibc's, and /proc is Linux's",
)

HEAP_BYTES = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: 2 × DEFAULT_MMAP_THRESHOLD_MAX
THREADS = 4
CALLS = 80


def thread_heaps(pid: int) -> list[str]:
    """The 64 MiB-aligned anonymous mappings that span exactly 64 MiB, read-write part
    and reserved rest together: glibc's heaps of its non-main arenas."""
    spans: list[tuple[int, int, str]] = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5:  # a named mapping (a file, [heap], [stack])
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        spans.append((start, end, fields[1]))
    heaps = []
    for i, (start, end, perms) in enumerate(spans):
        if start % HEAP_BYTES or not perms.startswith("rw"):
            continue
        if i + 1 < len(spans) and spans[i + 1][0] == end and spans[i + 1][2] == "---p":
            end = spans[i + 1][1]
        if end - start == HEAP_BYTES:
            heaps.append(f"{start:x}")
    return heaps


def test_configure_is_accepted_by_glibc() -> None:
    assert arenas.configure() is True


def test_serve_keeps_at_most_one_arena_beside_the_main_one(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    home = tmp_path / "home"
    body = "\n\n".join(f"## Part {i}\n\nrestore steps, part {i}. " * 8 for i in range(40))
    with Library(Settings(home=home, embedder="none")) as library:
        library.writing.add_document("Big", f"# Big\n\n{body}\n", "t://big", by_agent=False)
    server = RawServer(home, tmp_path / "stderr.log", child_env)
    server.handshake()
    bad: list[str] = []

    def worker(offset: int) -> None:
        for n in range(offset, CALLS, THREADS):
            if n % 2:
                reply = server.tool("search", query=f"restore steps part {n % 40}")
            else:
                reply = server.tool("read", doc="t://big")
            if "result" not in reply:
                bad.append(str(reply)[:200])

    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        heaps = thread_heaps(server.pid)
    finally:
        server.close()
    assert bad == []
    assert len(heaps) <= arenas.ARENA_MAX - 1, heaps
