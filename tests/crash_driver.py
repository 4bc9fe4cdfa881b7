"""A victim for ``test_adversarial_crash.py``: one library operation, run until killed.

``python tests/crash_driver.py <operation> <home> <acks>``: opens the library on <home>,
prints ``ready`` when the operation is about to start, and runs it. ``add`` appends each
document's word to <acks> only after ``add_document`` returned (``os.write`` on an
``O_APPEND`` descriptor, so the line survives ``kill -9``): an acknowledged document.
``embed`` embeds with a slowed hash embedder under the model named in <acks>; ``fts``
runs the first search of a library whose FTS index is marked old (the lazy migration).
``graph`` adds entity-rich documents that supersede one another (entities, mentions and
document relations written with the chunks) and keeps replacing one scratch document
(so the graph also takes rows back), acknowledged like ``add``. ``enrich`` runs the
graph's LLM pass under the model named in <acks>, against a ``tests/ollama_server.py``
started in this process (it dies with it) playing a model that names the text's words.
The CLI operations (sync, reindex --rebuild) and the server with its watcher are killed
as ``kb-mcp`` itself.
"""

from __future__ import annotations

import json
import os
import re
import sys
from itertools import count
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from hash_embedder import HashEmbedder, LoggingEmbedder
from ollama_server import serve_ollama

from kb_mcp.library import Library
from kb_mcp.settings import Settings

# Each chat request of the LLM pass waits this long (none: ~200 chunks/s on 2 cores, so a
# pass over the crash test's ~330 chunks lasts past the kill window as it is).
CHAT_DELAY_S = 0.0


def naming_model(body: dict[str, Any]) -> str:
    """A model that names the capitalised words of the chunk (they occur in its text, so
    ``graph/llm.validate`` keeps them) and relates the first two."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]{3,}\b", text)))[:4]
    entities = [{"name": name, "type": "concept"} for name in names]
    relations = (
        [{"source": names[0], "relation": "depends_on", "target": names[1]}]
        if len(names) > 1
        else []
    )
    return json.dumps({"entities": entities, "relations": relations})


def graph_body(n: int, word: str) -> str:
    """A document the heuristic extractor finds entities in, superseding the one before."""
    return (
        f"---\nsupersedes: ADR-{n - 1:04}\n---\n# ADR-{n:04} Move Svc{n}Engine to BlobStore\n\n"
        + f"The `Svc{n}Engine` keeps {word} data in BlobStore, owned by Team Atlas. "
        f"See ADR-{n - 1:04} and TICKET-{n}.\n\n" * 12
    )


def llm_settings(home: Path, host: str, model: str) -> Settings:
    """A keyword-only library whose graph's LLM pass asks ``model`` at ``host``."""
    return Settings(
        home=home, embedder="none", graph_extractor="ollama", ollama_host=host, graph_model=model
    )


def enrich(home: Path, model: str) -> None:
    with serve_ollama() as server:
        server.chat_models = {model}
        server.chat_reply = naming_model
        server.delay_s = CHAT_DELAY_S
        with Library(llm_settings(home, server.url, model)) as library:
            print("ready", flush=True)
            report = library.enrichment.run()
            print(f"done {report}", flush=True)


def main(operation: str, home: Path, acks: Path) -> None:
    if operation == "enrich":
        enrich(home, acks.read_text().strip())
        return
    if operation == "embed":
        model = acks.read_text().strip()
        slow = LoggingEmbedder(HashEmbedder(model), acks.with_suffix(".log"), pause_s=0.05)
        settings = Settings(home=home, embedder="test", embed_model=model)
        with Library(settings, make_embedder=lambda _p, _m: slow) as library:
            print("ready", flush=True)
            library.vectors.embed_pending(batch=8)
        return
    with Library(Settings(home=home, embedder="none", allow_agent_writes=True)) as library:
        print("ready", flush=True)
        if operation == "fts":
            library.lookup.search("restore steps", mode="keyword")
            return
        fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        start = sum(1 for _ in acks.open()) if acks.exists() else 0
        for n in count(start):
            word = f"crash{n}w"
            if operation == "graph":
                library.writing.add_document(f"ADR-{n:04}", graph_body(n, word), f"t://crash/{n}")
                os.write(fd, f"{word}\n".encode())
                scratch = f"# Scratch\n\nThe `Scratch{n % 5}Thing` of Team Atlas.\n"
                library.writing.add_document("Scratch", scratch, "t://crash/scratch")
                continue
            body = f"# Note {n}\n\n" + f"The word {word} is here, restore steps.\n\n" * 40
            library.writing.add_document(f"Note {n}", body, f"t://crash/{n}")
            os.write(fd, f"{word}\n".encode())


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
