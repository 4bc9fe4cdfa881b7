"""``kb-mcp pg init``: the SQL a DBA runs to prepare PostgreSQL for a team library.

It only prints (``store/postgres/roles.py`` writes the script): kb-mcp never holds a
superuser's credentials, and a DBA reads what they run. The library's own schema is not
in it: the first ``kb-mcp serve`` that connects as the owner role creates and migrates it.
"""

from __future__ import annotations

import argparse


def cmd_pg_init(args: argparse.Namespace) -> int:
    """Print the psql script a DBA runs to create a team library's roles (an owner that
    runs migrations, a writer, a read-only reader), pgvector and, with --database, the
    database itself; passwords are asked for by psql, never written."""
    from kb_mcp.store.postgres.roles import Roles, init_script

    roles = Roles(owner=args.owner, writer=args.writer, reader=args.reader, database=args.database)
    print(init_script(roles), end="")
    return 0


def add_pg_parser(sub: argparse._SubParsersAction) -> None:
    pg = sub.add_parser(
        "pg",
        help="prepare a PostgreSQL server for a team library",
        description="Prepare a PostgreSQL server for a team library.",
    )
    pg_sub = pg.add_subparsers(dest="pg_command", required=True, metavar="PG")
    p = pg_sub.add_parser("init", help=cmd_pg_init.__doc__, description=cmd_pg_init.__doc__)
    p.add_argument("--database", metavar="NAME", help="also create this database (default: none)")
    p.add_argument(
        "--owner",
        metavar="ROLE",
        default="kb_owner",
        help="owns the tables, runs migrations (default: kb_owner)",
    )
    p.add_argument(
        "--writer",
        metavar="ROLE",
        default="kb_writer",
        help="reads and writes rows (default: kb_writer)",
    )
    p.add_argument(
        "--reader", metavar="ROLE", default="kb_reader", help="only reads (default: kb_reader)"
    )
    p.set_defaults(func=cmd_pg_init)
