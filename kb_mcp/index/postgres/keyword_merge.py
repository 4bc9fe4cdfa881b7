"""Merging the keyword delta into the next generation of packed parts (``keyword.py``).

Writers add rows to the delta (``kw_recent``), which a search reads row by row; once it
holds more than ``postings.DELTA_SHARE`` of the generation's passages (and more than
``postings.DELTA_MIN``), a merge writes the next generation: the live one's lists, less
its tombstoned passages, merged term by term with the delta's rows, in positions of a
new passage array ordered by chunk id. The SQLite store re-tokenizes every chunk for
this; here the postings are already terms, so a merge only reorders numbers.

It never stops a writer, and it runs on any server (one at a time: a session advisory
lock; a second merge finds it taken and returns):

1. **Snapshot.** One REPEATABLE READ transaction reads the live generation, the
   tombstones ``D`` it can see, the delta's passages with their ``seq`` and the lists,
   streamed term by term through server-side cursors; the new generation's parts are
   written meanwhile by a second connection in batches of their own transactions
   (readers read only the generation ``kw_segment`` names, so nobody sees them yet).
2. **Switch**, one short transaction: ``kw_segment`` names the new generation (only if
   it still names the one the snapshot read); the tombstones of ``D`` are deleted, each
   only if its ``dseq`` is the one read (the new generation leaves those passages out);
   each delta passage read is marked ``merged``, only if its ``seq`` is still the one
   read. A passage removed or rewritten after the snapshot has a tombstone with a newer
   ``dseq``, so it stays hidden in the new generation, and its rewrite stays in the
   delta. The checks are row-level, so writers keep writing throughout.
3. **Cleanup**: the old generation's parts and the merged passages' delta rows are
   deleted (readers in an older snapshot still see them: MVCC), and the delta vacuumed.

A merge that dies leaves its half generation behind, which the next one deletes first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg

from kb_mcp.index.postgres.keyword import PASSAGES, KeywordTables
from kb_mcp.index.postings import DELTA_MIN, DELTA_SHARE, PART_PASSAGES

if TYPE_CHECKING:
    import numpy as np

# The advisory lock one merge at a time holds, with the tables' ``lock_id``.
MERGE_LOCK = 0x6B62_6B77  # "kbkw"
# Part rows written per transaction while a merge writes its generation.
WRITE_BATCH = 2_000
COUNT_MAX = 0xFFFF  # a packed count is a uint16, as in the SQLite segment
# Rows fetched per round trip from the snapshot's server-side cursors.
CURSOR_ROWS = 10_000


def merge_due(
    conn: psycopg.Connection, delta_min: int = DELTA_MIN, tables: KeywordTables = PASSAGES
) -> bool:
    """Whether the delta has outgrown its share of the live generation."""
    recent = conn.execute(
        tables.sql("SELECT COUNT(*) FROM kw_passages WHERE NOT merged")
    ).fetchone()[0]
    row = conn.execute(tables.sql("SELECT length(lengths) / 4 FROM kw_segment")).fetchone()
    merged = row[0] if row else 0
    return recent > max(delta_min, DELTA_SHARE * merged)


def merge(
    connect: Callable[[], psycopg.Connection],
    part_passages: int = PART_PASSAGES,
    tables: KeywordTables = PASSAGES,
) -> int | None:
    """Write the next generation from the live one and the delta and switch to it; the
    passages it holds, or None when another merge is under way or switched first.
    ``connect`` opens a new autocommit connection (two are used, then closed)."""
    with connect() as reader, connect() as writer:
        if not reader.execute(
            "SELECT pg_try_advisory_lock(%s, %s)", (MERGE_LOCK, tables.lock_id)
        ).fetchone()[0]:
            return None
        try:
            writer.execute(
                tables.sql(
                    "DELETE FROM kw_parts WHERE gen <> "
                    "COALESCE((SELECT generation FROM kw_segment), -1)"
                )
            )  # a dead merge's half generation
            with reader.transaction():
                reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                plan = _plan(reader, tables)
                _write_generation(reader, writer, plan, part_passages)
            if not _switch(writer, plan):
                writer.execute(tables.sql("DELETE FROM kw_parts WHERE gen = %s"), (plan.new_gen,))
                return None
            writer.execute(tables.sql("DELETE FROM kw_parts WHERE gen < %s"), (plan.new_gen,))
            writer.execute(
                tables.sql(
                    "DELETE FROM kw_recent r USING kw_passages p "
                    "WHERE p.chunk_id = r.chunk_id AND p.merged"
                )
            )
            # The delta's deleted rows stay in its b-tree until vacuumed, and every search
            # looks its terms up there: at 100k passages, just after a merge of 93k
            # (9.8M rows deleted), SciFact questions took 35 / 96 ms p50 / p95, and
            # 12 / 27 ms once autovacuum had passed. A role that may not vacuum gets a
            # warning, and autovacuum does it later.
            writer.execute(tables.sql("VACUUM (ANALYZE) kw_recent, kw_passages, kw_parts"))
            return len(plan.chunk_ids)
        finally:
            reader.execute("SELECT pg_advisory_unlock(%s, %s)", (MERGE_LOCK, tables.lock_id))


@dataclass(slots=True)
class _Plan:
    """What the snapshot read: the generations, the new passage arrays, and where each
    old position and delta passage goes in them."""

    tables: KeywordTables
    old_gen: int | None
    new_gen: int
    chunk_ids: np.ndarray
    doc_ids: np.ndarray
    lengths: np.ndarray
    seqs: np.ndarray
    old_to_new: np.ndarray  # old position → new one, -1 when tombstoned
    recent_ids: np.ndarray  # the delta's passages, ascending
    recent_to_new: np.ndarray
    recent_seqs: np.ndarray
    dead: list[tuple[int, int]]  # (chunk_id, dseq) the snapshot saw


def _plan(conn: psycopg.Connection, tables: KeywordTables) -> _Plan:
    import numpy as np

    row = conn.execute(
        tables.sql("SELECT generation, chunk_ids, doc_ids, lengths, seqs FROM kw_segment")
    ).fetchone()
    newest = conn.execute(tables.sql("SELECT COALESCE(MAX(gen), 0) FROM kw_parts")).fetchone()[0]
    if row is None:
        old_gen = None
        old = [np.zeros(0, dtype=np.int64)] * 2 + [np.zeros(0, np.uint32), np.zeros(0, np.int64)]
    else:
        old_gen = row[0]
        old = [
            np.frombuffer(row[1], "<i8"),
            np.frombuffer(row[2], "<i8"),
            np.frombuffer(row[3], "<u4"),
            np.frombuffer(row[4], "<i8"),
        ]
    dead = [tuple(r) for r in conn.execute(tables.sql("SELECT chunk_id, dseq FROM kw_dead"))]
    recent = conn.execute(
        tables.sql(
            "SELECT chunk_id, document_id, head_tokens + body_tokens, seq FROM kw_passages "
            "WHERE NOT merged ORDER BY chunk_id"
        )
    ).fetchall()
    recent_cols = [np.array(c, dtype=np.int64) for c in zip(*recent, strict=True)] or [
        np.zeros(0, dtype=np.int64)
    ] * 4
    live = ~np.isin(old[0], np.array([d[0] for d in dead], dtype=np.int64))
    ids = np.concatenate([old[0][live], recent_cols[0]])
    order = np.argsort(ids, kind="stable")
    if len(ids) > 1 and np.any(ids[order][1:] == ids[order][:-1]):
        raise ValueError("a delta passage is also live in the generation")  # a bug
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    old_to_new = np.full(len(old[0]), -1, dtype=np.int64)
    old_to_new[np.flatnonzero(live)] = rank[: int(live.sum())]

    def new(old_column: np.ndarray, recent_column: np.ndarray, dtype: str) -> np.ndarray:
        return np.concatenate([old_column[live].astype(dtype), recent_column.astype(dtype)])[order]

    return _Plan(
        tables,
        old_gen,
        max(old_gen or 0, newest) + 1,
        ids[order],
        new(old[1], recent_cols[1], "<i8"),
        new(old[2], recent_cols[2], "<u4"),
        new(old[3], recent_cols[3], "<i8"),
        old_to_new,
        recent_cols[0],
        rank[int(live.sum()) :],
        recent_cols[3],
        dead,
    )


def _write_generation(
    reader: psycopg.Connection, writer: psycopg.Connection, plan: _Plan, part_passages: int
) -> None:
    """Every term's merged list, in parts, written under ``plan.new_gen``."""
    old = _old_lists(reader, plan) if plan.old_gen is not None else iter(())
    recent = _recent_lists(reader, plan)
    batch: list[tuple] = []
    for term, lists in _by_term(old, recent):
        batch.extend(_parts(plan.new_gen, term, lists, part_passages))
        if len(batch) >= WRITE_BATCH:
            _copy_parts(writer, batch, plan.tables)
            batch.clear()
    _copy_parts(writer, batch, plan.tables)


_Lists = tuple["np.ndarray", "np.ndarray", "np.ndarray"]  # new positions, head, body counts


def _old_lists(conn: psycopg.Connection, plan: _Plan) -> Iterator[tuple[str, _Lists]]:
    """The live generation's lists in term order, moved to the new positions."""
    import numpy as np

    cursor = conn.cursor(name="kw_merge_old", binary=True)
    cursor.itersize = CURSOR_ROWS
    cursor.execute(
        plan.tables.sql(
            "SELECT term, ids, head, body FROM kw_parts WHERE gen = %s ORDER BY term, part"
        ),
        (plan.old_gen,),
    )
    all_live = bool((plan.old_to_new >= 0).all())
    for term, rows in itertools.groupby(cursor, key=lambda r: r[0]):
        parts = list(rows)
        if len(parts) == 1:  # most terms are rare: one part, no concatenation
            ids, head, body = (np.frombuffer(parts[0][c], t) for c, t in _PART_TYPES)
        else:
            ids, head, body = (
                np.concatenate([np.frombuffer(r[c], t) for r in parts]) for c, t in _PART_TYPES
            )
        moved = plan.old_to_new[ids]  # ascending: the new order keeps the old one
        if all_live:
            yield term, (moved, head, body)
            continue
        keep = moved >= 0
        if keep.any():
            yield term, (moved[keep], head[keep], body[keep])


_PART_TYPES = ((1, "<u4"), (2, "<u2"), (3, "<u2"))  # ids, head, body of a part's row


def _recent_lists(conn: psycopg.Connection, plan: _Plan) -> Iterator[tuple[str, _Lists]]:
    """The delta's lists in term order, at their new positions (ascending, as chunk ids).

    Grouped and packed by the server (``string_agg`` of each value's binary form): a
    row per term, not per posting. At 93k delta passages (9.8M rows) reading a row per
    posting into Python did not end within 90 s."""
    import numpy as np

    cursor = conn.cursor(name="kw_merge_recent", binary=True)
    cursor.itersize = CURSOR_ROWS
    cursor.execute(
        plan.tables.sql(
            "SELECT r.term, string_agg(int8send(r.chunk_id), ''::bytea ORDER BY r.chunk_id), "
            "string_agg(int4send(r.head), ''::bytea ORDER BY r.chunk_id), "
            "string_agg(int4send(r.body), ''::bytea ORDER BY r.chunk_id) "
            "FROM kw_recent r JOIN kw_passages p ON p.chunk_id = r.chunk_id "
            "WHERE NOT p.merged GROUP BY r.term ORDER BY r.term"
        )
    )
    for term, ids, head, body in cursor:
        at = np.searchsorted(plan.recent_ids, np.frombuffer(ids, ">i8"))
        yield (
            term,
            (
                plan.recent_to_new[at],
                np.minimum(np.frombuffer(head, ">i4"), COUNT_MAX),
                np.minimum(np.frombuffer(body, ">i4"), COUNT_MAX),
            ),
        )


def _by_term(
    *sources: Iterator[tuple[str, _Lists]],
) -> Iterable[tuple[str, list[_Lists]]]:
    """The sources' lists grouped by term; each source is in term order (``COLLATE "C"``:
    byte order, which is Python's order of ``str``)."""
    import heapq

    merged = heapq.merge(*sources, key=lambda item: item[0])
    for term, items in itertools.groupby(merged, key=lambda item: item[0]):
        yield term, [lists for _term, lists in items]


def _parts(gen: int, term: str, lists: list[_Lists], part_passages: int) -> Iterator[tuple]:
    """One term's rows: its postings sorted by position, one row per part."""
    import numpy as np

    if len(lists) == 1:  # each source's list is ascending already
        at, head, body = lists[0]
    else:
        at, head, body = (np.concatenate(column) for column in zip(*lists, strict=True))
        order = np.argsort(at, kind="stable")
        at, head, body = at[order], head[order], body[order]
    at, head, body = at.astype("<u4"), head.astype("<u2"), body.astype("<u2")
    first, last = int(at[0]) // part_passages, int(at[-1]) // part_passages
    if first == last:
        yield gen, term, first, at.tobytes(), head.tobytes(), body.tobytes()
        return
    part_of = at // part_passages
    bounds = np.flatnonzero(np.diff(part_of)) + 1
    for start, end in zip([0, *bounds.tolist()], [*bounds.tolist(), len(at)], strict=True):
        yield (
            gen,
            term,
            int(part_of[start]),
            at[start:end].tobytes(),
            head[start:end].tobytes(),
            body[start:end].tobytes(),
        )


def _copy_parts(conn: psycopg.Connection, rows: list[tuple], tables: KeywordTables) -> None:
    if not rows:
        return
    with (
        conn.transaction(),
        conn.cursor().copy(
            tables.sql("COPY kw_parts(gen, term, part, ids, head, body) FROM STDIN")
        ) as copy,
    ):
        for row in rows:
            copy.write_row(row)


def _switch(conn: psycopg.Connection, plan: _Plan) -> bool:
    """Step 2 (see the module): False when another merge switched since the snapshot."""
    tables = plan.tables
    with conn.transaction():
        row = conn.execute(tables.sql("SELECT generation FROM kw_segment FOR UPDATE")).fetchone()
        if (row[0] if row else None) != plan.old_gen:
            return False
        conn.execute(
            tables.sql(
                "INSERT INTO kw_segment(id, generation, chunk_ids, doc_ids, lengths, seqs) "
                "VALUES (1, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                "generation = excluded.generation, chunk_ids = excluded.chunk_ids, "
                "doc_ids = excluded.doc_ids, lengths = excluded.lengths, seqs = excluded.seqs"
            ),
            (
                plan.new_gen,
                plan.chunk_ids.astype("<i8").tobytes(),
                plan.doc_ids.tobytes(),
                plan.lengths.tobytes(),
                plan.seqs.tobytes(),
            ),
        )
        conn.execute(
            tables.sql(
                "DELETE FROM kw_dead d USING unnest(%s::bigint[], %s::bigint[]) AS i(c, s) "
                "WHERE d.chunk_id = i.c AND d.dseq = i.s"
            ),
            ([d[0] for d in plan.dead], [d[1] for d in plan.dead]),
        )
        conn.execute(
            tables.sql(
                "UPDATE kw_passages p SET merged = true "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS i(c, s) "
                "WHERE p.chunk_id = i.c AND p.seq = i.s"
            ),
            (plan.recent_ids.tolist(), plan.recent_seqs.tolist()),
        )
    return True
