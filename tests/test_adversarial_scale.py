"""Resources at scale: every search on a large library answers within its time budget (issue 11).

A search runs its SQL under ``search_timeout_ms`` of CPU time (``store/db.deadline``),
and ``DEADLINE_WALL_FACTOR`` times that of wall-clock time on a busy machine; past it the
caller gets ``[unavailable] search took longer than … ms of CPU and was stopped`` (or
``search was stopped after … ms: the machine is busy``). The promise: whatever the
question, a search answers (results, or that clear over-budget error) within the wall
bound plus the Python work around the SQL, and never hangs.

The library is built the fast way: one document through ``add_document`` (so every
lazily derived index is current), then documents and chunks written in bulk through the
store's own row functions and ``index/fts.add_chunks`` (the FTS5 index the keyword leg
reads), skipping chunking, redaction and the graph. Ingest through ``sync`` runs at about
0.14 MB/s here (README's perf table: 10k chunks in 91 s), so a 300k-chunk library would
take over 45 minutes; the bulk build takes minutes. Passages are the real text
``kb-mcp bench perf`` uses (SciFact, NFCorpus, CMRC2018 and variants of them) when
``../shared/eval-data`` is there, else sentences of a Zipf-distributed vocabulary.

Questions: the public sets' test queries, and hostile ones: the commonest words, long
lists of them, one- and two-letter terms, CJK runs, identifiers, 4,000-character queries.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.bench.perf import DATA_DIR, load_sets, passages
from kb_mcp.chunk import Chunk
from kb_mcp.errors import Unavailable
from kb_mcp.index import fts
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.db import DEADLINE_WALL_FACTOR

CI_CHUNKS = 3_000
LONG_CHUNKS = 300_000
PER_DOCUMENT = 8  # chunks per document, as bench perf's notes (8 sections each)
BATCH_DOCUMENTS = 2_000  # documents per write transaction while building
# The Python work around the SQL (planning, fusion, adjustments, rendering) is outside
# the deadline; on a loaded 2-core machine it is well under this.
SLACK_S = 3.0
SEARCHES_CI, SEARCHES_LONG = 30, 100


def synthetic_passages(count: int) -> Iterator[tuple[str, str]]:
    """Sentences over a Zipf-distributed vocabulary: a few very common terms, a long tail."""
    rng = random.Random(11)
    vocabulary = [f"w{n}" for n in range(1, 50_001)]
    cumulative = list(itertools.accumulate(1 / n for n in range(1, 50_001)))
    for n in range(count):
        words = rng.choices(vocabulary, cum_weights=cumulative, k=80)
        yield f"Passage {n}", " ".join(words) + "."


def passage_source(count: int) -> Iterator[tuple[str, str]]:
    """Real text for the long run when the eval data is there; synthetic for the normal
    run (loading the sets alone takes ~5 s)."""
    if count > CI_CHUNKS and DATA_DIR.is_dir():
        return passages(load_sets(), count)
    return synthetic_passages(count)


def build(home: Path, chunks: int) -> int:
    """A library of about ``chunks`` chunks; the count it holds."""
    settings = Settings(home=home, embedder="none", allow_agent_writes=True)
    with Library(settings) as library:
        library.writing.add_document("Seed", "# Seed\n\nrestore steps.\n", "t://seed")
        items = passage_source(chunks)
        now = "2026-01-01T00:00:00+00:00"
        n = 0
        while n * PER_DOCUMENT < chunks:
            with library.db.write() as conn:
                for _ in range(BATCH_DOCUMENTS):
                    group = [next(items, None) for _ in range(PER_DOCUMENT)]
                    group = [g for g in group if g is not None]
                    if not group:
                        break
                    _store(conn, n, group, now)
                    n += 1
                    if n * PER_DOCUMENT >= chunks:
                        break
        return library.catalog.overview().chunks


def _store(conn, n: int, group: list[tuple[str, str]], now: str) -> None:
    sections = [f"## {title}\n\n{text}\n" for title, text in group]
    text = f"# Notes {n}\n\n" + "\n".join(sections)
    key = f"a-{hashlib.sha256(str(n).encode()).hexdigest()[:16]}"
    doc = rows.NewDocument(
        key, f"Notes {n}", f"t://scale/{n}", "markdown", None, text,
        hashlib.sha256(text.encode()).hexdigest(), None, (), now, now,
    )  # fmt: skip
    document_id = rows.insert_document(conn, doc)  # no location: nothing here lists them
    chunks, line = [], 3
    for ordinal, (title, body) in enumerate(group):
        chunks.append(
            Chunk(ordinal, (f"Notes {n}", title), line, line + 2, f"## {title}\n\n{body}")
        )
        line += 4
    ids = rows.insert_chunks(conn, document_id, chunks)
    fts.add_chunks(
        conn,
        (
            (cid, doc.title, c.heading_path, c.text, None)
            for cid, c in zip(ids, chunks, strict=True)
        ),
    )


def questions(count: int, *, long: bool) -> list[str]:
    """The sets' test queries and hostile ones, interleaved."""
    rng = random.Random(5)
    common = "the of and in to a is for with that on by as are from at this be an"
    hostile = [
        common,
        " ".join([common] * 20)[:4000],
        "a b c d e f g h i j k l m n o p q r s t u v w x y z",
        "的 是 在 了 和 有 中 人 这 一 上 为 个 国 我 以 要 他 时 来",
        "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12",
        "getUserById parseHTTPResponse XMLHttpRequest",
        '"the" NOT OR AND NEAR( * ^ -',
        "x" * 4000,
        " ".join(f"w{n}" for n in range(1, 700))[:4000],
    ]
    real = [q for s in load_sets() for q in s.queries] if long and DATA_DIR.is_dir() else []
    rng.shuffle(real)
    mixed = []
    for n in range(count):
        pool = hostile if n % 2 == 0 or not real else real
        mixed.append(pool[(n // 2) % len(pool)])
    return mixed


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(CI_CHUNKS, id="ci"),
        pytest.param(LONG_CHUNKS, id="long", marks=pytest.mark.adversarial),
    ],
)
def test_scale_every_search_answers_within_its_time_budget(
    tmp_path: Path, chunks: int, figures
) -> None:
    """issue 11 (resources): 'a search on a 300k-chunk library never exceeds its time
    budget'; every answer is results or the clear over-budget error, in budget + slack."""
    home = tmp_path / "home"
    started = time.monotonic()
    held = build(home, chunks)
    built_s = time.monotonic() - started
    settings = Settings(home=home, embedder="none")
    budget_s = settings.search_timeout_ms / 1000
    wall_s = budget_s * DEADLINE_WALL_FACTOR
    long = chunks != CI_CHUNKS
    asked = questions(SEARCHES_LONG if long else SEARCHES_CI, long=long)
    walls, stopped, answered = [], 0, 0
    with Library(settings) as library:
        library.lookup.search("warm up the caches", mode="keyword")
        for query in asked:
            for mode in ("keyword", "auto"):
                began = time.monotonic()
                try:
                    library.lookup.search(query, mode=mode)
                    answered += 1
                except Unavailable as exc:
                    assert "search took longer than" in exc.message or (
                        "the machine is busy" in exc.message
                    ), exc.message
                    stopped += 1
                walls.append(time.monotonic() - began)
                assert walls[-1] < wall_s + SLACK_S, (query[:80], mode, walls[-1])
    walls.sort()
    figures(
        "resources",
        f"searches at {held:,} chunks (built in {built_s:.0f} s): {len(walls)} "
        f"({answered} answered, {stopped} stopped at the {budget_s:.0f} s budget); wall p50 "
        f"{walls[len(walls) // 2] * 1000:.0f} ms, max {walls[-1] * 1000:.0f} ms "
        f"(bound {wall_s + SLACK_S:.0f} s)",
    )
