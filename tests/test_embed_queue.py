"""embed/queue.py and its wiring: batches, retries, kill -9, model changes, background work.

The embedders are the real test embedders of ``tests/hash_embedder.py``; the provider
failure is ``FlakyEmbedder`` raising ``EmbedderUnavailable`` as a provider does. The kill
test runs the queue in a real subprocess and ends it with SIGKILL mid-run. Guards: a
batch embedded inside a write transaction (blocking syncs), a failure that loses the
documents' place or re-chunks them, work done twice after a crash, vectors of two models
compared, and background embedding that never retries (issue 8, "Index").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hash_embedder import FlakyEmbedder, HashEmbedder, hash_factory

from kb_mcp.embed.base import EmbedKind
from kb_mcp.embed.queue import EmbedReport, embed_pending
from kb_mcp.fsutil import FileLock
from kb_mcp.index import vectors
from kb_mcp.library import Library
from kb_mcp.server.background import BackgroundEmbedder
from kb_mcp.settings import Settings
from kb_mcp.store.db import Database

TESTS = Path(__file__).resolve().parent


def notes(count: int) -> list[tuple[str, str, str]]:
    """(title, text, uri) of ``count`` small distinct notes, one chunk each."""
    return [
        (
            f"Note {i}",
            f"# Topic {i}\n\nbird number {i} sings at dawn near pond {i % 5}.",
            f"n://{i}",
        )
        for i in range(count)
    ]


def settings(home: Path, **values: object) -> Settings:
    return Settings(home=home, allow_agent_writes=True, **{"embedder": "local", **values})


@pytest.fixture
def lib(home: Path) -> Iterator[Library]:
    opened = Library(settings(home), make_embedder=hash_factory())
    try:
        yield opened
    finally:
        opened.close()


def fill(library: Library, count: int) -> None:
    for title, text, uri in notes(count):
        library.writing.add_document(title, text, uri)


def signature_id(library: Library, embedder: HashEmbedder) -> int:
    with library.db.write() as conn:
        return vectors.ensure_signature(conn, embedder.signature)


class WriterProbe(HashEmbedder):
    """Embeds, and first checks another connection can take the write lock right now."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.other = Database(path, busy_timeout_ms=50)
        self.could_write: list[bool] = []

    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        try:
            with self.other.write() as conn:
                conn.execute("UPDATE meta SET value = value WHERE key = 'probe'")
            self.could_write.append(True)
        except Exception:
            self.could_write.append(False)
        return super().embed(texts, kind)


def test_embed_queue_embeds_outside_any_write_transaction(lib: Library) -> None:
    fill(lib, 10)
    probe = WriterProbe(lib.db.path)
    try:
        report = embed_pending(lib.db, probe, signature_id(lib, probe), batch=3)
    finally:
        probe.other.close()
    assert report.embedded == 10 and probe.could_write == [True] * 4


def test_embed_queue_reports_progress_in_batches(lib: Library) -> None:
    fill(lib, 7)
    embedder = HashEmbedder()
    seen: list[tuple[int, int]] = []
    sig_id = signature_id(lib, embedder)
    report = embed_pending(
        lib.db, embedder, sig_id, batch=3, progress=lambda d, t, _: seen.append((d, t))
    )
    assert seen == [(3, 7), (6, 7), (7, 7)]
    assert (report.embedded, report.pending, report.error, embedder.calls) == (7, 0, None, 3)


def test_embed_queue_stops_between_batches_when_asked(lib: Library) -> None:
    fill(lib, 9)
    embedder = HashEmbedder()
    sig_id = signature_id(lib, embedder)
    stop = lambda: embedder.calls > 0  # noqa: E731
    report = embed_pending(lib.db, embedder, sig_id, batch=4, should_stop=stop)
    assert (report.embedded, report.pending, report.error) == (4, 5, None)


def test_embed_queue_retries_after_a_failing_embedder_without_rechunking(home: Path) -> None:
    inner = HashEmbedder()
    flaky = FlakyEmbedder(inner, fail_after=1)
    with Library(settings(home), make_embedder=lambda p, m: flaky) as library:
        fill(library, 8)
        chunks_before = library.db.query("SELECT id, text FROM chunks ORDER BY id")
        report = library.vectors.embed_pending(batch=3)
        assert report is not None and (report.embedded, report.failed) == (3, 3)
        assert report.error is not None and "connection refused" in report.error
        health = library.catalog.overview().health
        assert health["embed_failed_documents"] == 3
        assert "connection refused" in health["embed_error"]
        assert health["embed_pending"] == 5
        marked = library.db.query("SELECT COUNT(*) FROM documents WHERE embed_pending = 1")
        assert marked == [(3,)]

        flaky.failing = False  # the provider is back: the next round picks up the rest
        report = library.vectors.embed_pending(batch=3)
        assert report is not None
        assert (report.embedded, report.pending, report.error) == (5, 0, None)
        assert library.db.query("SELECT id, text FROM chunks ORDER BY id") == chunks_before
        assert library.db.query("SELECT COUNT(*) FROM documents WHERE embed_pending = 1") == [(0,)]
        health = library.catalog.overview().health
        assert (health["embed_error"], health["embed_failed_documents"]) == (None, 0)
        assert inner.texts == 8  # every text embedded exactly once


class WrongDims(HashEmbedder):
    def embed(self, texts: list[str], kind: EmbedKind = "passage") -> np.ndarray:
        return super().embed(texts, kind)[:, :32]


def test_embed_queue_refuses_vectors_of_the_wrong_size(lib: Library) -> None:
    fill(lib, 2)
    embedder = WrongDims()
    sig_id = signature_id(lib, embedder)
    report = embed_pending(lib.db, embedder, sig_id)
    assert report.embedded == 0 and report.error is not None and "expected (2, 64)" in report.error
    assert vectors.totals(lib.db.conn, sig_id) == (0, 2)


def test_embed_pending_skips_when_another_process_embeds_this_signature(lib: Library) -> None:
    fill(lib, 2)
    key = HashEmbedder().signature.key
    with FileLock(lib.home / "locks" / f"embed-{key}.lock") as lock:
        assert lock.acquire()
        assert lib.vectors.embed_pending(wait=False) is None
    report = lib.vectors.embed_pending(wait=False)
    assert report is not None and report.embedded == 2


def test_embed_model_change_searches_the_old_vectors_until_the_new_are_complete(
    home: Path,
) -> None:
    factory = hash_factory()
    with Library(settings(home, embed_model="model-a"), make_embedder=factory) as old:
        fill(old, 6)
        old.vectors.embed_pending()
        old_state = old.vectors.state()
    with Library(settings(home, embed_model="model-b"), make_embedder=factory) as new:
        state = new.vectors.state()
        assert state.usable and state.signature_id == old_state.signature_id
        assert state.embedder is factory("test", "model-a")  # queries embedded by model A

        calls = factory("test", "model-b")
        new.vectors.embed_pending(batch=4, should_stop=lambda: calls.calls >= 1)
        state = new.vectors.state()
        assert state.signature is not None and state.signature.model == "model-a"
        assert (state.embedded, state.pending) == (6, 0)
        assert new.catalog.overview().health["embed_pending"] == 0  # the signature searched

        report = new.vectors.embed_pending(batch=4)
        assert report is not None and report.complete
        state = new.vectors.state()
        assert state.signature is not None and state.signature.model == "model-b"
        assert state.embedder is factory("test", "model-b")
        assert [r.model for r in vectors.signatures(new.db.conn)] == ["model-b"]
        for phase_state in (state, old_state):  # never one model's query on another's vectors
            assert phase_state.embedder.signature.key == phase_state.signature.key


def test_embed_model_change_with_the_old_provider_gone_uses_the_new_partial_vectors(
    home: Path,
) -> None:
    with Library(settings(home, embed_model="model-a"), make_embedder=hash_factory()) as old:
        fill(old, 6)
        old.vectors.embed_pending()
    only_b = hash_factory()
    gone = FlakyEmbedder(HashEmbedder("model-a"))
    gone.failing = True

    def make(provider: str, model: str | None):
        return gone if model == "model-a" else only_b(provider, model)

    with Library(settings(home, embed_model="model-b"), make_embedder=make) as new:
        assert not new.vectors.state().usable
        assert "vectors for 0 of 6 passages so far" in (new.vectors.state().reason or "")
        b = only_b("test", "model-b")
        new.vectors.embed_pending(batch=4, should_stop=lambda: b.calls >= 1)
        state = new.vectors.state()
        assert state.usable and state.signature is not None
        assert (state.signature.model, state.embedded, state.pending) == ("model-b", 4, 2)


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from hash_embedder import HashEmbedder, LoggingEmbedder
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    home, log, hold_after = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) or None
    embedder = LoggingEmbedder(HashEmbedder(), log, hold_after=hold_after)
    settings = Settings(home=home, embedder="local")
    with Library(settings, make_embedder=lambda p, m: embedder) as library:
        report = library.vectors.embed_pending(batch=4)
    print(report.embedded, report.pending)
    """
)


def test_embed_queue_resumes_after_kill_9_without_embedding_twice(
    tmp_path: Path, home: Path, child_env: dict[str, str]
) -> None:
    with Library(settings(home)) as library:
        fill(library, 40)
    script = tmp_path / "embed_run.py"
    script.write_text(KILL_SCRIPT.format(tests=str(TESTS)))
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    run = [sys.executable, str(script), str(home)]
    # The first run holds its third batch until it is killed: two batches are in, and it
    # cannot finish first however late this test looks (it paused 0.15 s a batch, which a
    # loaded machine could sleep through).
    victim = subprocess.Popen([*run, str(first_log), "2"], env=child_env)
    deadline = time.monotonic() + 60
    db = Database(home / "kb.db")
    try:
        while stored_codes(db) < 8 and time.monotonic() < deadline:  # two batches in
            assert victim.poll() is None, "the run ended before it was killed"
            time.sleep(0.02)
        assert victim.poll() is None, "the run ended before it was killed"
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(60)
        committed = stored_codes(db)
    finally:
        db.close()
    assert 8 <= committed < 40
    done = subprocess.run(
        [*run, str(second_log), "0"], env=child_env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(40 - committed), "0"]
    first = first_log.read_text().split()
    second = second_log.read_text().split()
    assert len(second) == 40 - committed  # nothing committed before the kill came again
    assert not set(second) & set(first[:committed])
    with Library(settings(home)) as library:
        key = HashEmbedder().signature.key
        assert library.db.query(f"SELECT COUNT(*) FROM vec_codes_{key}") == [(40,)]
        assert library.db.query(f"SELECT COUNT(*) FROM vec_floats_{key}") == [(40,)]


def stored_codes(db: Database) -> int:
    """Vectors committed under the test embedder's signature (0 before its table exists)."""
    table = f"vec_codes_{HashEmbedder().signature.key}"
    if not db.query("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)):
        return 0
    return db.query(f"SELECT COUNT(*) FROM {table}")[0][0]


def wait_until(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_background_embedder_follows_new_documents_and_retries_after_failures(
    home: Path,
) -> None:
    inner = HashEmbedder()
    flaky = FlakyEmbedder(inner)
    library = Library(settings(home), make_embedder=lambda p, m: flaky)
    worker = BackgroundEmbedder(lambda: library, start_delay_s=0, backoff_s=0.05)
    worker.start()
    try:
        fill(library, 5)

        def embedded() -> int:
            return library.vectors.state().embedded

        assert wait_until(lambda: embedded() == 5)
        flaky.failing = True
        library.writing.add_document("Late", "# Late\n\nA late bird.", "n://late")
        assert wait_until(lambda: flaky.failures >= 2)  # retried after the backoff
        assert library.lookup.search("late bird").hits  # keyword search never waited
        flaky.failing = False
        assert wait_until(lambda: embedded() == 6)
    finally:
        worker.stop()
        library.close()


def guide(sections: dict[str, str]) -> str:
    """A markdown file of titled sections, long enough that each is a chunk of its own."""
    parts = ["# Field guide\n"]
    for heading, words in sections.items():
        parts.append(f"## {heading}\n\n" + " ".join([words] * 40) + "\n")
    return "\n".join(parts)


SECTIONS = {
    f"Bird {name}": f"the {name} sings at dawn near the pond and nests in reeds"
    for name in ("wren", "robin", "heron", "swift", "crane", "finch")
}


def each_vector_is_its_texts(library: Library, embedder: HashEmbedder) -> bool:
    """Whether every chunk has a vector, and it is the one its embedding text gets."""
    sig_id = signature_id(library, embedder)
    row = vectors.signature_row(library.db.conn, sig_id)
    found = library.db.conn.execute(
        "SELECT d.title, c.heading_path, c.text, f.embedding FROM chunks c "
        f"JOIN documents d ON d.id = c.document_id "
        f"LEFT JOIN vec_floats_{row.key} f ON f.chunk_id = c.id"
    ).fetchall()
    texts = [vectors.embedding_text(t, json.loads(h), x, row.max_chars) for t, h, x, _ in found]
    expected = embedder.embed(texts)
    return all(blob == want.tobytes() for (*_, blob), want in zip(found, expected, strict=True))


def synced(library: Library) -> EmbedReport | None:
    library.folders.sync()
    return library.vectors.embed_pending()


def test_embed_resync_of_an_edited_file_embeds_only_its_changed_chunks(
    lib: Library, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text(guide(SECTIONS), encoding="utf-8")
    lib.folders.add_folder(folder)
    synced(lib)
    embedder = lib.vectors.embedder()
    assert isinstance(embedder, HashEmbedder)
    chunks = lib.db.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert chunks > len(SECTIONS)
    assert embedder.texts == chunks

    edited = {**SECTIONS, "Bird heron": "the heron stands still in the shallow water all day"}
    (folder / "guide.md").write_text(guide(edited), encoding="utf-8")
    report = synced(lib)

    changed = lib.db.conn.execute(
        "SELECT COUNT(*) FROM chunks WHERE text LIKE '%shallow water%'"
    ).fetchone()[0]
    assert changed >= 1
    assert embedder.texts == chunks + changed  # the changed section's chunks, nothing else
    assert report is not None and report.reused == report.embedded - changed > 0
    assert each_vector_is_its_texts(lib, embedder)


def test_embed_a_renamed_file_is_not_embedded_again(lib: Library, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text(guide(SECTIONS), encoding="utf-8")
    lib.folders.add_folder(folder)
    synced(lib)
    embedder = lib.vectors.embedder()
    assert isinstance(embedder, HashEmbedder)
    before = embedder.texts

    (folder / "a.md").rename(folder / "b.md")
    synced(lib)

    assert embedder.texts == before
    assert each_vector_is_its_texts(lib, embedder)


def test_embed_equal_texts_in_different_documents_are_embedded_once(lib: Library) -> None:
    for uri in ("n://first", "n://second", "n://third"):
        lib.writing.add_document("Pond birds", "the heron stands still in the shallow water", uri)
    embedder = lib.vectors.embedder()
    assert isinstance(embedder, HashEmbedder)

    report = lib.vectors.embed_pending()

    assert report is not None and report.embedded == 3 and report.pending == 0
    assert embedder.texts == 1
    assert each_vector_is_its_texts(lib, embedder)


def test_embed_kept_vectors_of_removed_chunks_are_bounded_and_go_after_a_complete_run(
    lib: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "KEPT_LIMIT", 3)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "guide.md").write_text(guide(SECTIONS), encoding="utf-8")
    lib.folders.add_folder(folder)
    synced(lib)
    embedder = lib.vectors.embedder()
    assert isinstance(embedder, HashEmbedder)
    kept = f"vec_kept_{embedder.signature.key}"

    (folder / "guide.md").unlink()
    lib.folders.sync()  # removed, and no embedding run yet
    assert lib.db.conn.execute(f"SELECT COUNT(*) FROM {kept}").fetchone()[0] == 3

    lib.vectors.embed_pending()
    assert not lib.db.query(f"SELECT name FROM sqlite_master WHERE name = '{kept}'")
