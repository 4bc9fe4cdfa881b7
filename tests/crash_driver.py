"""A victim for ``test_adversarial_crash.py``: one library operation, run until killed.

``python tests/crash_driver.py <operation> <home> <acks>``: opens the library on <home>,
prints ``ready`` when the operation is about to start, and runs it. ``add`` appends each
document's word to <acks> only after ``add_document`` returned (``os.write`` on an
``O_APPEND`` descriptor, so the line survives ``kill -9``): an acknowledged document.
``embed`` embeds with a slowed hash embedder under the model named in <acks>; ``fts``
runs the first search of a library whose FTS index is marked old (the lazy migration).
The CLI operations (sync, reindex --rebuild) are killed as ``kb-mcp`` itself.
"""

from __future__ import annotations

import os
import sys
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hash_embedder import HashEmbedder, LoggingEmbedder

from kb_mcp.library import Library
from kb_mcp.settings import Settings


def main(operation: str, home: Path, acks: Path) -> None:
    if operation == "embed":
        model = acks.read_text().strip()
        slow = LoggingEmbedder(HashEmbedder(model), acks.with_suffix(".log"), pause_s=0.05)
        settings = Settings(home=home, embedder="test", embed_model=model)
        with Library(settings, make_embedder=lambda _p, _m: slow) as library:
            print("ready", flush=True)
            library.embed_pending(batch=8)
        return
    with Library(Settings(home=home, embedder="none", allow_agent_writes=True)) as library:
        print("ready", flush=True)
        if operation == "fts":
            library.search("restore steps", mode="keyword")
            return
        fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        start = sum(1 for _ in acks.open()) if acks.exists() else 0
        for n in count(start):
            word = f"crash{n}w"
            body = f"# Note {n}\n\n" + f"The word {word} is here, restore steps.\n\n" * 40
            library.add_document(f"Note {n}", body, f"t://crash/{n}")
            os.write(fd, f"{word}\n".encode())


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
