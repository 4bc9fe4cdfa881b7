"""Each document's resolved relations, read from the store and seen from that document.

The one place search, ``read`` and ``entities`` turn ``doc_relations`` rows into ``Change``
values (``relations/change.py``), so all name the other document and cite the evidence
alike: the cite points at the lines that stated the relation, in whichever document said
it. What ranking does with them is ``search/relations.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from kb_mcp.cite import format_cite
from kb_mcp.relations.change import Change, describe
from kb_mcp.store import relations as relation_rows


def changes_for(conn: apsw.Connection, keys: Sequence[str]) -> dict[str, list[Change]]:
    """Document key → its resolved relations (both directions), for the keys given."""
    changes: dict[str, list[Change]] = {}
    for view in relation_rows.views_for(conn, keys):
        sides = [(view.to_key, view.from_key, True), (view.from_key, view.to_key, False)]
        for mine, other, incoming in sides[:1] if view.from_key == view.to_key else sides:
            cite = other
            if view.stated_by_key == other:
                cite = format_cite(other, view.start_line, view.end_line)
            changes.setdefault(mine, []).append(
                Change(view.kind, incoming, other, cite, view.effective)
            )
    return changes


def described_relations(conn: apsw.Connection, keys: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Document key → its resolved relations as search words them ("withdrawn on <date>
    by <cite>" …), for the keys given that have any (``kb-mcp entities`` lists them)."""
    return {
        key: tuple(dict.fromkeys(describe(change) for change in found))
        for key, found in changes_for(conn, list(dict.fromkeys(keys))).items()
        if found
    }
