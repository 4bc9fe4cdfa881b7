"""Vectors from the command line: ``kb-mcp embed``, the ``--wait`` of ``add`` / ``sync`` /
``reindex``, and the line those print when they return before the vectors.

Trigger (issue 22): a real 4,062-file folder was keyword-searchable after 110 s, then
``kb-mcp add`` embedded for 27 more minutes before it returned, and nothing said search
already worked. Now ``add`` / ``sync`` / ``reindex`` return once keyword search works,
with one line: how many passages are left, about how long they take (this library's own
last rate, or one measured just now on a few passages), and what builds them (a running
``kb-mcp serve`` in the background, or ``kb-mcp embed``). ``--wait`` embeds before
returning, as before, for scripts.

Ctrl-C while embedding stops after the batch in flight, which is stored: what was done
stays done and the next ``kb-mcp embed`` (or the server) resumes with the rest. A second
Ctrl-C stops at once (the batch in flight is lost, nothing else: ``embed/queue.py``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kb_mcp.cli.progress import EMBEDDING_PASSAGES, PhaseProgress, eta_text, rate_text

if TYPE_CHECKING:
    from kb_mcp.embed.queue import EmbedReport
    from kb_mcp.library import Library
    from kb_mcp.library.results import VectorBacklog

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
HOW_BUILT = "a running `kb-mcp serve` builds them in the background, or run `kb-mcp embed`"


@contextmanager
def stop_on_interrupt() -> Iterator[threading.Event]:
    """An event set by the first Ctrl-C (SIGINT) inside the block, instead of the
    ``KeyboardInterrupt`` that would abandon the batch in flight; the second raises it."""
    stop = threading.Event()

    def interrupted(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(
            "\nkb-mcp: stopping after the batch in progress (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def embed_and_report(
    library: Library, *, quiet: bool = False, wait: bool = True
) -> tuple[EmbedReport | None, bool]:
    """Embed what is pending, with its progress on stderr, then one summary line: on
    stdout (on stderr if ``quiet``, so ``--json`` output stays one JSON document), or on
    stderr as a warning when the embedder failed. Silent when the embedder is none or
    there was nothing to embed. The report, and whether Ctrl-C stopped the run."""
    with stop_on_interrupt() as stop, PhaseProgress(EMBEDDING_PASSAGES) as progress:
        report = library.vectors.embed_pending(
            progress=progress, should_stop=stop.is_set, wait=wait
        )
        progress.close(stopped=stop.is_set())
    stopped = stop.is_set()
    if report is None or not (report.embedded or report.pending):
        return report, stopped  # no embedder, or nothing to embed: nothing worth a line
    if report.error:  # a warning, not a result: the command itself succeeded
        print(
            f"vectors: {report.embedded} passages embedded, {report.pending} pending: "
            f"{report.error}. Keyword search works; `kb-mcp embed` (or the server) retries.",
            file=sys.stderr,
        )
        return report, stopped
    signature = library.vectors.state().signature
    model = f" with {signature.describe()}" if signature else ""
    reused = f" ({report.reused} unchanged: vectors reused)" if report.reused else ""
    line = (
        f"vectors: {report.embedded} passages embedded{reused}{model} in {report.seconds:.1f} s; "
    )
    if stopped:
        line += (
            f"stopped with {report.pending:,} left: `kb-mcp embed` resumes (a running "
            "`kb-mcp serve` in the background)"
        )
    else:
        line += f"{report.pending} pending"
    print(line, file=sys.stderr if quiet else sys.stdout)
    return report, stopped


def backlog_text(backlog: VectorBacklog) -> str | None:
    """The line ``add`` / ``sync`` / ``reindex`` print when they return before the
    vectors; None when every passage has its vector."""
    if backlog.error:
        return (
            f"keyword search works now; {backlog.pending:,} passages wait for vectors: "
            f"{backlog.error}. `kb-mcp embed` retries (a running `kb-mcp serve` in the background)"
        )
    if not backlog.pending:
        return None  # every passage has its vector (a small folder: the measurement's)
    left = f"{backlog.pending:,} passage{'s' if backlog.pending != 1 else ''} left to embed"
    seconds = backlog.seconds_left
    if seconds is None or backlog.per_second is None:
        estimate = "no embedding rate measured yet"
    else:
        source = (
            "this library's last embedding run"
            if backlog.rate_from == "recorded"
            else f"measured just now on {backlog.timed} passages"
        )
        estimate = f"{eta_text(seconds)} at {rate_text(backlog.per_second)}, {source}"
    how = "a running process is building them now" if backlog.building else HOW_BUILT
    return f"keyword search works now; {left} with {backlog.model} ({estimate}): {how}"


def report_backlog(library: Library, *, quiet: bool = False) -> None:
    """Print ``backlog_text`` (measuring a rate first when the library has none): on
    stdout, or on stderr if ``quiet`` (``--json``) or the embedder failed."""
    backlog = library.vectors.backlog(measure=True)
    text = backlog_text(backlog) if backlog is not None else None
    if text:  # a failing embedder is a warning (stderr), not a result
        failed = backlog is not None and backlog.error
        print(text, file=sys.stderr if quiet or failed else sys.stdout)


def cmd_embed(args: argparse.Namespace, library: Library) -> int:
    """Build the vectors of passages that have none yet, with progress; Ctrl-C stops
    after the batch in progress, keeping what was done (the next run resumes)."""
    backlog = library.vectors.backlog()
    if backlog is None:
        print("no embedder configured (--embedder none): keyword search only, nothing to embed")
        return 0
    report, stopped = embed_and_report(library, wait=False)
    if stopped:
        return INTERRUPTED_EXIT
    if report is None:
        print(
            "another process (a `kb-mcp serve`, a `kb-mcp embed`) is building these vectors "
            "now; `kb-mcp list` shows how far it is"
        )
    elif not (report.embedded or report.pending):
        print(f"nothing to embed: all {backlog.embedded:,} passages have vectors ({backlog.model})")
    return 1 if report is not None and report.error else 0
