"""A resolved relation seen from one of its documents (``Change``), and its words.

What search, ``read`` and the views say about a document's relations ("corrected by
<cite>", "withdrawn on <date> by <cite>", "corrects <cite>" …), built from the rows by
``relations/read.py`` and ordered by ``search/relations.py``. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

_PAST_TENSE = {"corrects": "corrected", "supersedes": "superseded", "updates": "updated"}


@dataclass(frozen=True, slots=True)
class Change:
    """One resolved relation seen from one document: what it is and who the other is."""

    kind: str
    incoming: bool  # True: the other document changed this one
    other: str  # the other document's key
    cite: str  # where to read the evidence (a cite, or the other document's key)
    effective: str | None


def describe(change: Change) -> str:
    """``corrected by <cite>``, ``withdrawn on <date> by <cite>``, ``corrects <cite>`` …"""
    if not change.incoming:
        return f"{change.kind} {change.cite}"
    on = f" on {change.effective[:10]}" if change.effective else ""
    if change.kind == "withdraws":
        return f"withdrawn{on} by {change.cite}"
    if change.kind == "updates":
        return f"updated{on} by {change.cite}"
    return f"{_PAST_TENSE[change.kind]} by {change.cite}"
