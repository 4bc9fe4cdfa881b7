"""``kb-mcp migrate --to postgresql://…``: a home's SQLite library moved to a PostgreSQL one.

Why one command and not ``export`` then ``import``: the move's only use is SQLite to a
server the machine can reach, and an export file would be a second copy of every
document's text (secrets a redaction missed included) lying on disk between two steps,
with its own format to version. One command copies straight from ``kb.db`` to the
server, in one transaction (``store/move.py``): it either lands whole or leaves the
target empty, to run again. The SQLite library is left as it was; the home switches
only when the user sets its ``store``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HELP = (
    "copy this home's SQLite library (documents, passages, relations, entities, vectors) "
    "into an empty PostgreSQL library, in one transaction; nothing is re-embedded"
)


@contextmanager
def _phase(verb: str, noun: str) -> Iterator[Callable[[int, int], None]]:
    from kb_mcp.cli.progress import Phase, PhaseProgress

    with PhaseProgress(Phase(verb, noun)) as progress:
        yield progress


def cmd_migrate(args: argparse.Namespace) -> int:
    from kb_mcp.settings import load
    from kb_mcp.store.move import build_memory_note, check_source, check_target, move_library
    from kb_mcp.store.postgres.database import PostgresDatabase

    settings = load(home=args.home)
    source = settings.home / "kb.db"
    check_source(source)  # before the target's schema is made
    url = check_target(args.to)
    target = PostgresDatabase(url)  # creates or migrates the library's schema
    try:
        note = build_memory_note(source, target, args.build_memory)
        if note:
            print(f"kb-mcp: {note}", file=sys.stderr, flush=True)
        report = move_library(source, target, _phase, args.build_memory)
    finally:
        target.close()
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
        return 0
    print(
        f"moved {report.documents:,} documents, {report.chunks:,} passages and "
        f"{report.vectors:,} vectors ({report.rows:,} rows in {report.tables} tables) to "
        f"{report.target} in {report.seconds:.1f} s; nothing was re-embedded.\n"
        + (
            f"{report.nul_rows:,} rows held NUL characters (U+0000), which PostgreSQL's "
            "text cannot hold: they are stored as U+FFFD.\n"
            if report.nul_rows
            else ""
        )
        + f"The SQLite library in {settings.home} is unchanged. To use the new one, set "
        f'store = "{report.target}" in {settings.home / "config.toml"} (or KB_MCP_STORE, '
        "or --store), with the password in a pgpass file or PGPASSWORD."
    )
    return 0


def add_move_parser(sub: argparse._SubParsersAction, common: Callable[..., None]) -> None:
    p = sub.add_parser("migrate", help=HELP, description=HELP + ".")
    common(p, store=False)
    p.add_argument(
        "--to",
        required=True,
        metavar="URL",
        help="the PostgreSQL library: postgresql://USER@HOST:5432/DATABASE (an empty "
        "database; the password best in a pgpass file or PGPASSWORD)",
    )
    p.add_argument(
        "--build-memory",
        metavar="SIZE",
        help="memory for building the vector index (maintenance_work_mem for the build, "
        "e.g. 4GB; default: the server's setting). A graph that does not fit is built on "
        "disk, many times slower; migrate says so before it starts",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_migrate)
