"""The linking phase on PostgreSQL computes outside its write transactions (issue 24).

Writers take turns on the change stamp's row lock in every process
(``store/postgres/database.py``), so a write transaction the linking phase holds open
while it computes makes every ``add_document`` of every server wait behind it: the
soak run saw the linking session ``idle in transaction`` for over a second and the
servers' ``add_document`` p95 at 11 s under load. What linking computes from a
document (its entities, relations and near-duplicate scores) is computed in a read
snapshot; its write transactions only write, re-checking what may have changed since.

Never timed: the test holds linking inside its computing (a gate in the comparison of
near-duplicates, the costliest step) and looks from another connection at what the
server says its sessions are doing, then writes beside it and lets it go.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from kb_mcp.ingest import dedup
from kb_mcp.library import Library
from kb_mcp.settings import Settings, Store

GATE_BOUND_S = 120.0  # bounds a hang only; the gate opens on an event
BODY = "Service {n} calls the Gateway API and the Billing Service.\n" * 40


def _settings(home: Path, store: Store | None = None) -> Settings:
    return dataclasses.replace(
        Settings(home=home), allow_agent_writes=True, embedder="none", store=store or Store()
    )


def _write_transactions(url: str) -> list[tuple]:
    """Sessions of the database that hold a write transaction (an xid), whatever they
    are doing now: running a statement, or idle inside the transaction."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, state, query FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_xid IS NOT NULL "
            "AND pid <> pg_backend_pid()"
        ).fetchall()


class _Gate:
    """Holds the first comparison of near-duplicates until ``release``."""

    def __init__(self, compare: Callable[[str, str], float]) -> None:
        self._compare = compare
        self.reached = threading.Event()
        self.released = threading.Event()

    def __call__(self, a: str, b: str) -> float:
        if not self.reached.is_set():
            self.reached.set()
            assert self.released.wait(GATE_BOUND_S), "the test never released the gate"
        return self._compare(a, b)


def _adds(library: Library) -> None:
    # Same titles two by two: each later one has a near-duplicate to compare.
    for n in range(6):
        library.writing.add_document(
            f"Runbook {n // 2}",
            BODY.format(n=n // 2) + f"Step {n}.\n",
            f"agent://r/{n}",
            link=False,
        )


def _linked_rows(library: Library) -> dict[str, list[tuple]]:
    conn = library.db.conn
    return {
        "entities": conn.execute("SELECT norm, mentions FROM entities ORDER BY norm").fetchall(),
        "near": conn.execute(
            "SELECT a.uri, b.uri, n.similarity FROM near_duplicates n "
            "JOIN documents a ON a.id = n.document_id JOIN documents b ON b.id = n.other_id "
            "ORDER BY 1, 2"
        ).fetchall(),
        "queued": conn.execute("SELECT COUNT(*) FROM link_queue").fetchall(),
    }


def test_no_write_transaction_stays_open_while_linking_computes(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _Gate(dedup.similarity)
    monkeypatch.setattr(dedup, "similarity", gate)
    library = Library(_settings(tmp_path / "pg", Store(postgres_url)))
    try:
        _adds(library)
        failed: list[BaseException] = []

        def link() -> None:
            try:
                library.links.run()
            except BaseException as error:  # reported by the test
                failed.append(error)

        linker = threading.Thread(target=link)
        linker.start()
        try:
            assert gate.reached.wait(GATE_BOUND_S)
            # Linking is computing now: no transaction of it may hold the writers' lock.
            assert _write_transactions(postgres_url) == []
            # So a writer gets in between: a new near-copy, and a rewrite of one that
            # linking has read already.
            library.writing.add_document(
                "Runbook 0", BODY.format(n=0) + "Step 9.\n", "agent://r/9", link=False
            )
            library.writing.add_document(
                "Runbook 1", BODY.format(n=1) + "Step 3, redone.\n", "agent://r/3", link=False
            )
        finally:
            gate.released.set()
            linker.join(GATE_BOUND_S)
        assert not failed, failed
        library.links.run()  # what the writer queued meanwhile
        after = _linked_rows(library)
    finally:
        library.close()

    # Every document linked exactly once: the same rows as a library that stored the
    # same documents and linked them with no one in between.
    monkeypatch.setattr(dedup, "similarity", gate._compare)
    reference = Library(_settings(tmp_path / "sqlite"))
    try:
        _adds(reference)
        reference.writing.add_document(
            "Runbook 0", BODY.format(n=0) + "Step 9.\n", "agent://r/9", link=False
        )
        reference.writing.add_document(
            "Runbook 1", BODY.format(n=1) + "Step 3, redone.\n", "agent://r/3", link=False
        )
        reference.links.run()
        assert after == _linked_rows(reference)
    finally:
        reference.close()


@pytest.mark.adversarial
def test_a_writer_beside_a_long_linking_run_waits_for_small_transactions(
    tmp_path: Path, postgres_url: str, figures: Callable[[str, str], None]
) -> None:
    """A figure, under ``-m adversarial``: how long a one-statement write waits while
    the phase links 256 queued notes (near-copies four by four), and that all of them
    are linked. The wait is the longest write transaction of the phase, on this
    machine under its load: never asserted."""
    library = Library(_settings(tmp_path / "pg", Store(postgres_url)))
    try:
        for n in range(256):
            body = BODY.format(n=n // 4) + f"Step {n}.\n"
            library.writing.add_document(f"Runbook {n // 4}", body, f"agent://r/{n}", link=False)
        linked = threading.Event()
        took: list[float] = []

        def link() -> None:
            started = time.monotonic()
            library.links.run()
            took.append(time.monotonic() - started)
            linked.set()

        linker = threading.Thread(target=link)
        linker.start()
        waits = []
        while not linked.is_set():
            started = time.monotonic()
            with library.db.write():
                pass
            waits.append(time.monotonic() - started)
            linked.wait(0.01)
        linker.join(GATE_BOUND_S)
        assert library.links.pending() == 0
    finally:
        library.close()
    tail = statistics.quantiles(waits, n=20)[18] if len(waits) > 1 else waits[0]
    figures(
        "linking",
        f"PostgreSQL: linking 256 queued notes took {took[0]:.2f} s; a one-statement write "
        f"beside it waited p50 {statistics.median(waits) * 1000:.1f} / p95 {tail * 1000:.1f} "
        f"/ max {max(waits) * 1000:.1f} ms over {len(waits)} writes",
    )
