"""Citations: ``<doc>#L<start>-L<end>``, emitted by search and accepted by read.

The grammar lives here and only here, so search, read, the CLI and the MCP tools agree.
A document id is the stable key kb-mcp gives a document (``a-…`` agent, ``f-…`` file,
``u-…`` upload); lines are 1-based and inclusive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CITE = re.compile(
    r"^(?P<doc>[A-Za-z0-9][A-Za-z0-9_.-]*)#L(?P<start>[0-9]+)(?:-L?(?P<end>[0-9]+))?$"
)


# A document key (``ingest/agent.py``, ``ingest/sync.py``: kind letter, 16 hex) or a
# cite of one, where it stands inside prose such as a relation ("corrected by <cite>").
_CITE_IN_TEXT = re.compile(r"\b[afu]-[0-9a-f]{16}(?:#L[0-9]+(?:-L?[0-9]+)?)?(?![\w-])")


@dataclass(frozen=True, slots=True)
class Citation:
    doc: str
    start_line: int
    end_line: int

    def __str__(self) -> str:
        return format_cite(self.doc, self.start_line, self.end_line)


def format_cite(doc: str, start_line: int, end_line: int) -> str:
    return f"{doc}#L{start_line}-L{end_line}"


def parse_cite(text: str) -> Citation | None:
    """A ``Citation`` when ``text`` is one (``doc#L3-L9``, ``doc#L3``), else None."""
    match = _CITE.match(text.strip())
    if match is None:
        return None
    start = int(match["start"])
    end = int(match["end"]) if match["end"] else start
    return Citation(match["doc"], start, end)


def split_cites(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into pieces, each flagged True when it is a document key or a cite,
    so a view can link those and keep the rest as text."""
    pieces: list[tuple[str, bool]] = []
    at = 0
    for match in _CITE_IN_TEXT.finditer(text):
        if match.start() > at:
            pieces.append((text[at : match.start()], False))
        pieces.append((match.group(), True))
        at = match.end()
    if at < len(text):
        pieces.append((text[at:], False))
    return pieces
