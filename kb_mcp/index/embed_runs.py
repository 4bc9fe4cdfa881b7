"""What a library knows of its own embedding runs, in any process: how fast the last one
embedded, and whether one is embedding now.

Why (issue 22): ``kb-mcp add`` returns once keyword search works and says how long the
vectors will take; the best estimate is this library's own rate on this machine with
this model, so every run records it as it goes (the server's background runs too).
``list`` and ``doctor`` say whether the passages without a vector are being built right
now or wait for ``kb-mcp embed``; the run's heartbeat answers that across processes
without touching the run's lock (probing the lock could make a starting run miss it).

Both live in ``meta``, one key each per signature, written by the one run that holds the
signature's embed lock (``embed/active.py``), inside the write transaction that stores
its batch: no schema change, and nothing to clean when a signature is dropped (a stale
key is never read, keys are the signature's).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import apsw

RATE_KEY = "embed_rate:{key}"
RUN_KEY = "embed_run:{key}"
# A run's heartbeat (one per stored batch) older than this: the run is gone (``kill -9``,
# a crash), not slow. A batch of 32 passages took 1.7 s at the 18.6/s, and under
# ten times that load still well under a minute.
RUN_FRESH_S = 120.0
# A run's rate is recorded once it has timed at least this many passages after its first
# batch (which also loads the model): one small agent document must not replace the
# figure of a long run with the cost of a model load.
MIN_TIMED_PASSAGES = 8


@dataclass(frozen=True, slots=True)
class Rate:
    """Passages embedded in ``seconds`` by a run, timed after its first batch."""

    passages: int
    seconds: float
    at: str  # when it was recorded (UTC)

    @property
    def per_second(self) -> float:
        return self.passages / self.seconds if self.seconds > 0 else 0.0


def _set(conn: apsw.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _get(conn: apsw.Connection, key: str) -> dict | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    try:
        return json.loads(row[0]) if row else None
    except (TypeError, ValueError):
        return None


def record_rate(conn: apsw.Connection, sig_key: str, passages: int, seconds: float) -> None:
    """The rate of the run under way (call in ``db.write()``); ignored below
    ``MIN_TIMED_PASSAGES``."""
    if passages < MIN_TIMED_PASSAGES or seconds <= 0:
        return
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    value = {"passages": passages, "seconds": round(seconds, 3), "at": at}
    _set(conn, RATE_KEY.format(key=sig_key), json.dumps(value))


def last_rate(conn: apsw.Connection, sig_key: str) -> Rate | None:
    """The rate the last run of ``sig_key`` recorded, if any."""
    value = _get(conn, RATE_KEY.format(key=sig_key))
    if not value:
        return None
    try:
        return Rate(int(value["passages"]), float(value["seconds"]), str(value["at"]))
    except (KeyError, TypeError, ValueError):
        return None


def beat(conn: apsw.Connection, sig_key: str, now: float | None = None) -> None:
    """A run of ``sig_key`` is embedding (at its start and at each batch; in a write)."""
    stamp = time.time() if now is None else now
    _set(conn, RUN_KEY.format(key=sig_key), json.dumps({"beat": stamp}))


def ended(conn: apsw.Connection, sig_key: str) -> None:
    """The run of ``sig_key`` ended (stopped, done or failed; in a write)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (RUN_KEY.format(key=sig_key),))


def running(conn: apsw.Connection, sig_key: str, now: float | None = None) -> bool:
    """Whether a run of ``sig_key`` is embedding now, in this process or another."""
    value = _get(conn, RUN_KEY.format(key=sig_key))
    if not value or not isinstance(value.get("beat"), int | float):
        return False
    current = time.time() if now is None else now
    return current - value["beat"] < RUN_FRESH_S
