"""Which engine holds a library: the one place the ``store`` setting is read to open it.

The SQLite file ``kb.db`` in the home is the default. A PostgreSQL store (issue 24) opens
on ``store/postgres/database.PostgresDatabase``: its rows, keyword index and vector
tables live on the server, shared by every process that names the same URL. Both
database classes say their engine (``engine``: "sqlite" or "postgresql"); the keyword
and vector indexes are chosen by it in one place each (``index/keyword_store.py``,
``index/vector_store.py``), and what differs beyond them is decided where it is used,
each place saying why (grep ``.engine`` and ``on_postgres``): reindex rebuilds a shared
library from the database's copy of each text (``library/writing.py``), the linking
phase runs in-process (``ingest/links.py``), ``secure_delete`` is SQLite's
(``ingest/reredact.py``), and locks are the database's (``store/locks.py``). A
PostgreSQL store is never replaced by the SQLite file: an agent would otherwise write a
team's documents into one machine's library.

The home stays each process's own: its agent documents' file copies, its logs, and the
key of its location paths (``store/paths.py``). That key is per home on PostgreSQL too,
which is right for folder sources (a source belongs to the machine that registered it)
and not yet for agent documents, whose locations another home could then not name
(what is left: the key in a table the library's roles read, or agent locations keyed by
their uri alone).
"""

from __future__ import annotations

from pathlib import Path

from kb_mcp.settings import Settings
from kb_mcp.store.db import Database
from kb_mcp.store.paths import PATH_KEY_FILE, PathKeys


def open_database(settings: Settings, path: Path) -> Database:
    """The library's database: the SQLite file at ``path``, or the PostgreSQL store the
    settings name (its location paths keyed by the file beside ``path``)."""
    url = settings.store.postgres_url
    if url is None:
        return Database(path)
    from kb_mcp.store.postgres.database import PostgresDatabase  # psycopg: the extra's

    database = PostgresDatabase(url)
    database.paths = PathKeys(path.parent / PATH_KEY_FILE)
    return database  # type: ignore[return-value]  # the same surface (plan: Contracts)
