"""The progress of the CLI's long phases, on stderr: how far, how fast, how long is left.

Trigger (issue 22): a real 4,062-file ``kb-mcp add`` printed nothing for 29 minutes of
embedding when stderr was not a terminal (an agent's shell, CI), and on a terminal its
bar counted with no rate or ETA. Now each phase ("reading files", "embedding passages")
reports on a terminal as one line redrawn in place, and elsewhere as a plain line when
it starts, at most every ``PLAIN_EVERY_S`` seconds after, and a summary with the elapsed
time when it ends::

    kb-mcp: embedding 4,672 / 30,760 passages (18.6/s, about 23 min left)
    kb-mcp: done embedding passages: 30,760 in 27 min 33 s (18.6/s)

The rate is measured over the last ``RATE_WINDOW_S`` seconds, not since the start: a
re-sync counts its unchanged files thousands a second before it reads the changed ones
at tens a second, and an ETA from the whole-run average would promise too little time.
The clock is a parameter, so tests set the time instead of waiting for it.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

from kb_mcp.cli.terminal import terminal_safe
from kb_mcp.redact import redact

Clock = Callable[[], float]

PLAIN_EVERY_S = 10.0  # a plain line at most this often (not on a terminal)
REDRAW_EVERY_S = 0.1  # the terminal line at most this often
RATE_WINDOW_S = 30.0  # the rate is over this much of the recent past
MIN_RATE_SPAN_S = 1.0  # a rate over less time than this is noise: none is shown yet
_SAMPLE_EVERY_S = 1.0  # the rate's samples are kept this far apart (few, whatever the calls)
_PREFIX = "kb-mcp: "


@dataclass(frozen=True)
class Phase:
    """What a phase does (``verb``) to what it counts (``noun``): "embedding passages"."""

    verb: str
    noun: str

    @property
    def name(self) -> str:
        return f"{self.verb} {self.noun}"


READING_FILES = Phase("reading", "files")
FETCHING_PAGES = Phase("fetching", "pages")  # a web source's crawl: ingest/fetch
EMBEDDING_PASSAGES = Phase("embedding", "passages")
ENRICHING_PASSAGES = Phase("enriching", "passages")  # the graph's LLM pass
LINKING_DOCUMENTS = Phase("linking", "documents")  # entities and relations: ingest/links


def rate_text(per_second: float) -> str:
    """``18.6/s``; ``1,204/s``; ``2.5/min`` below one every ten seconds."""
    if per_second >= 100:
        return f"{per_second:,.0f}/s"
    if per_second >= 0.1 or per_second == 0:
        return f"{per_second:.1f}/s"
    return f"{per_second * 60:.1f}/min"


def duration_text(seconds: float) -> str:
    """An elapsed time: ``0.4 s``, ``42 s``, ``27 min 33 s``, ``1 h 05 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def eta_text(seconds: float) -> str:
    """A time left, as round as an estimate deserves: ``about 40 s left``,
    ``about 23 min left``, ``about 2 h 10 min left``."""
    if seconds < 60:
        return f"about {max(5, round(seconds / 5) * 5)} s left"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min left"
    return f"about {minutes // 60} h {minutes % 60:02d} min left"


class _RecentRate:
    """Items per second over the last ``RATE_WINDOW_S`` seconds, from a few kept samples."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, int]] = deque()

    def restart(self) -> None:
        self._samples.clear()

    def add(self, now: float, done: int) -> None:
        if not self._samples or now - self._samples[-1][0] >= _SAMPLE_EVERY_S:
            self._samples.append((now, done))
        while len(self._samples) > 1 and now - self._samples[1][0] >= RATE_WINDOW_S:
            self._samples.popleft()

    def per_second(self, now: float, done: int) -> float | None:
        """None until the samples span ``MIN_RATE_SPAN_S``."""
        if not self._samples:
            return None
        since, done_then = self._samples[0]
        if now - since < MIN_RATE_SPAN_S:
            return None
        return max(0, done - done_then) / (now - since)


class PhaseProgress:
    """A ``progress(done, total, label)`` callback for one phase, and its summary line.

    Use as a context manager around the work: leaving it prints the summary (or, on an
    exception, where the phase stopped). Nothing is printed for a phase that never
    reported, so a phase with nothing to do (no embedder, nothing pending) stays silent.
    A call with ``total == 0`` is a status (``label`` says what is awaited), not a count.
    When ``done`` goes back (a sync of several folders starts the next one), the counts
    so far are kept for the summary and the rate starts over.
    """

    def __init__(
        self,
        phase: Phase,
        *,
        stream: TextIO | None = None,
        clock: Clock = time.monotonic,
        terminal: bool | None = None,
        every: float = PLAIN_EVERY_S,
        timed_from_first_report: bool = False,
    ) -> None:
        self.phase = phase
        # A phase that waits on another before its first step (reading a web source's
        # pages waits for their fetching) is timed from that step, not from its creation.
        self._timed_from_first_report = timed_from_first_report
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.every = every
        self._clock = clock
        self._started = clock()
        self._rate = _RecentRate()
        self._reported = False
        self._last_shown: float | None = None
        self._last_status = ""
        self._done_before = 0  # the counts of earlier rounds (folders) of the phase
        self._done = 0
        self._total = 0
        self._drawn = False  # a terminal line is on screen, not yet ended

    def __call__(self, done: int, total: int, label: str = "") -> None:
        now = self._clock()
        if self._timed_from_first_report and not self._reported:
            self._started = now
        self._reported = True
        if total <= 0:
            self._status(now, label)
            return
        if done < self._done:  # the next round (folder) starts from zero
            self._done_before += self._done
            self._rate.restart()
        self._done, self._total = done, total
        self._rate.add(now, done)
        if self._due(now, final=done >= total):
            self._show(now, self.line(now), label)

    def line(self, now: float) -> str:
        """``embedding 4,672 / 30,760 passages (18.6/s, about 23 min left)``."""
        text = f"{self.phase.verb} {self._done:,} / {self._total:,} {self.phase.noun}"
        per_second = self._rate.per_second(now, self._done)
        if per_second is None:
            return text
        if per_second == 0:
            return f"{text} ({rate_text(0)}, none in the last {duration_text(RATE_WINDOW_S)})"
        left = (self._total - self._done) / per_second
        return f"{text} ({rate_text(per_second)}, {eta_text(left)})"

    def summary(self, now: float, *, stopped: bool = False) -> str:
        """``done embedding passages: 30,760 in 27 min 33 s (18.6/s)``; how far a phase
        got when it ended early (``32 of 30,760``) or was stopped."""
        elapsed = now - self._started
        count = self._done_before + self._done
        counted = f"{count:,}" if self._done >= self._total else f"{count:,} of {self._total:,}"
        if stopped:
            return f"stopped {self.phase.name} at {counted} after {duration_text(elapsed)}"
        rate = f" ({rate_text(count / elapsed)})" if elapsed > 0 and count else ""
        return f"done {self.phase.name}: {counted} in {duration_text(elapsed)}{rate}"

    def close(self, *, stopped: bool = False) -> None:
        """The summary line (once a phase has reported), ending the terminal's line."""
        if not self._reported:
            return
        self._write_line(self.summary(self._clock(), stopped=stopped))
        self._reported = False

    def __enter__(self) -> PhaseProgress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close(stopped=kind is not None)

    # --- output ------------------------------------------------------------------------

    def _status(self, now: float, label: str) -> None:
        """A wait (another sync holds the folder): on a terminal as the line; elsewhere
        once, and again at most every ``every`` seconds."""
        if label != self._last_status or self._due(now, final=False):
            self._last_status = label
            self._show(now, label, "")

    def _due(self, now: float, *, final: bool) -> bool:
        if self._last_shown is None:
            return True  # the phase's first line
        if self.terminal:
            return final or now - self._last_shown >= REDRAW_EVERY_S
        return now - self._last_shown >= self.every

    def _show(self, now: float, text: str, label: str) -> None:
        self._last_shown = now
        if not self.terminal:
            self._write_line(text)
            return
        if label:  # the file or model at hand; its name may hold control characters or a
            # secret (issue 20 item 3)
            text = f"{text}  {terminal_safe(redact(label).text)[-40:]}"
        width = _terminal_columns(self.stream) - 1  # a wrapped line cannot be redrawn
        self.stream.write(f"\r{_PREFIX}{text}"[: width + 1] + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def _write_line(self, text: str) -> None:
        start = "\r\x1b[K" if self._drawn else ""  # the summary replaces the live line
        self.stream.write(f"{start}{_PREFIX}{text}\n")
        self.stream.flush()
        self._drawn = False


def _terminal_columns(stream: TextIO) -> int:
    """The terminal's width; 80 when it says none (0, as a new pseudo-terminal does)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80
    return max(20, columns) if columns else 80
