"""The roles of a team library, as the psql script a DBA runs (``kb-mcp pg init``).

Three roles, least privilege each:

- the **owner** owns the database (when the script creates it) and every table: the first
  ``kb-mcp serve`` that connects as it runs the schema's migrations;
- the **writer** reads and writes rows (``SELECT``, ``INSERT``, ``UPDATE``, ``DELETE``, the
  identity sequences) of every table the owner creates, now and later, and creates none;
- the **reader** only reads: ``search``, ``grep``, ``read`` and ``list`` work, a write is
  refused by the server itself.

"Later" is ``ALTER DEFAULT PRIVILEGES FOR ROLE owner``: the grants a migration's new
table gets when the owner creates it, so no DBA has to come back after an upgrade.

No password is ever written into the script: each role's is set with psql's
``\\password``, which asks for it (twice, without echo) and sends only its SCRAM hash,
so the password is in no file, no shell history and no server log (``CREATE ROLE …
PASSWORD '…'`` is logged in clear text under ``log_statement = ddl``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_mcp.errors import InvalidInput

# A role or database name the script writes without quotes: lowercase, as PostgreSQL
# folds an unquoted name, at most NAMEDATALEN - 1 bytes.
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Roles:
    """The names ``kb-mcp pg init`` writes the script for."""

    owner: str = "kb_owner"
    writer: str = "kb_writer"
    reader: str = "kb_reader"
    database: str | None = None  # None: the script runs in an existing database

    def __post_init__(self) -> None:
        named = {"--owner": self.owner, "--writer": self.writer, "--reader": self.reader}
        if self.database is not None:
            named["--database"] = self.database
        for flag, name in named.items():
            if not _NAME.fullmatch(name):
                raise InvalidInput(
                    f"{flag} {name!r} is not a plain PostgreSQL name",
                    hint="use lowercase letters, digits and _ (not first a digit), "
                    "at most 63 characters",
                )
        if len({self.owner, self.writer, self.reader}) < 3:
            raise InvalidInput(
                "the owner, writer and reader roles need three different names",
                hint="a role with fewer rights than its name says is what this avoids",
            )


def init_script(roles: Roles) -> str:
    """The psql script that creates ``roles`` (and the database, when named)."""
    owner, writer, reader = roles.owner, roles.writer, roles.reader
    where = (
        f"the new database {roles.database}"
        if roles.database
        else "the library's database (run it connected to that database)"
    )
    lines = [
        "-- kb-mcp pg init: the roles of a kb-mcp team library, in " + where + ".",
        "-- Run it with psql as a superuser (pgvector's extension needs one), e.g.",
        "--   psql -v ON_ERROR_STOP=1 -f kb-init.sql 'postgresql://postgres@HOST/postgres'",
        "-- It asks for each role's password at the end (\\password: no echo, only its",
        "-- hash is sent, so no password is in this file, a history or the server's log).",
        "-- A role that logs in another way (a certificate, peer): delete its \\password.",
        "",
        f"CREATE ROLE {owner} LOGIN;",
        f"CREATE ROLE {writer} LOGIN;",
        f"CREATE ROLE {reader} LOGIN;",
    ]
    if roles.database:
        db = roles.database
        lines += [
            "",
            "-- The library's database, owned by the role that runs kb-mcp's migrations;",
            "-- only kb-mcp's roles may connect.",
            f"CREATE DATABASE {db} OWNER {owner};",
            f"REVOKE ALL ON DATABASE {db} FROM PUBLIC;",
            f"GRANT CONNECT, TEMPORARY ON DATABASE {db} TO {writer}, {reader};",
            f"\\connect {db}",
        ]
    lines += [
        "",
        "-- pgvector: the vector index of hybrid search.",
        "CREATE EXTENSION IF NOT EXISTS vector;",
        "",
        "-- The tables live in schema public; only the owner creates them.",
        f"GRANT USAGE, CREATE ON SCHEMA public TO {owner};",
        f"GRANT USAGE ON SCHEMA public TO {writer}, {reader};",
        "",
        "-- The writer reads and writes the rows of every table, those the owner creates",
        "-- later included (ALTER DEFAULT PRIVILEGES), and creates none.",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {writer};",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {writer};",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public",
        f"    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {writer};",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public",
        f"    GRANT USAGE, SELECT ON SEQUENCES TO {writer};",
        "",
        "-- The reader only reads: search, grep, read and list; a write is refused.",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader};",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public",
        f"    GRANT SELECT ON TABLES TO {reader};",
        "",
        "-- Each role's password (placeholders: psql asks for each).",
        f"\\password {owner}",
        f"\\password {writer}",
        f"\\password {reader}",
        "",
        "-- Then: the first kb-mcp command connecting as the owner creates the schema:",
        f"--   kb-mcp doctor --store 'postgresql://{owner}@HOST:5432/{roles.database or 'DBNAME'}"
        "?sslmode=verify-full'",
        f"-- and each machine as {writer} (or {reader}), its password in ~/.pgpass.",
    ]
    return "\n".join(lines) + "\n"
