"""The PostgreSQL library's schema changes: named steps, each applied once, in order.

A migration is ``(name, sql)``: a script of statements without parameters. ``migrate``
applies those of a list the library has not recorded yet, in the list's order, and
records each in ``kb_schema`` (its name, and its number in the order applied: the
version). All of it runs in one transaction under a transaction-level advisory lock, so
several servers opening a new library at once migrate it exactly once: the first takes
the lock and migrates, the others wait, then find every step recorded. PostgreSQL's DDL
is transactional, so a failed step leaves the library as it was.

Why names and not only a number: the list is the concatenation of the store's, the
keyword index's and the vector index's own lists, which grow independently; a step
appended to the first list would shift the numbers of the others and, counted by
number, a library would skip it. Recorded by name, each step runs once wherever it sits.
A library holding a step this list does not have was migrated by a newer kb-mcp.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from kb_mcp.errors import Unavailable

Migration = tuple[str, str]
# pg_advisory_xact_lock's key for migrating: an advisory lock, as no table exists yet
# on a new library; advisory locks belong to one database, so to one library.
MIGRATE_LOCK = 0x6B62_6D69  # "kbmi"


def migrate(conn: psycopg.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply the steps of ``migrations`` the library has not recorded; their names.

    ``conn`` is a plain psycopg connection, in autocommit or not: the work is one
    transaction of its own (committed on return), or a savepoint of the caller's open
    one. It waits for another migrating process however long that takes (no
    ``lock_timeout``): a server must not start on a half-made schema.
    """
    names = [name for name, _sql in migrations]
    if len(set(names)) != len(names):
        raise ValueError(
            f"migration names repeat: {sorted(n for n in names if names.count(n) > 1)}"
        )
    with conn.transaction():
        conn.execute("SELECT set_config('lock_timeout', '0', true)")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        if conn.execute("SELECT to_regclass('kb_schema')").fetchone() == (None,):
            conn.execute(
                "CREATE TABLE kb_schema (version integer PRIMARY KEY, name text NOT NULL "
                "UNIQUE, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        recorded = [name for (name,) in conn.execute("SELECT name FROM kb_schema")]
        unknown = set(recorded) - set(names)
        if unknown:
            raise Unavailable(
                f"the library's schema has {len(unknown)} step(s) this kb-mcp does not know "
                f"({', '.join(sorted(unknown))}): a newer kb-mcp migrated it",
                hint="upgrade kb-mcp on this machine",
            )
        applied = []
        for name, sql in migrations:
            if name in recorded:
                continue
            conn.execute(sql)
            conn.execute(
                "INSERT INTO kb_schema(version, name) VALUES (%s, %s)",
                (len(recorded) + len(applied) + 1, name),
            )
            applied.append(name)
        return applied


def schema_version(conn: psycopg.Connection) -> int:
    """How many steps the library has recorded (0 before its first migration)."""
    if conn.execute("SELECT to_regclass('kb_schema')").fetchone() == (None,):
        return 0
    row = conn.execute("SELECT count(*) FROM kb_schema").fetchone()
    return int(row[0]) if row else 0
