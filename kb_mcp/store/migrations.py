"""Ordered schema migrations keyed by ``PRAGMA user_version``.

Migration N brings a database from version N-1 to N and runs in one ``BEGIN IMMEDIATE``
transaction together with the version bump, so a crash leaves either the old schema or
the new one. Never edit a released migration; append a new one.

The FTS index copy has its own version (``meta.fts_version``, see ``index/fts.py``):
changing how text is prepared for the index is not a schema change and is migrated
lazily by the first reader instead of here, because it is proportional to the data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import apsw

from kb_mcp.errors import Unavailable

_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE sources (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    kind         TEXT NOT NULL CHECK (kind IN ('agent', 'folder', 'upload')),
    root         TEXT,
    ignore_globs TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    synced_at    TEXT,
    sync_state   TEXT NOT NULL DEFAULT 'idle',
    sync_error   TEXT
);
CREATE TABLE documents (
    id            INTEGER PRIMARY KEY,
    doc_key       TEXT NOT NULL UNIQUE,
    title         TEXT NOT NULL,
    uri           TEXT,
    kind          TEXT NOT NULL,
    language      TEXT,
    text          TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    doc_date      TEXT,
    tags          TEXT NOT NULL DEFAULT '[]',
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'current',
    embed_pending INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX documents_hash ON documents(content_hash);
CREATE INDEX documents_uri ON documents(uri);
CREATE TABLE locations (
    id          INTEGER PRIMARY KEY,
    source_id   INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    path        TEXT NOT NULL,
    document_id INTEGER REFERENCES documents(id) ON DELETE SET NULL,
    state       TEXT NOT NULL DEFAULT 'indexed',
    reason      TEXT,
    size        INTEGER,
    mtime_ns    INTEGER,
    file_hash   TEXT,
    seen_at     TEXT,
    UNIQUE (source_id, path)
);
CREATE INDEX locations_document ON locations(document_id);
CREATE TABLE supersessions (
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    supersedes  TEXT NOT NULL,
    PRIMARY KEY (document_id, supersedes)
);
CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,
    document_id  INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading_path TEXT NOT NULL DEFAULT '[]',
    start_line   INTEGER NOT NULL,
    end_line     INTEGER NOT NULL,
    text         TEXT NOT NULL,
    UNIQUE (document_id, ordinal)
);
"""

# 2: near-duplicate pairs, reported by `list` (never merged), and a title index to find
# candidates quickly.
_V2 = """
CREATE TABLE near_duplicates (
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    other_id    INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    similarity  REAL NOT NULL,
    PRIMARY KEY (document_id, other_id)
);
CREATE INDEX documents_title ON documents(title COLLATE NOCASE);
"""


def _v3_forget_verbatim_folder_text(conn: apsw.Connection) -> None:
    """3: folder files were stored and indexed verbatim, secrets included (issue 7 item 1).

    Their documents go now (chunks, near-duplicate pairs and supersessions cascade; the
    locations stay, pointing at nothing) and their recorded size / mtime / hash are
    cleared, so the next sync re-reads every file and stores it redacted. Deleting here,
    not waiting for that sync, means nothing raw is served in between: grep and read run
    over ``documents``, search over chunks. The FTS rows go too, when the index exists,
    and its version is forgotten so the first reader rebuilds it from the remaining
    chunks, leaving no raw term in its vocabulary. Agent and upload documents were
    redacted on the way in already and are kept. ``secure_delete`` is on for this step:
    freed pages are zeroed, so the raw text does not linger in the file's free list.
    """
    conn.execute("PRAGMA secure_delete = ON")
    doomed = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT l.document_id FROM locations l JOIN sources s ON s.id = l.source_id "
            "WHERE s.kind = 'folder' AND l.document_id IS NOT NULL"
        )
    ]
    fts_exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts'"
    ).fetchone()
    for document_id in doomed:
        if fts_exists:
            conn.execute(
                "DELETE FROM chunks_fts WHERE rowid IN "
                "(SELECT id FROM chunks WHERE document_id = ?)",
                (document_id,),
            )
        conn.execute("DELETE FROM documents WHERE id = ?", (document_id,))
    conn.execute(
        "UPDATE locations SET document_id = NULL, size = NULL, mtime_ns = NULL, "
        "file_hash = NULL WHERE source_id IN (SELECT id FROM sources WHERE kind = 'folder')"
    )
    conn.execute("DELETE FROM meta WHERE key = 'fts_version'")
    conn.execute("PRAGMA secure_delete = OFF")


# 4: the embedding signatures the library holds vectors for (issue 8). Each signature's
# vectors live in its own tables, created by ``index/vectors.ensure_signature`` when the
# first vector of that signature is stored; ``last_error`` keeps the reason of the last
# failed embedding run, for ``list`` and ``doctor``.
_V4 = """
CREATE TABLE embedding_signatures (
    id            INTEGER PRIMARY KEY,
    key           TEXT NOT NULL UNIQUE,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    dims          INTEGER NOT NULL,
    max_chars     INTEGER NOT NULL,
    prefixes      TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    last_error    TEXT,
    last_error_at TEXT
);
"""

# 5: the entity graph (issue 9), derived data like the FTS index: entities (one row per
# normalized name, ``graph/resolve.entity_key``; ``name`` / ``kind`` / ``aliases`` follow
# from the mentions), mentions (entity ↔ chunk, with the spelling and kind seen there and
# a weight), co-mention and typed relations between entities (``label`` '' is
# co-mention; ``weight`` counts the chunks behind a relation), and the typed relations
# each chunk stated (``entity_facts``), so removing the chunk takes back exactly those.
# Mentions and facts cascade from chunks; ``index/graph.py`` keeps the counts.
_V5 = """
CREATE TABLE entities (
    id       INTEGER PRIMARY KEY,
    norm     TEXT NOT NULL UNIQUE,
    name     TEXT NOT NULL,
    kind     TEXT NOT NULL,
    aliases  TEXT NOT NULL DEFAULT '[]',
    mentions INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE mentions (
    entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    chunk_id  INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    surface   TEXT NOT NULL,
    kind      TEXT NOT NULL,
    weight    REAL NOT NULL,
    PRIMARY KEY (entity_id, chunk_id)
) WITHOUT ROWID;
CREATE INDEX mentions_chunk ON mentions(chunk_id);
CREATE TABLE entity_relations (
    a      INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    b      INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    label  TEXT NOT NULL DEFAULT '',
    weight REAL NOT NULL,
    PRIMARY KEY (a, b, label)
) WITHOUT ROWID;
CREATE INDEX entity_relations_b ON entity_relations(b);
CREATE TABLE entity_facts (
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    a        INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    b        INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    label    TEXT NOT NULL,
    PRIMARY KEY (chunk_id, a, b, label)
) WITHOUT ROWID;
"""

# 6: document relations (issue 9): what documents state about one another.
# ``stated_by`` is the document whose frontmatter or prose says it (its removal removes
# the row); ``from_id`` changes ``to_id``. The side that is not ``stated_by`` is
# NULL while the reference matches no document (``pending``) or several (``ambiguous``),
# and becomes NULL again when its document goes, so the store re-matches it.
_V6_RELATIONS = """
CREATE TABLE doc_relations (
    id          INTEGER PRIMARY KEY,
    stated_by   INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    from_id     INTEGER REFERENCES documents(id) ON DELETE SET NULL,
    to_id       INTEGER REFERENCES documents(id) ON DELETE SET NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('supersedes', 'corrects', 'withdraws', 'updates')),
    reference   TEXT NOT NULL,
    effective   TEXT,
    evidence    TEXT NOT NULL,
    start_line  INTEGER NOT NULL,
    end_line    INTEGER NOT NULL,
    detected    TEXT NOT NULL CHECK (detected IN ('frontmatter', 'prose')),
    state       TEXT NOT NULL CHECK (state IN ('resolved', 'pending', 'ambiguous'))
);
CREATE INDEX doc_relations_stated ON doc_relations(stated_by);
CREATE INDEX doc_relations_from ON doc_relations(from_id);
CREATE INDEX doc_relations_to ON doc_relations(to_id);
"""

# A step is a SQL script, or a function of the connection for what SQL alone cannot say.
# The keyword postings segment (``index/postings.py``, issue 10): derived from the chunk
# rows, rebuilt in short transactions beside the live one (``gen``: readers read the
# generation ``kw_segment`` names); ``kw_delta`` lists the chunks written or deleted since,
# ``seq`` ordering them so a build drops only what it has seen.
_V7_POSTINGS = """
CREATE TABLE kw_postings (
    gen  INTEGER NOT NULL,
    term TEXT NOT NULL,
    part INTEGER NOT NULL,
    ids  BLOB NOT NULL,
    head BLOB NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (gen, term, part)
) WITHOUT ROWID;
CREATE TABLE kw_segment (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    chunk_ids  BLOB NOT NULL,
    doc_ids    BLOB NOT NULL,
    lengths    BLOB NOT NULL
);
CREATE TABLE kw_delta (chunk_id INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
CREATE INDEX kw_delta_seq ON kw_delta(seq);
"""

# What a change of a location tells ``names_log`` (``_V8``): made again by ``_v9`` for the
# rebuilt table, since dropping a table drops its triggers.
_LOCATION_NAME_TRIGGERS = """\
CREATE TRIGGER names_log_loc_insert AFTER INSERT ON locations
WHEN NEW.document_id IS NOT NULL BEGIN
    INSERT INTO names_log(what, item, token) VALUES (0, NEW.document_id, random());
END;
CREATE TRIGGER names_log_loc_delete AFTER DELETE ON locations
WHEN OLD.document_id IS NOT NULL BEGIN
    INSERT INTO names_log(what, item, token) VALUES (0, OLD.document_id, random());
END;
CREATE TRIGGER names_log_loc_update AFTER UPDATE OF path, document_id, source_id ON locations
WHEN OLD.document_id IS NOT NEW.document_id OR OLD.path IS NOT NEW.path
    OR OLD.source_id IS NOT NEW.source_id BEGIN
    INSERT INTO names_log(what, item, token)
        SELECT 0, OLD.document_id, random() WHERE OLD.document_id IS NOT NULL;
    INSERT INTO names_log(what, item, token)
        SELECT 0, NEW.document_id, random() WHERE NEW.document_id IS NOT NULL;
END;
"""

# 8: the change log of what a reference can match (issue 10 ingest): which documents'
# names (title, uri, key, date, paths, whether a user's source holds them) and which
# relation rows changed, in commit order, written by triggers so that no write path can
# forget it. ``relations/name_index.py`` keeps the names of the library in memory and
# catches up from here instead of reading every document per stored file; ``token`` (a
# random number per entry) tells it when an entry it saw was rolled back. Integers only.
_V8_NAMES_LOG = (
    """
CREATE TABLE names_log (
    seq   INTEGER PRIMARY KEY,
    what  INTEGER NOT NULL,  -- 0: a document's names, 1: a relation row
    item  INTEGER NOT NULL,
    token INTEGER NOT NULL
);
CREATE TRIGGER names_log_doc_insert AFTER INSERT ON documents BEGIN
    INSERT INTO names_log(what, item, token) VALUES (0, NEW.id, random());
END;
CREATE TRIGGER names_log_doc_delete AFTER DELETE ON documents BEGIN
    INSERT INTO names_log(what, item, token) VALUES (0, OLD.id, random());
END;
CREATE TRIGGER names_log_doc_update AFTER UPDATE OF title, uri, doc_key, doc_date ON documents
WHEN OLD.title IS NOT NEW.title OR OLD.uri IS NOT NEW.uri OR OLD.doc_key IS NOT NEW.doc_key
    OR OLD.doc_date IS NOT NEW.doc_date BEGIN
    INSERT INTO names_log(what, item, token) VALUES (0, NEW.id, random());
END;
"""
    + _LOCATION_NAME_TRIGGERS
    + """\
CREATE TRIGGER names_log_rel_insert AFTER INSERT ON doc_relations BEGIN
    INSERT INTO names_log(what, item, token) VALUES (1, NEW.id, random());
END;
CREATE TRIGGER names_log_rel_delete AFTER DELETE ON doc_relations BEGIN
    INSERT INTO names_log(what, item, token) VALUES (1, OLD.id, random());
END;
"""
)


def _v9_redacted_location_paths(conn: apsw.Connection) -> None:
    """9: a location stores its path redacted, and a keyed hash of the raw path to be
    found by (issue 20 item 3, ``store/paths.py`` says why and how).

    The table is rebuilt: ``UNIQUE (source_id, path)`` becomes ``UNIQUE (source_id,
    path_key)``, since two files whose names differ only in a secret show the same
    redacted path. Every row keeps its id and state, so the next sync finds each file
    unchanged. Failure reasons and sources' sync errors, which may quote a path, are
    redacted too, and so are documents' uris (an upload's uri was its file name, stored
    as given): when one of those changed, the stored-redaction upgrade is made due again
    (``ingest/reredact.py``), which rewrites the upload's ``docs/`` file the same way it
    does for new rules. The step is in ``COMPACT_AFTER``: the raw paths must not survive
    in the file's free pages.
    """
    from pathlib import Path

    from kb_mcp.store.paths import PATH_KEY_FILE, PathKeys, shown_path

    keys = PathKeys(Path(conn.filename).parent / PATH_KEY_FILE)
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(
        "CREATE TABLE locations_v9 ("
        " id INTEGER PRIMARY KEY,"
        " source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,"
        " path TEXT NOT NULL,"
        " path_key TEXT NOT NULL,"
        " document_id INTEGER REFERENCES documents(id) ON DELETE SET NULL,"
        " state TEXT NOT NULL DEFAULT 'indexed',"
        " reason TEXT, size INTEGER, mtime_ns INTEGER, file_hash TEXT, seen_at TEXT,"
        " UNIQUE (source_id, path_key))"
    )
    rows = conn.execute(
        "SELECT id, source_id, path, document_id, state, reason, size, mtime_ns, file_hash, "
        "seen_at FROM locations"
    ).fetchall()
    conn.executemany(
        "INSERT INTO locations_v9(id, source_id, path, path_key, document_id, state, reason, "
        "size, mtime_ns, file_hash, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (i, source, shown_path(path), keys.key(path), doc, state,
             None if reason is None else shown_path(reason), *rest)
            for i, source, path, doc, state, reason, *rest in rows
        ),
    )  # fmt: skip
    conn.execute("DROP TABLE locations")
    conn.execute("ALTER TABLE locations_v9 RENAME TO locations")
    conn.execute(_V9_LOCATION_INDEX_AND_TRIGGERS)
    for source_id, error in conn.execute(
        "SELECT id, sync_error FROM sources WHERE sync_error IS NOT NULL"
    ).fetchall():
        clean = shown_path(error)
        conn.execute("UPDATE sources SET sync_error = ? WHERE id = ?", (clean, source_id))
    changed = 0
    for document_id, uri in conn.execute(
        "SELECT id, uri FROM documents WHERE uri IS NOT NULL"
    ).fetchall():
        if (clean := shown_path(uri)) != uri:
            conn.execute("UPDATE documents SET uri = ? WHERE id = ?", (clean, document_id))
            changed += 1
    if changed:
        conn.execute("DELETE FROM meta WHERE key = 'redact_rules_version'")
    conn.execute("PRAGMA secure_delete = OFF")


# The index and the ``names_log`` triggers of the rebuilt table, as ``_V1`` and ``_V8``
# made them for the old one (dropped with it).
_V9_LOCATION_INDEX_AND_TRIGGERS = (
    "CREATE INDEX locations_document ON locations(document_id);\n" + _LOCATION_NAME_TRIGGERS
)

# 10: what each folder source's last sync left out (issue 20 item 9): counts per skip
# reason and the first paths of each, redacted, as JSON (``ingest/skipped.py``). A
# column of the source's sync status rather than rows: skipped files are not documents,
# and only a bounded sample of their paths is kept. NULL until the next sync.
_V10_SKIPPED = "ALTER TABLE sources ADD COLUMN skipped TEXT;"

# 11: a failed file's reader environment (``readers.environment``): a sync reads the file
# again, though unchanged, when its own differs (issue 20 item 8). NULL for a file that is
# indexed, failed for a reason outside the readers (it could not be opened), or failed
# before this column: each of those failed files is read again by the next sync. Adding a
# nullable column rewrites no row.
_V11_FAILED_UNDER = "ALTER TABLE locations ADD COLUMN failed_under TEXT"


def _v12_documents_keyword_index(conn: apsw.Connection) -> None:
    """12: the keyword index over whole documents (issue 21, ``index/docs_fts.py``),
    made beside the passages' index where that exists, so a writer finds both or neither.

    Filled from the chunk rows only where the passages' index is current: one of another
    representation is rebuilt whole, this table with it, by the first reader
    (``index/fts.py``), so filling it here would be work thrown away. The fill is one pass
    over the chunks in document order, in batches: 0.5 s CPU for 3,289 passages (4.4 MB
    of text, 327 files), about 20 s for 100k passages of that size.
    """
    from kb_mcp.index import docs_fts
    from kb_mcp.index.fts import FTS_VERSION, stored_version

    has_passages = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_fts'"
    ).fetchone()
    if not has_passages or docs_fts.exists(conn):
        return
    docs_fts.create_table(conn)
    if stored_version(conn) == FTS_VERSION:
        docs_fts.fill(conn)


# 13: the linking phase's queue (issue 22 item 2, ``ingest/links.py``): one entry per
# document whose entities, relations and near-duplicates are not recorded yet, written in
# the transaction that stores the document and deleted in the one that records them. The
# id is never reused (AUTOINCREMENT), so an entry names one version of its document: a
# change to the document replaces the entry, and a result computed for the old one is not
# written. A library from before this step had all of that recorded on the one ingest
# path: the queue starts empty, every document linked.
_V13_LINK_QUEUE = """
CREATE TABLE link_queue (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL UNIQUE REFERENCES documents(id) ON DELETE CASCADE
)"""


def _v14_keyword_totals(conn: apsw.Connection) -> None:
    """14: the keyword index's collection statistics in a table of our own (issue 23,
    ``index/keyword_totals.py``): passages and tokens per column, what bm25 reads, so the
    postings segment no longer decodes FTS5's private averages record.

    Filled from the rows the index holds, through FTS5's documented per-row sizes: one
    pass, no tokenizing, so one transaction: 0.24 s CPU, 1.2 s wall for an index of 100k
    passages (SciFact's rows inserted again to 100k). An index of another representation
    is rebuilt later by the first reader, which counts its rows again from zero.
    """
    from kb_mcp.index import keyword_totals

    conn.execute(
        "CREATE TABLE kw_totals ("
        "id INTEGER PRIMARY KEY CHECK (id = 1), passages INTEGER NOT NULL, "
        "head_tokens INTEGER NOT NULL, body_tokens INTEGER NOT NULL)"
    )
    keyword_totals.backfill(conn)


# 15: the rows modules say one SQL text for both engines (issue 24, PostgreSQL's schema is
# ``store/postgres/schema.py``). ``supersessions`` gets an id, its rowid kept, so the
# references a document states are read back in the order stated without ``rowid``,
# which PostgreSQL has not; the pair stays unique. The title index is on ``lower(title)``,
# what ``near_duplicate_candidates`` now compares: ``COLLATE NOCASE`` is SQLite's, and
# its ``lower`` folds the same ASCII letters NOCASE did. Safe to run again (a test sets
# a library back to an older version): a rebuilt table's rowid is its id.
_V15_ONE_SQL_TEXT = """
CREATE TABLE supersessions_v15 (
    id          INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    supersedes  TEXT NOT NULL,
    UNIQUE (document_id, supersedes)
);
INSERT INTO supersessions_v15(id, document_id, supersedes)
    SELECT rowid, document_id, supersedes FROM supersessions;
DROP TABLE supersessions;
ALTER TABLE supersessions_v15 RENAME TO supersessions;
DROP INDEX IF EXISTS documents_title;
CREATE INDEX documents_title ON documents(lower(title));
"""


# 16: a folder source records the machine that registered it (issue 24, a library several
# machines share on PostgreSQL; ``store/host.py``): each machine syncs and drops only its
# own. NULL for every row before, which the folder's next sync fills in. Safe on an
# existing library and to run again (a test sets a library back to an older version).
def _v16_source_host(conn: apsw.Connection) -> None:
    columns = {row[1] for row in conn.execute("PRAGMA table_info(sources)")}
    if "host" not in columns:
        conn.execute("ALTER TABLE sources ADD COLUMN host TEXT")


# 17: a web source (issue 25, ``kb_mcp/ingest/fetch``) is a source of its own kind. SQLite keeps a
# table's CHECK in its schema text only (no row or index holds it), so the text is
# rewritten in place, the procedure SQLite documents for such a change ("Making Other
# Kinds Of Table Schema Changes"): the schema version is bumped so every connection reads
# it anew. A table rebuild would drop ``sources`` under its cascading foreign keys.
_SOURCE_KINDS = "kind IN ('agent', 'folder', 'upload')"
_SOURCE_KINDS_WEB = "kind IN ('agent', 'folder', 'upload', 'web')"


def _v17_web_sources(conn: apsw.Connection) -> None:
    (sql,) = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'sources'"
    ).fetchone()
    if _SOURCE_KINDS_WEB in sql:
        return
    if _SOURCE_KINDS not in sql:  # a schema this code did not write: change nothing
        raise RuntimeError("sources.kind's CHECK is not the expected one")
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute(
            "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = 'sources'",
            (sql.replace(_SOURCE_KINDS, _SOURCE_KINDS_WEB),),
        )
        conn.execute(f"PRAGMA schema_version = {version + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


Migration = str | Callable[[apsw.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (
    _V1,
    _V2,
    _v3_forget_verbatim_folder_text,
    _V4,
    _V5,
    _V6_RELATIONS,
    _V7_POSTINGS,
    _V8_NAMES_LOG,
    _v9_redacted_location_paths,
    _V10_SKIPPED,
    _V11_FAILED_UNDER,
    _v12_documents_keyword_index,
    _V13_LINK_QUEUE,
    _v14_keyword_totals,
    _V15_ONE_SQL_TEXT,
    _v16_source_host,
    _v17_web_sources,
)
# Steps that delete text which must not survive in the file: the database is compacted
# (rewritten from its live rows) after them, see ``Database.compact``.
COMPACT_AFTER = frozenset({3, 9})


@dataclass(frozen=True, slots=True)
class Migrated:
    version: int
    applied: tuple[int, ...]

    @property
    def compact(self) -> bool:
        """Whether a step that asks for compaction ran (never for a new database)."""
        return any(v in COMPACT_AFTER for v in self.applied) and 1 not in self.applied


def schema_version(conn: apsw.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: apsw.Connection) -> Migrated:
    """Apply every migration the database has not seen; the final version and the steps
    this call applied (another process may have applied some of them first)."""
    current = schema_version(conn)
    if current > len(MIGRATIONS):
        raise Unavailable(
            f"the library database is at schema version {current}, newer than this "
            f"kb-mcp understands ({len(MIGRATIONS)})",
            hint="upgrade kb-mcp, or run `kb-mcp reindex --rebuild` to rebuild from files",
        )
    applied = []
    for version in range(current + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if schema_version(conn) < version:  # another process may have won the race
                step = MIGRATIONS[version - 1]
                if callable(step):
                    step(conn)
                else:
                    conn.execute(step)
                conn.execute(f"PRAGMA user_version = {version}")
                applied.append(version)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return Migrated(len(MIGRATIONS), tuple(applied))
