"""All SQL of the entity graph: entities, mentions, relations, and their upkeep.

The graph is derived from the chunks, like the FTS index. A document's chunks are added
by the linking phase after it is keyword-searchable (``ingest/links``), and taken back in
the transaction that removes them (``ingest/pipeline``): adding a chunk adds its mentions,
its co-mention pairs and the counts; removing it takes back exactly those (the pairs are
recomputed from its stored mentions by the same rule, ``graph/extract.paired``), and an
entity no chunk mentions any more goes. An entity's ``name``, ``kind`` and ``aliases``
are a function of its mentions (strongest kind, then the smallest spelling; the 16
smallest spellings), so the graph does not depend on the order documents arrived and a
rebuild gives the same graph (a test checks it).

``meta.graph_version`` records the extractor the graph was built with; a database built
by another one (or before the graph existed) is rebuilt by the first reader, in one
transaction, like the FTS index.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import apsw

from kb_mcp.graph.extract import EXTRACTOR_VERSION, KIND_RANK, Extraction, Mention, extract
from kb_mcp.store import meta
from kb_mcp.store.db import Database

ALIASES_KEPT = 16
GRAPH_VERSION = EXTRACTOR_VERSION
# Stored entity keys looked up per statement: under SQLite's 32,766 bound on a
# statement's parameters whatever a batch of documents names.
_KEYS_PER_SELECT = 500
CO_MENTION = ""  # the label of co-mention relations; typed relations carry their own


@dataclass(frozen=True, slots=True)
class EntityRow:
    id: int
    norm: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    mentions: int


def _strongest(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """Of two (kind, spelling), the one that names the entity: stronger kind, then the
    smaller spelling, so the result never depends on which came first."""
    return min(a, b, key=lambda ks: (KIND_RANK[ks[0]], ks[1]))


def _aliases_json(spellings: Iterable[str]) -> str:
    """``json.dumps(sorted(spellings)[:ALIASES_KEPT], ensure_ascii=False)``, the same
    text, without building an encoder per call (a third of ``_upsert_entities``)."""
    return "[" + ", ".join(map(_quoted, sorted(spellings)[:ALIASES_KEPT])) + "]"


_quoted = json.encoder.encode_basestring  # the quoting json.dumps(ensure_ascii=False) uses


def _upsert_entities(conn: apsw.Connection, seen: dict[str, list[Mention]]) -> dict[str, int]:
    """The entity id of each key of ``seen`` (created when new), each count raised by its
    mentions there, its name, kind and aliases merged with theirs.

    One SELECT for the keys already stored and one executemany per kind of write, not a
    statement or two per entity: per-entity upserts were 40 % of the graph's ingest cost
    (cProfile of ``bench/graph_cost`` on /work/research/realcorpus).
    """
    keys = list(seen)
    found = []
    for start in range(0, len(keys), _KEYS_PER_SELECT):  # SQL both engines read
        part = keys[start : start + _KEYS_PER_SELECT]
        found += conn.execute(
            "SELECT id, norm, name, kind, aliases FROM entities "
            f"WHERE norm IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
    ids = {norm: entity_id for entity_id, norm, _n, _k, _a in found}
    changed, counted = [], []
    for entity_id, norm, name, kind, aliases_json in found:
        mentions = seen[norm]
        first = _first(mentions)
        kind2, name2 = _strongest((kind, name), (first.kind, first.surface))
        if _all_listed(mentions, aliases_json):
            merged = aliases_json  # the sorted first 16 of the same set
        else:
            aliases = json.loads(aliases_json)
            merged = _aliases_json({*aliases, *(m.surface for m in mentions)})
        if (kind2, name2) != (kind, name) or merged != aliases_json:
            changed.append((len(mentions), name2, kind2, merged, entity_id))
        else:
            counted.append((len(mentions), entity_id))
    if changed:
        conn.executemany(
            "UPDATE entities SET mentions = mentions + ?, name = ?, kind = ?, aliases = ? "
            "WHERE id = ?",
            changed,
        )
    if counted:
        conn.executemany("UPDATE entities SET mentions = mentions + ? WHERE id = ?", counted)
    rows = []
    for key, mentions in seen.items():
        if key in ids:
            continue
        if len(mentions) == 1:  # most keys of a batch: no sorting, one spelling
            (first,) = mentions
            aliases = "[" + _quoted(first.surface) + "]"
        else:
            first = min(mentions, key=_rank)
            aliases = _aliases_json({m.surface for m in mentions})
        rows.append((key, first.surface, first.kind, aliases, len(mentions)))
    if rows:
        ids.update(
            (norm, entity_id)
            for entity_id, norm in conn.executemany(
                "INSERT INTO entities(norm, name, kind, aliases, mentions) VALUES (?, ?, ?, ?, ?) "
                "RETURNING id, norm",
                rows,
            )
        )
    return ids


def _all_listed(mentions: list[Mention], aliases_json: str) -> bool:
    """Whether every spelling of ``mentions`` is an element of the stored aliases (a
    JSON list ``_aliases_json`` wrote), without parsing it: most entities a batch
    mentions again are spelled as before, and parsing and re-sorting their aliases was
    a fifth of ``_upsert_entities`` (cProfile of the realcorpus sync's graph writes).

    The list's text split at ``", "`` gives its elements, except where an element itself
    holds ``", "`` (then that spelling is not found here, and the caller merges the slow
    way). A spelling whose quoted form holds a backslash (an escaped quote or control
    character) is not looked up at all. So True is never wrong.
    """
    listed = None
    for mention in mentions:
        quoted = _quoted(mention[1])
        if "\\" in quoted:
            return False
        if listed is None:
            listed = set(aliases_json[1:-1].split(", "))
        if quoted not in listed:
            return False
    return True


def _first(mentions: list[Mention]) -> Mention:
    """The mention that names an entity: strongest kind, then the smallest spelling."""
    return mentions[0] if len(mentions) == 1 else min(mentions, key=_rank)


def _rank(mention: Mention) -> tuple[int, str]:
    return (KIND_RANK[mention.kind], mention.surface)


def _bump_relations(
    conn: apsw.Connection, counted: Mapping[tuple[int, int], int], sign: int
) -> None:
    ordered = [(a, b, n) if a < b else (b, a, n) for (a, b), n in counted.items()]
    if sign > 0:
        conn.executemany(
            "INSERT INTO entity_relations(a, b, label, weight) VALUES (?, ?, '', ?) "
            "ON CONFLICT(a, b, label) "
            "DO UPDATE SET weight = entity_relations.weight + excluded.weight",
            ordered,
        )
    else:
        conn.executemany(
            "UPDATE entity_relations SET weight = weight - ? WHERE a = ? AND b = ? AND label = ''",
            ((n, a, b) for a, b, n in ordered),
        )


def add_extracted(conn: apsw.Connection, chunks: Sequence[tuple[int, Extraction]]) -> None:
    """Record chunks' mentions and co-mention pairs. Call inside ``db.write()``.

    One document's chunks come together, so each entity is written once per document,
    not once per chunk, and a pair its chunks repeat (a heading's) once with its count:
    a handful of statements per document, whatever its size.
    """
    seen: dict[str, list[Mention]] = {}
    for _cid, found in chunks:
        for mention in found.mentions:
            held = seen.get(mention[0])
            if held is None:
                seen[mention[0]] = [mention]
            else:
                held.append(mention)
    if not seen:
        return
    ids = _upsert_entities(conn, seen)
    conn.executemany(
        "INSERT INTO mentions(entity_id, chunk_id, surface, kind, weight) VALUES (?, ?, ?, ?, ?)",
        (
            (ids[key], cid, surface, kind, weight)
            for cid, found in chunks
            for key, surface, kind, weight in found.mentions
        ),
    )
    # Counted by keys first (in C), then each distinct pair resolved to ids once.
    pairs = Counter(chain.from_iterable(found.pairs for _cid, found in chunks))
    _bump_relations(conn, {(ids[a], ids[b]): n for (a, b), n in pairs.items()}, +1)


class PendingMentions:
    """The entities of documents stored in one write transaction, written together.

    Trigger: ``add_extracted`` once per document was the writer's largest cost on the
    bench corpus (1,250 files: a SELECT and four executemany per file, and each entity
    shared by many files upserted once per file). Outcome: a sync hands one of these to
    every document of a batch and flushes it before the batch commits, so an entity is
    written once per batch. The same rows result: counts add, names and kinds are the
    strongest, aliases the smallest spellings, whatever the grouping. Flushed early
    once ``MAX_PENDING_CHUNKS`` wait (bounded memory), and by the caller before anything
    is removed in the same transaction (removal reads the mentions it takes back).
    """

    MAX_PENDING_CHUNKS = 20_000

    def __init__(self) -> None:
        self._chunks: list[tuple[int, Extraction]] = []

    def add(self, conn: apsw.Connection, chunks: Iterable[tuple[int, Extraction]]) -> None:
        self._chunks.extend(chunks)
        if len(self._chunks) >= self.MAX_PENDING_CHUNKS:
            self.flush(conn)

    def flush(self, conn: apsw.Connection) -> None:
        """Write what waits. Call inside the ``db.write()`` the documents were stored in."""
        if self._chunks:
            add_extracted(conn, self._chunks)
            self._chunks = []


def add_chunks(
    conn: apsw.Connection, chunks: Iterable[tuple[int, Sequence[str], str]], *, code: bool = False
) -> None:
    """Extract and record one document's ``(chunk_id, heading_path, text)`` rows;
    ``code`` when it is a source file. Call inside ``db.write()``."""
    add_extracted(conn, [(cid, extract(text, path, code=code)) for cid, path, text in chunks])


def _refresh_names(conn: apsw.Connection, entity_id: int) -> None:
    """Name, kind and aliases of an entity again from the mentions it has left."""
    best: tuple[str, str] | None = None
    spellings: set[str] = set()
    for kind, surface in conn.execute(
        "SELECT kind, surface FROM mentions WHERE entity_id = ?", (entity_id,)
    ):
        best = (kind, surface) if best is None else _strongest(best, (kind, surface))
        spellings.add(surface)
    if best is not None:
        aliases = sorted(spellings)[:ALIASES_KEPT]
        conn.execute(
            "UPDATE entities SET kind = ?, name = ?, aliases = ? WHERE id = ?",
            (best[0], best[1], json.dumps(aliases, ensure_ascii=False), entity_id),
        )


def remove_chunks(conn: apsw.Connection, chunk_ids: Iterable[int]) -> None:
    """Take chunks out of the graph. Call inside ``db.write()``, before the rows go.

    Each chunk is extracted again from its stored text (the extractor is deterministic
    and the graph's version is its version), so exactly the pairs it added are
    un-counted; its mentions and typed facts are deleted, entities left unmentioned
    deleted (their relations cascade), and the others renamed when a spelling only the
    removed chunks used was what named them.
    """
    touched: dict[int, set[str]] = {}
    for chunk_id in chunk_ids:
        held = conn.execute(
            "SELECT m.entity_id, e.norm, m.surface FROM mentions m "
            "JOIN entities e ON e.id = m.entity_id WHERE m.chunk_id = ?",
            (chunk_id,),
        ).fetchall()
        if not held:
            continue
        by_key = {norm: entity_id for entity_id, norm, _s in held}
        row = conn.execute(
            "SELECT c.heading_path, c.text, d.kind = 'code' FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE c.id = ?",
            (chunk_id,),
        ).fetchone()
        pairs = extract(row[1], json.loads(row[0]), code=bool(row[2])).pairs if row else []
        _bump_relations(
            conn,
            Counter((by_key[a], by_key[b]) for a, b in pairs if a in by_key and b in by_key),
            -1,
        )
        for fact in conn.execute(
            "SELECT a, b, label FROM entity_facts WHERE chunk_id = ?", (chunk_id,)
        ).fetchall():
            conn.execute(
                "UPDATE entity_relations SET weight = weight - 1 WHERE a = ? AND b = ? "
                "AND label = ?",
                fact,
            )
        conn.execute("DELETE FROM entity_facts WHERE chunk_id = ?", (chunk_id,))
        conn.execute("DELETE FROM mentions WHERE chunk_id = ?", (chunk_id,))
        conn.executemany(
            "UPDATE entities SET mentions = mentions - 1 WHERE id = ?",
            ((entity_id,) for entity_id, _n, _s in held),
        )
        for entity_id, _norm, surface in held:
            touched.setdefault(entity_id, set()).add(surface)
    if not touched:
        return
    conn.execute("DELETE FROM entity_relations WHERE weight <= 0")
    for entity_id, surfaces in touched.items():
        left = conn.execute(
            "SELECT mentions, name FROM entities WHERE id = ?", (entity_id,)
        ).fetchone()
        if left is None:
            continue
        if left[0] <= 0:
            conn.execute("DELETE FROM entities WHERE id = ?", (entity_id,))
        elif left[1] in surfaces or not all(_spelled(conn, entity_id, s) for s in surfaces):
            _refresh_names(conn, entity_id)


def _spelled(conn: apsw.Connection, entity_id: int, surface: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM mentions WHERE entity_id = ? AND surface = ? LIMIT 1",
            (entity_id, surface),
        ).fetchone()
        is not None
    )


def forget_all(conn: apsw.Connection) -> None:
    """Empty the graph (a rebuild refills it as documents are stored again)."""
    for table in ("entity_facts", "mentions", "entity_relations", "entities"):
        conn.execute(f"DELETE FROM {table}")  # fixed names, never user text
    meta.put(conn, "graph_version", GRAPH_VERSION)


def stored_version(conn: apsw.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'graph_version'").fetchone()
    return row[0] if row else None


def rebuild(db: Database) -> int:
    """Extract the graph again from every chunk of a linked document (one still in
    ``link_queue`` gets its entities from the linking phase), in one transaction; the
    chunk count."""
    count = 0
    with db.write() as conn:
        forget_all(conn)
        cursor = db.conn.execute(
            "SELECT c.id, c.document_id, c.heading_path, c.text, d.kind = 'code' FROM chunks c "
            "JOIN documents d ON d.id = c.document_id "
            "WHERE c.document_id NOT IN (SELECT document_id FROM link_queue) "
            "ORDER BY c.document_id, c.id"
        )
        document, batch = None, []
        for cid, document_id, path, text, code in cursor:
            if document_id != document and batch:
                add_extracted(conn, batch)
                batch = []
            document = document_id
            batch.append((cid, extract(text, json.loads(path), code=bool(code))))
            count += 1
        add_extracted(conn, batch)
    return count


class GraphIndex:
    """Keeps one library's graph current, and answers the graph's read queries."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._current = False

    def ensure_current(self) -> bool:
        """Rebuild the graph if another extractor built it (or none did); True if it did."""
        if self._current:
            return False
        with self._lock:
            if self._current:
                return False
            rebuilt = stored_version(self.db.conn) != GRAPH_VERSION
            if rebuilt:
                rebuild(self.db)
            self._current = True
            return rebuilt

    def is_current(self) -> bool:
        return self._current or stored_version(self.db.conn) == GRAPH_VERSION

    # --- reads ---------------------------------------------------------------------------

    def by_norms(self, norms: Iterable[str]) -> list[EntityRow]:
        unique = sorted(set(norms))
        if not unique:
            return []
        marks = ",".join("?" * len(unique))
        return [
            _entity(r)
            for r in self.db.conn.execute(
                f"SELECT id, norm, name, kind, aliases, mentions FROM entities "
                f"WHERE norm IN ({marks})",
                unique,
            )
        ]

    def norms_with_prefix(self, prefix: str, limit: int = 200) -> list[str]:
        """Stored keys starting with ``prefix`` (the candidates a fuzzy match reads)."""
        rows = self.db.conn.execute(
            "SELECT norm FROM entities WHERE norm >= ? AND norm < ? LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        )
        return [r[0] for r in rows]

    def all_names(self) -> list[tuple[int, str, str]]:
        """``(id, norm, name)`` of every entity (for a person's fuzzy lookup)."""
        return self.db.conn.execute("SELECT id, norm, name FROM entities").fetchall()

    def get(self, ids: Sequence[int]) -> list[EntityRow]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        found = {
            r[0]: _entity(r)
            for r in self.db.conn.execute(
                f"SELECT id, norm, name, kind, aliases, mentions FROM entities "
                f"WHERE id IN ({marks})",
                list(ids),
            )
        }
        return [found[i] for i in ids if i in found]

    def most_mentioned(self, limit: int) -> list[EntityRow]:
        return [
            _entity(r)
            for r in self.db.conn.execute(
                "SELECT id, norm, name, kind, aliases, mentions FROM entities "
                "ORDER BY mentions DESC, norm LIMIT ?",
                (limit,),
            )
        ]

    def neighbours(self, entity_id: int, limit: int) -> list[tuple[int, str, float]]:
        """``(entity_id, label, weight)`` of the entities linked to ``entity_id``, heaviest
        first (co-mention label is '')."""
        return self.db.conn.execute(
            "SELECT other, label, weight FROM ("
            "SELECT b AS other, label, weight FROM entity_relations WHERE a = ? "
            "UNION ALL SELECT a AS other, label, weight FROM entity_relations WHERE b = ?) "
            "ORDER BY weight DESC, other LIMIT ?",
            (entity_id, entity_id, limit),
        ).fetchall()

    def links_among(
        self, entity_ids: Sequence[int], limit: int
    ) -> list[tuple[int, int, str, float]]:
        """``(a, b, label, weight)`` of up to ``limit`` relations whose two ends are both
        in ``entity_ids`` (a neighbourhood's edges between neighbours), heaviest first."""
        if len(entity_ids) < 2:
            return []
        marks = ",".join("?" * len(entity_ids))
        return self.db.conn.execute(
            f"SELECT a, b, label, weight FROM entity_relations WHERE a IN ({marks}) "
            f"AND b IN ({marks}) ORDER BY weight DESC, a, b, label LIMIT ?",
            (*entity_ids, *entity_ids, limit),
        ).fetchall()

    def mentions_of(self, entity_id: int, limit: int) -> list[tuple[int, float]]:
        """``(chunk_id, weight)`` of the chunks mentioning ``entity_id``, heaviest first."""
        return self.db.conn.execute(
            "SELECT chunk_id, weight FROM mentions WHERE entity_id = ? "
            "ORDER BY weight DESC, chunk_id LIMIT ?",
            (entity_id, limit),
        ).fetchall()

    def in_chunks(self, chunk_ids: Sequence[int], limit: int) -> list[tuple[EntityRow, float]]:
        """The entities the chunks mention with their summed weight, heaviest first (a
        document's entities, for the web view)."""
        if not chunk_ids:
            return []
        marks = ",".join("?" * len(chunk_ids))
        rows = self.db.conn.execute(
            f"SELECT e.id, e.norm, e.name, e.kind, e.aliases, e.mentions, SUM(m.weight) AS w "
            f"FROM mentions m JOIN entities e ON e.id = m.entity_id "
            f"WHERE m.chunk_id IN ({marks}) GROUP BY e.id ORDER BY w DESC, e.norm LIMIT ?",
            (*chunk_ids, limit),
        )
        return [(_entity(r[:6]), r[6]) for r in rows]

    def chunk_count(self) -> int:
        return self.db.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    def snapshot(self) -> tuple[set, set, set]:
        """The graph by names, not ids: entities, mentions (by document key and chunk
        ordinal) and relations. What a rebuild must reproduce exactly."""
        conn = self.db.conn
        entities = set(conn.execute("SELECT norm, name, kind, aliases, mentions FROM entities"))
        mentions = set(
            conn.execute(
                "SELECT e.norm, d.doc_key, c.ordinal, m.surface, m.kind, m.weight "
                "FROM mentions m JOIN entities e ON e.id = m.entity_id "
                "JOIN chunks c ON c.id = m.chunk_id JOIN documents d ON d.id = c.document_id"
            )
        )
        relations = {
            (*sorted((a, b)), label, weight)
            for a, b, label, weight in conn.execute(
                "SELECT ea.norm, eb.norm, r.label, r.weight FROM entity_relations r "
                "JOIN entities ea ON ea.id = r.a JOIN entities eb ON eb.id = r.b"
            )
        }
        return entities, mentions, relations


def _entity(row: tuple) -> EntityRow:
    entity_id, norm, name, kind, aliases, mentions = row
    return EntityRow(entity_id, norm, name, kind, tuple(json.loads(aliases)), mentions)
