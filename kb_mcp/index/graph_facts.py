"""The SQL of the LLM pass over the graph: which chunks are pending, storing their facts.

An LLM's entities become ``mentions`` of the chunk (next to the heuristic ones; a
mention the heuristic extractor already made is left as it is) and its typed relations
become ``entity_facts`` rows plus a labelled ``entity_relations`` row whose weight counts
the chunks stating it. That is exactly what ``index/graph.remove_chunks`` takes back
when a chunk goes, so removal needs nothing from this module. LLM mentions add no
co-mention pairs (removal recomputes those from the heuristic extractor alone).

Per chunk and model a marker in ``meta`` (``graph-llm:<chunk id>:<model>``, JSON
``{doc, len, state, reason?, attempts?, retry_at?}``) says the chunk is done or failed;
it is written in the same transaction as the facts, so a pass killed at any point
resumes where it stopped and nothing is asked twice. The document id and text length
in the marker make a chunk id reused by a later chunk count as new. No migration: the
markers are derived state beside ``fts_version`` / ``graph_version``, and
``forget_markers`` drops them when the graph is rebuilt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from kb_mcp.graph.facts import LlmEntity, LlmFacts

MARKER = "graph-llm:{chunk}:{model}"
# The graph version the markers were made against: another one (a rebuild by a new
# heuristic extractor) dropped the facts, so the markers go too.
BASE_KEY = "graph-llm-base"
LLM_WEIGHT = 1.0  # an LLM mention weighs as a plain name (extract.KIND_WEIGHT["name"])


@dataclass(frozen=True, slots=True)
class PendingChunk:
    chunk_id: int
    document_id: int
    heading_path: tuple[str, ...]
    text: str
    attempts: int


_FROM = "FROM chunks c LEFT JOIN meta m ON m.key = 'graph-llm:' || c.id || ':' || :model "
# No marker, a marker of another chunk that had this id, or a failure due for retry.
_DUE = (
    "(m.key IS NULL "
    "OR json_extract(m.value, '$.doc') != c.document_id "
    "OR json_extract(m.value, '$.len') != length(c.text) "
    "OR (json_extract(m.value, '$.state') = 'failed' "
    "AND json_extract(m.value, '$.retry_at') <= :now))"
)


def pending_chunks(
    conn: apsw.Connection, model: str, limit: int, *, after_id: int = 0, now: float
) -> list[PendingChunk]:
    """Chunks with no marker of ``model``, a stale one, or a failure due for retry."""
    rows = conn.execute(
        "SELECT c.id, c.document_id, c.heading_path, c.text, "
        f"COALESCE(json_extract(m.value, '$.attempts'), 0) {_FROM}"
        f"WHERE c.id > :after AND {_DUE} ORDER BY c.id LIMIT :limit",
        {"model": model, "after": after_id, "now": now, "limit": limit},
    ).fetchall()
    return [PendingChunk(r[0], r[1], tuple(json.loads(r[2])), r[3], int(r[4])) for r in rows]


def pending_count(conn: apsw.Connection, model: str, *, now: float) -> int:
    """How many chunks a pass would ask about now (done and backing-off ones excluded)."""
    return conn.execute(
        f"SELECT COUNT(*) {_FROM}WHERE {_DUE}", {"model": model, "now": now}
    ).fetchone()[0]


def failed_count(conn: apsw.Connection, model: str) -> int:
    return conn.execute(
        "SELECT COUNT(*) FROM meta WHERE key LIKE 'graph-llm:%:' || ? "
        "AND json_extract(value, '$.state') = 'failed'",
        (model,),
    ).fetchone()[0]


def _still_there(conn: apsw.Connection, chunk: PendingChunk) -> bool:
    """Whether the chunk read for the request is still stored with that text."""
    row = conn.execute(
        "SELECT document_id, length(text) FROM chunks WHERE id = ?", (chunk.chunk_id,)
    ).fetchone()
    return row is not None and tuple(row) == (chunk.document_id, len(chunk.text))


def _mark(conn: apsw.Connection, chunk: PendingChunk, model: str, state: dict) -> None:
    value = {"doc": chunk.document_id, "len": len(chunk.text), **state}
    conn.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
        (MARKER.format(chunk=chunk.chunk_id, model=model), json.dumps(value)),
    )


def _entity_id(conn: apsw.Connection, entity: LlmEntity) -> int:
    """The entity of ``entity.key``, created (with no mentions yet) when new."""
    row = conn.execute(
        "INSERT INTO entities(norm, name, kind, aliases, mentions) VALUES (?, ?, ?, ?, 0) "
        "ON CONFLICT(norm) DO NOTHING RETURNING id",
        (entity.key, entity.surface, entity.kind, json.dumps([entity.surface])),
    ).fetchone()
    if row is not None:
        return row[0]
    return conn.execute("SELECT id FROM entities WHERE norm = ?", (entity.key,)).fetchone()[0]


def _mention(conn: apsw.Connection, chunk_id: int, entity_id: int, entity: LlmEntity) -> None:
    """Add the mention unless the chunk already mentions the entity (heuristically)."""
    added = conn.execute(
        "INSERT INTO mentions(entity_id, chunk_id, surface, kind, weight) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING 1",
        (entity_id, chunk_id, entity.surface, entity.kind, LLM_WEIGHT),
    ).fetchone()
    if added is not None:
        conn.execute("UPDATE entities SET mentions = mentions + 1 WHERE id = ?", (entity_id,))


def store_facts(conn: apsw.Connection, chunk: PendingChunk, model: str, facts: LlmFacts) -> bool:
    """Store one chunk's facts and its done marker. Call inside ``db.write()``.

    False (nothing stored) when the chunk changed or went since it was read: its
    successor is pending by itself.
    """
    if not _still_there(conn, chunk):
        return False
    ids: dict[str, int] = {}
    for entity in facts.entities:
        ids[entity.key] = _entity_id(conn, entity)
        _mention(conn, chunk.chunk_id, ids[entity.key], entity)
    for relation in facts.relations:
        a, b = ids[relation.source.key], ids[relation.target.key]
        added = conn.execute(
            "INSERT INTO entity_facts(chunk_id, a, b, label) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING 1",
            (chunk.chunk_id, a, b, relation.label),
        ).fetchone()
        if added is not None:
            conn.execute(
                "INSERT INTO entity_relations(a, b, label, weight) VALUES (?, ?, ?, 1) "
                "ON CONFLICT(a, b, label) DO UPDATE SET weight = entity_relations.weight + 1",
                (a, b, relation.label),
            )
    _mark(conn, chunk, model, {"state": "done"})
    return True


def record_failure(
    conn: apsw.Connection, chunk: PendingChunk, model: str, reason: str, retry_at: float
) -> None:
    """Mark the chunk failed (it keeps its heuristic entities) until ``retry_at``."""
    if _still_there(conn, chunk):
        state = {"state": "failed", "reason": reason[:200], "attempts": chunk.attempts + 1}
        _mark(conn, chunk, model, {**state, "retry_at": retry_at})


def last_failure(conn: apsw.Connection, model: str) -> str | None:
    row = conn.execute(
        "SELECT json_extract(value, '$.reason') FROM meta WHERE key LIKE 'graph-llm:%:' || ? "
        "AND json_extract(value, '$.state') = 'failed' ORDER BY rowid DESC LIMIT 1",
        (model,),
    ).fetchone()
    return row[0] if row else None


def check_base(conn: apsw.Connection, graph_version: str) -> None:
    """Drop every marker if the graph was rebuilt by another extractor since they were made.
    Call inside ``db.write()``."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BASE_KEY,)).fetchone()
    if row is None or row[0] != graph_version:
        forget_markers(conn)
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (BASE_KEY, graph_version)
        )


def forget_markers(conn: apsw.Connection) -> None:
    """Every chunk is pending again (the graph's facts were dropped: a rebuild)."""
    conn.execute("DELETE FROM meta WHERE key LIKE 'graph-llm:%'")


def drop_orphans(conn: apsw.Connection) -> int:
    """Markers of chunks that no longer exist go (their facts went with the chunk).
    Call inside ``db.write()``."""
    conn.execute(
        "DELETE FROM meta WHERE key LIKE 'graph-llm:%' AND CAST(substr(key, 11, "
        "instr(substr(key, 11), ':') - 1) AS INTEGER) NOT IN (SELECT id FROM chunks)"
    )
    return conn.changes()


def relation_rows(conn: apsw.Connection) -> Sequence[tuple[str, str, str, float]]:
    """``(a name, label, b name, weight)`` of every typed relation (for tests and doctor)."""
    return conn.execute(
        "SELECT ea.name, r.label, eb.name, r.weight FROM entity_relations r "
        "JOIN entities ea ON ea.id = r.a JOIN entities eb ON eb.id = r.b "
        "WHERE r.label != '' ORDER BY ea.name, r.label, eb.name"
    ).fetchall()
