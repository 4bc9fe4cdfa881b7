"""Which engine holds a library: the one place the ``store`` setting is read to open it.

The SQLite file ``kb.db`` in the home is the default. A PostgreSQL store (issue 24) has
its engine (``store/postgres/database.py``), its schema and its keyword and vector
indexes, tested on a real server; the library's services are not yet wired to them
(the FTS5 index, the entity graph's upkeep and the redaction rewrite still speak SQLite
only). Until they are, a PostgreSQL store is refused here with that said, never quietly
replaced by the SQLite file: an agent would otherwise write a team's documents into one
machine's library.
"""

from __future__ import annotations

from pathlib import Path

from kb_mcp.errors import Unavailable
from kb_mcp.settings import Settings
from kb_mcp.store.db import Database


def open_database(settings: Settings, path: Path) -> Database:
    """The library's database: the SQLite file at ``path``, or a clear refusal for a
    PostgreSQL store (its URL shown without secrets)."""
    if settings.store.postgres_url is not None:
        raise Unavailable(
            f"the store {settings.store} is a PostgreSQL library, which this version of "
            "kb-mcp cannot open for its commands yet",
            hint="`kb-mcp pg init` prints the roles' SQL already; to use the SQLite library "
            "in the home, remove the store setting (config.toml, KB_MCP_STORE or --store)",
        )
    return Database(path)
