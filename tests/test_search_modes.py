"""Search modes, fallback and self-explaining scores, through the real engine (issue 8).

A real folder synced into a real ``kb.db``. The vector leg is the engine's port
(``search/vector.VectorLeg``); the leg here is a small real one, character-trigram
similarity over the stored chunks, so fusion, fallback and adjustments are exercised
without a model. Guards against: a vector mode that errors or hangs without an embedder,
a fallback that does not say why, a result whose score does not explain its order, and
adjustments that are applied but not reported.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hash_embedder import HashEmbedder, hash_factory

from kb_mcp.bench.beir import GOLDEN_SET, load_beir
from kb_mcp.bench.retrieval import ingest
from kb_mcp.embed.base import EmbedderUnavailable, EmbeddingSignature
from kb_mcp.library import Library
from kb_mcp.library.lookup import MODEL_LOADING
from kb_mcp.render import search_data, search_text
from kb_mcp.search.calibration import CALIBRATIONS, VectorCalibration
from kb_mcp.search.engine import (
    SearchRequest,
    SearchResult,
    rank_request,
    run_search,
)
from kb_mcp.search.fuse import LegHit
from kb_mcp.search.vector import NO_EMBEDDER, VectorState, building
from kb_mcp.settings import Settings


def trigrams(text: str) -> set[str]:
    text = " ".join(text.lower().split())
    return {text[i : i + 3] for i in range(len(text) - 2)}


class TrigramLeg:
    """A real ``VectorLeg``: chunks ranked by trigram Jaccard similarity to the query."""

    signature = EmbeddingSignature("test", "trigram-jaccard", 0, 2000)

    def __init__(self, library: Library, state: VectorState | None = None) -> None:
        self.library = library
        self._state = state or VectorState.ready()
        self.calls = 0
        self.embed_seconds = 0.0

    def state(self) -> VectorState:
        return self._state

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        self.calls += 1
        started = time.perf_counter()
        wanted = trigrams(query)  # this leg's "embedding" of the question
        self.embed_seconds += time.perf_counter() - started
        rows = self.library.db.conn.execute("SELECT id, text FROM chunks").fetchall()
        scored = sorted(
            ((len(wanted & (t := trigrams(text))) / len(wanted | t), cid) for cid, text in rows),
            key=lambda pair: (-pair[0], pair[1]),
        )
        return [LegHit(cid, rank, score) for rank, (score, cid) in enumerate(scored[:limit], 1)]

    def unembedded(self, chunk_ids: Sequence[int]) -> set[int]:
        return set()  # this leg scores every chunk: none waits for a vector


class DownLeg(TrigramLeg):
    """A leg whose embedder fails mid-query, as an unreachable Ollama does."""

    def search(self, query: str, limit: int, source_id: int | None = None) -> list[LegHit]:
        self.calls += 1
        raise EmbedderUnavailable("ollama at localhost:11434 refused the connection")


NOTES = {
    "rollback.md": "# Rolling back a deployment\n\nRun `make rollback ENV=prod` to return "
    "to the previous release. It takes four minutes.\n",
    "flags.md": "# Feature flags\n\nFlags live in flags.yaml; flip checkout_v2 to disable "
    "the new checkout page.\n",
    "oncall.md": "# On-call rota\n\nThe payments team is paged first for ledger alerts.\n",
    "pool-v1.md": "---\ntitle: Ledger pool size\ndate: 2023-01-10\n---\n\nThe ledger "
    "connection pool holds 20 connections per instance.\n",
    "pool-v2.md": "---\ntitle: Ledger pool size (revised)\ndate: 2024-02-01\nsupersedes: "
    "[pool-v1.md]\n---\n\nThe ledger connection pool holds 40 connections per instance.\n",
    "idea-pool.md": "---\ntitle: 'Idea: ledger pool of 80 connections'\ndate: 2024-03-01\n"
    "---\n\nWhat if the ledger connection pool held 80 connections per instance?\n",
    "tests/test_pool.md": "# test pool\n\nledger connection pool connections instance "
    "pool pool connections.\n",
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    base = tmp_path_factory.mktemp("modes")
    folder = base / "notes"
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    lib = Library(Settings(home=base / "home", embedder="none"))
    lib.folders.add_folder(folder)
    lib.folders.sync()
    yield lib
    lib.close()


def search(library: Library, query: str, mode: str = "auto", vectors=None, **kw) -> SearchResult:
    request = SearchRequest(query, top_k=kw.pop("top_k", 8), mode=mode)
    return run_search(library.db, library.fts, request, vectors=vectors, **kw)


def explained(result: SearchResult) -> None:
    """The order is the score's (the model's probability, times the factor of any move
    the relation pass made), and each hit names the legs that found it."""
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    for hit in result.hits:
        assert 0 < hit.score <= 1
        assert set(hit.leg_ranks) == set(hit.legs) == set(hit.leg_scores)


def test_search_modes_auto_without_embedder_is_keyword_and_no_fallback(library: Library) -> None:
    result = library.lookup.search("rollback the previous release")
    assert (result.mode, result.fallback, result.reason) == ("keyword", None, None)
    assert result.hits[0].title == "Rolling back a deployment"


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_search_modes_vectors_without_embedder_fall_back_to_keyword_with_reason(
    library: Library, mode: str
) -> None:
    keyword = library.lookup.search("rollback the previous release", mode="keyword")
    result = library.lookup.search("rollback the previous release", mode=mode)
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason == NO_EMBEDDER.reason == "no embedder configured (--embedder none)"
    assert result.hits == keyword.hits


def test_search_modes_vectors_still_being_built_fall_back_and_say_how_far(
    library: Library,
) -> None:
    leg = TrigramLeg(library, building(1200, 9000))
    result = search(library, "rollback the previous release", "hybrid", leg)
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason == (
        "vectors for 1,200 of 9,000 passages so far (13 %): keyword only until 95 % have "
        "one (`kb-mcp embed` builds them, a running `kb-mcp serve` in the background)"
    )
    assert leg.calls == 0
    keyword_legs = {"keyword", "document", "feedback"}  # the keyword leg and its companions
    assert result.hits and all(set(h.legs) <= keyword_legs for h in result.hits)


def test_search_modes_auto_with_vectors_still_being_built_says_keyword_and_why(
    library: Library,
) -> None:
    """Issue 22: a default-mode search answered ``mode: keyword`` with no reason while
    the library advertised hybrid; the answer now says it ran keyword only, and why."""
    leg = TrigramLeg(library, building(10, 90))
    result = search(library, "rollback the previous release", "auto", leg)
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason == building(10, 90).reason
    assert result.reason is not None and result.reason.startswith(
        "vectors for 10 of 90 passages so far (11 %): keyword only"
    )
    assert result.hits and leg.calls == 0


@pytest.mark.parametrize("mode", ["auto", "hybrid", "vector"])
def test_search_modes_embedder_failing_mid_query_falls_back_at_once(
    library: Library, mode: str
) -> None:
    leg = DownLeg(library)
    started = time.perf_counter()
    result = search(library, "rollback the previous release", mode, leg)
    assert time.perf_counter() - started < 5
    assert leg.calls == 1
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason == (
        "embedder unavailable: ollama at localhost:11434 refused the connection"
    )
    assert result.hits[0].title == "Rolling back a deployment"


def test_search_modes_hybrid_names_the_legs_that_found_each_result(library: Library) -> None:
    result = search(library, "rolling back a deployment", "hybrid", TrigramLeg(library))
    assert (result.mode, result.fallback, result.reason) == ("hybrid", None, None)
    top = result.hits[0]
    assert top.title == "Rolling back a deployment"
    assert top.legs == ("keyword", "document", "vector")
    assert top.leg_ranks == {"keyword": 1, "document": 1, "vector": 1}
    assert 0 < top.score <= 1  # the model's probability that it answers
    assert result.embed_ms is not None and result.embed_ms >= 0
    assert "embed_ms" not in search_data(result)
    # Documents the keyword leg never matched are still found by the vector leg.
    assert any(h.legs == ("vector",) for h in result.hits)
    explained(result)


def test_search_modes_auto_with_usable_vectors_is_hybrid(library: Library) -> None:
    result = search(library, "rolling back a deployment", "auto", TrigramLeg(library))
    assert result.mode == "hybrid"


def test_search_modes_vector_runs_the_vector_leg_alone(library: Library) -> None:
    result = search(library, "rolling back a deployment", "vector", TrigramLeg(library))
    assert result.mode == "vector"
    assert result.hits and all(h.legs == ("vector",) for h in result.hits)
    assert result.hits[0].title == "Rolling back a deployment"
    explained(result)


def test_search_modes_superseded_version_reports_what_demoted_it(library: Library) -> None:
    result = library.lookup.search("ledger connection pool connections per instance", top_k=10)
    by_title = {h.title: h for h in result.hits}
    old = by_title["Ledger pool size"]
    new = by_title["Ledger pool size (revised)"]
    assert new.rank < old.rank
    idea = by_title["Idea: ledger pool of 80 connections"]
    assert idea.rank > new.rank  # recency never lifts a draft over a current version
    explained(result)


def test_search_modes_render_shows_fallback_legs_and_adjustments(library: Library) -> None:
    result = library.lookup.search("ledger connection pool connections per instance", mode="hybrid")
    text = search_text(result)
    assert "(mode: keyword, fell back to keyword)" in text
    assert "note: no embedder configured (--embedder none)" in text
    assert "legs: keyword #1 (" in text
    data = search_data(result)
    assert data["fallback"] == "keyword"


def test_search_modes_empty_answer_gives_both_reasons(library: Library) -> None:
    result = library.lookup.search("kubernetes helm chart values", mode="hybrid")
    assert result.hits == ()
    assert result.fallback == "keyword"
    assert result.reason is not None
    assert result.reason.endswith("; no embedder configured (--embedder none)")


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Library, list[str]]]:
    beir = load_beir(GOLDEN_SET, "test")
    home: Path = tmp_path_factory.mktemp("golden") / "home"
    lib = Library(Settings(home=home, max_files_per_source=len(beir.docs) + 1, embedder="none"))
    ingest(lib, beir, None)
    yield lib, [q.text for q in beir.queries if q.text.strip()]
    lib.close()


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_search_modes_every_golden_answer_is_in_score_order(
    golden: tuple[Library, list[str]], mode: str
) -> None:
    """Issue 8: rank 1 could show a lower score than rank 2 (freshness re-sorted by bm25)."""
    library, queries = golden
    leg = TrigramLeg(library) if mode == "hybrid" else None
    adjusted = 0
    for query in queries:
        result = search(library, query, mode, leg, top_k=100)
        explained(result)
        adjusted += sum(1 for h in result.hits if h.adjustments)
    assert adjusted > 0  # the set has superseded, speculative and dated versions


ENGLISH_ONLY = TrigramLeg.signature.provider + ":" + TrigramLeg.signature.model


def test_search_modes_english_only_model_sits_out_chinese_questions(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An English-only model fused into a Chinese question drags keyword's ranking down
    (CMRC2018 dev with all-MiniLM: 0.987 → 0.69), so its leg sits those out."""
    monkeypatch.setitem(CALIBRATIONS, ENGLISH_ONLY, VectorCalibration(reads_cjk=False))
    leg = TrigramLeg(library)
    result = search(library, "如何回滚到上一个发布版本 rollback", "hybrid", leg)
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason is not None
    assert result.reason.endswith(
        "test:trigram-jaccard (0 dims) does not read Chinese or Japanese; the vector leg "
        "sat this one out"
    )
    assert leg.calls == 0
    auto = search(library, "回滚发布版本", "auto", leg)
    assert (auto.mode, auto.fallback) == ("keyword", "keyword")  # the default says so too
    assert auto.reason is not None
    assert auto.reason.startswith("no passage matches the query; test:trigram-jaccard")
    english = search(library, "rolling back a deployment", "hybrid", leg)
    assert english.mode == "hybrid"


def test_search_modes_calibrated_weight_is_the_vector_legs_rrf_weight(
    library: Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CALIBRATIONS, ENGLISH_ONLY, VectorCalibration(weight=0.5))
    request = SearchRequest("rolling back a deployment", mode="hybrid")
    ranked = rank_request(library.db, library.fts, request, vectors=TrigramLeg(library))
    assert ranked.ranking is not None
    fused = max(ranked.ranking.fused.values(), key=lambda f: f.score)
    ranks = {c.leg: c.rank for c in fused.contributions}
    assert ranks == {"keyword": 1, "document": 1, "vector": 1}
    assert fused.score == pytest.approx(2 / 61 + 0.5 / 61, rel=1e-3)  # keyword, document


def test_search_modes_keyword_search_never_imports_numpy(tmp_path: Path) -> None:
    """``--embedder none`` stays lean: the engine reaches vectors only through the port."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from kb_mcp.library import Library\n"
        "from kb_mcp.settings import Settings\n"
        f"lib = Library(Settings(home=Path({str(tmp_path / 'home')!r}), embedder='none'))\n"
        "lib.lookup.search('anything', mode='hybrid')\n"
        "print('numpy' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Library]:
    """The notes with real vectors: the library's own index, a real (hashing) embedder."""
    folder = tmp_path / "notes"
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    lib = Library(Settings(home=tmp_path / "home", embedder="local"), make_embedder=hash_factory())
    lib.folders.add_folder(folder)
    lib.folders.sync()
    lib.vectors.embed_pending()
    yield lib
    lib.close()


def test_search_modes_library_runs_hybrid_over_its_own_vectors(embedded: Library) -> None:
    result = embedded.lookup.search("rolling back a deployment", mode="auto")
    assert (result.mode, result.fallback, result.reason) == ("hybrid", None, None)
    top = result.hits[0]
    assert top.title == "Rolling back a deployment"
    assert top.legs == ("keyword", "document", "vector")
    assert 0 < top.leg_scores["vector"] <= 1
    assert result.embed_ms is not None
    explained(result)
    vector = embedded.lookup.search("rolling back a deployment", mode="vector")
    assert vector.mode == "vector"
    assert all(h.legs == ("vector",) for h in vector.hits)
    keyword = embedded.lookup.search("rolling back a deployment", mode="keyword")
    assert (keyword.mode, keyword.embed_ms) == ("keyword", None)


def test_search_modes_library_falls_back_while_vectors_are_being_built(
    embedded: Library, tmp_path: Path
) -> None:
    """Below USABLE_COVERAGE, fused results would favour what was embedded first; the
    reason says what builds the rest (outsider run: nothing does unless a sync or a
    server runs, and "0 of 23,215 passages embedded" alone left a user stuck)."""
    folder = tmp_path / "notes"
    for n in range(40):
        (folder / f"extra-{n}.md").write_text(f"# Extra {n}\n\nSomething else {n}.\n")
    embedded.folders.sync()
    state = embedded.vectors.state()
    assert state.pending > 0
    result = embedded.lookup.search("rolling back a deployment", mode="hybrid")
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason == building(state.embedded, state.embedded + state.pending).reason
    assert "`kb-mcp embed` builds them" in result.reason
    default = embedded.lookup.search("rolling back a deployment")
    assert (default.mode, default.fallback, default.reason) == ("keyword", "keyword", result.reason)
    embedded.vectors.embed_pending()
    done = embedded.lookup.search("rolling back a deployment")
    assert (done.mode, done.fallback, done.reason) == ("hybrid", None, None)


def test_search_modes_hybrid_over_most_vectors_says_what_the_vector_leg_covers(
    embedded: Library, tmp_path: Path
) -> None:
    """Past ``USABLE_COVERAGE`` hybrid runs before every passage has a vector; the
    answer says how many the vector leg covers (issue 22)."""
    folder = tmp_path / "notes"
    for n in range(40):
        (folder / f"extra-{n}.md").write_text(f"# Extra {n}\n\nSomething else {n}.\n")
    embedded.folders.sync()
    embedded.vectors.embed_pending()
    (folder / "late.md").write_text("# Late\n\nA rollback note written after the run.\n")
    embedded.folders.sync()
    state = embedded.vectors.state()
    total = state.embedded + state.pending
    assert state.pending == 1 and state.embedded >= 0.95 * total
    result = embedded.lookup.search("rolling back a deployment")
    assert (result.mode, result.fallback) == ("hybrid", None)
    assert result.reason == (
        f"hybrid over vectors for {total - 1:,} of {total:,} passages; the other 1 is "
        "found by keyword until it has one"
    )
    assert result.hits[0].title == "Rolling back a deployment"
    assert f"note: {result.reason}" in search_text(result)


class LoadingEmbedder(HashEmbedder):
    """A real embedder whose model is still loading until the test says it is loaded
    (the local model's ``loading()``, gated instead of timed)."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded = threading.Event()

    def loading(self) -> bool:
        return not self.loaded.is_set()


def test_search_modes_default_search_while_the_model_loads_says_so(tmp_path: Path) -> None:
    """Issue 22: searches in the first second after a server start ran keyword silently
    while the local model loaded."""
    embedder = LoadingEmbedder()
    settings = Settings(home=tmp_path / "home", embedder="local", allow_agent_writes=True)
    with Library(settings, make_embedder=lambda provider, model: embedder) as lib:
        lib.writing.add_document("Deploy runbook", "Run make rollback to undo a release.", "u:1")
        lib.vectors.embed_pending()
        during = lib.lookup.search("undo a release")
        assert (during.mode, during.fallback, during.reason) == (
            "keyword",
            "keyword",
            MODEL_LOADING,
        )
        assert during.hits
        embedder.loaded.set()
        after = lib.lookup.search("undo a release")
        assert (after.mode, after.fallback, after.reason) == ("hybrid", None, None)


def test_search_modes_library_with_an_unreachable_embedder_says_why(tmp_path: Path) -> None:
    """An Ollama nobody runs: keyword results at once, never an error or a hang."""
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(
        home=tmp_path / "home",
        allow_agent_writes=True,
        embedder="ollama",
        ollama_host=f"http://127.0.0.1:{port}",
    )
    with Library(settings) as lib:
        lib.writing.add_document("Deploy runbook", "Run make rollback to undo a release.", "u:1")
        started = time.perf_counter()
        result = lib.lookup.search("undo a release", mode="hybrid")
        assert time.perf_counter() - started < 10
    assert (result.mode, result.fallback) == ("keyword", "keyword")
    assert result.reason is not None and result.reason.startswith("embedder unavailable:")
    assert result.hits
