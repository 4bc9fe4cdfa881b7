"""How a process learns of another's commit: polling the change stamp or LISTEN/NOTIFY.

The evidence behind the choice in ``docs/architecture.md`` (PostgreSQL store): every
cache of a process (``LibraryState.memo``, the keyword reader's totals and segment) is
keyed on ``change_stamp()`` and checks it at use, so a commit anywhere is seen by the
very next call. LISTEN/NOTIFY would replace that read by a message, at the price of a
session per process held open and a thread to read it, and it cannot replace the check:
a notice sent while the listener was reconnecting is lost.

``python -m kb_mcp.store.postgres.notice_cost URL [--rounds N]`` (an empty database it
may write into) prints medians of: ``change_stamp()`` (one pooled read); a commit's
``write()``, alone and with a ``NOTIFY`` in it; and how long after a commit a session
that LISTENs gets the notice (what a listener would gain over a poll at the next call).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg

from kb_mcp.store.postgres.database import PostgresDatabase

CHANNEL = "kb_change"


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def measure(url: str, rounds: int) -> dict[str, float]:
    """Median microseconds of each mechanism over ``rounds`` tries."""
    db = PostgresDatabase(url, migrations=[])
    listener = psycopg.connect(url, autocommit=True)
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        stamp, plain, notifying, delivered = [], [], [], []
        for _ in range(rounds):
            started = time.perf_counter()
            db.change_stamp()
            stamp.append(time.perf_counter() - started)

            started = time.perf_counter()
            with db.write():
                pass
            plain.append(time.perf_counter() - started)

            received: list[float] = []
            waiting = threading.Thread(target=_receive, args=(listener, received))
            waiting.start()
            started = time.perf_counter()
            with db.write() as conn:
                conn.execute(f"NOTIFY {CHANNEL}")
            committed = time.perf_counter()
            notifying.append(committed - started)
            waiting.join()
            delivered.append(received[0] - committed)
        return {
            "change_stamp() (a poll)": _median_us(stamp),
            "write(), empty": _median_us(plain),
            "write() with NOTIFY": _median_us(notifying),
            "commit -> a listener has the notice": _median_us(delivered),
        }
    finally:
        listener.close()
        db.close()


def _receive(listener: psycopg.Connection, received: list[float]) -> None:
    for _notice in listener.notifies(timeout=10, stop_after=1):
        received.append(time.perf_counter())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    for name, micros in measure(args.url, args.rounds).items():
        print(f"{name:40} {micros:8.0f} µs")


if __name__ == "__main__":
    main()
