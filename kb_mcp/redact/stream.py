"""``redact`` over a text that arrives in pieces, one window at a time.

Trigger: a 50 MB Markdown file holding Chinese and emoji is a 145–200 MB Python string
(4 bytes a character), and ``redact`` over it held about three of those at once: 700 MB
peak RSS in ``kb-mcp add`` (issue 10, bound 250 MB). Outcome: ``redact_pieces`` yields the
text of ``redact(whole).text`` in pieces while holding about one window of it
(``WINDOW_CHARS``), so a caller can decode, redact and store a large file window by
window and never make the whole string.

Why the pieces equal the whole text's redaction: ``redact`` keeps every line where it was
(line N of the output is line N of the input), and every rule but two decides a line from
that line alone (their patterns never cross a newline). A window is therefore cut after a
line end, redacted with a few lines of *context* in front of it (the lines before the
cut, for look-behinds at its first line), and the output lines of the context are dropped.
The multi-line rules set where the cut may go and what the context holds:

- PEM keys (``pem.safe_cut``): a BEGIN whose END is not in the window, and a run of
  base64 lines an END below could claim, are carried over: the cut moves above them and
  they are redacted with the next window.
- Blocks under a secret name and joined lines (``blocks.safe_cut``, ``joined.safe_cut``,
  issue 20): the cut moves above an opener whose block reaches it, and above lines
  joined to the line after the cut.
- CSV and pipe-table columns (``values.open_table``, ``pipes.open_table``): when a table
  naming a secret column is still open at the cut, its header line (and a pipe table's
  delimiter line) goes into the next window's context, so the rows below the cut are
  redacted under it.

A carried block is bounded by ``MAX_CARRY_CHARS``: a BEGIN line whose END never comes
(a prose mention of one) would otherwise carry the rest of the file. Past it the window
is cut anyway, and only there may the result differ from the whole text's: a key block
longer than that is redacted as a truncated key plus an END without its BEGIN.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from kb_mcp.redact import blocks, joined, pem, pipes, redact, values

# Characters redacted at once. ``redact`` holds several copies of what it is given (the
# window with its context, each substituting rule's result, a lower-cased copy for a
# gate). Measured on the 50 MB CJK + emoji Markdown file of issue 10 (decode and redact
# only, one run, CPU seconds / tracemalloc peak): 1 Mi characters 5.18 s / 47 MB, 256 Ki
# 5.26 s / 11 MB, 64 Ki 5.84 s; the whole text at once 6.2 s and three 145 MB strings.
WINDOW_CHARS = 256 * 1024
# Context before a window's first line: look-behinds reach a few characters back.
CONTEXT_CHARS = 256
# The most a window may grow while a block is carried over (see the module docstring):
# a key block is 2-4 KB, a pasted certificate bundle a few hundred; 1 Mi characters
# redacted at once peaked at 47 MB (above).
MAX_CARRY_CHARS = 4 * WINDOW_CHARS


def redact_pieces(pieces: Iterable[str], *, window: int | None = None) -> Iterator[str]:
    """``redact("".join(pieces)).text``, in pieces of about ``window`` characters (default
    ``WINDOW_CHARS``).

    ``pieces`` may be cut anywhere (mid-line, mid-secret); each yielded piece ends at a
    line end except the last."""
    window = window or WINDOW_CHARS
    pending, context = "", ""
    for piece in pieces:
        pending += piece
        while len(pending) >= window:
            cut = _cut(pending, window)
            if cut == 0:
                break  # a carried block: wait for more text
            yield _redacted(context, pending[:cut])
            context = _context(context + pending[:cut])
            pending = pending[cut:]
    if pending:
        yield _redacted(context, pending)


def _cut(pending: str, window: int) -> int:
    """Where to end the window: after its last complete line, moved above a carried
    block; the whole of ``pending``'s lines once it grew past ``MAX_CARRY_CHARS``."""
    last = pending.rfind("\n") + 1
    if len(pending) > MAX_CARRY_CHARS + window:
        return last
    cut = pem.safe_cut(pending, last)
    cut = blocks.safe_cut(pending, cut)
    return joined.safe_cut(pending, cut)


def _redacted(context: str, body: str) -> str:
    """``body`` redacted as it reads after ``context``; the context's own lines dropped."""
    out = redact(context + body).text
    skip = context.count("\n")
    at = -1
    for _ in range(skip):
        at = out.find("\n", at + 1)
    return out[at + 1 :]


def _context(done: str) -> str:
    """The lines that give the next window its context: the last ``CONTEXT_CHARS`` (whole
    lines) of what was redacted, and the header line of a table still open there."""
    start = done.rfind("\n", 0, max(0, len(done) - CONTEXT_CHARS)) + 1
    tail = done[start:]
    headers = ""
    # a CSV table is carried by its header line, a pipe table by its header and delimiter
    for header, lines in ((values.open_table(done), 1), (pipes.open_table(done), 2)):
        if header is not None and header < start:
            end = header
            for _ in range(lines):
                end = done.index("\n", end) + 1
            headers += done[header:end]
    return headers + tail
