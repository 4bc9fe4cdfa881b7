"""The tests' PostgreSQL server is real and has what the PostgreSQL store needs."""

from __future__ import annotations

import psycopg


def test_each_test_gets_an_empty_database_with_pgvector(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()[0]
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()[0]
        distance = conn.execute("SELECT '[1,0]'::vector <=> '[0,1]'::vector").fetchone()[0]
    assert int(version) >= 180000
    assert tables == 0
    assert distance == 1.0


def test_databases_of_two_tests_are_apart(postgres_server, postgres_url: str) -> None:
    from postgres_server import drop_database, fresh_database

    other = fresh_database(postgres_server)
    try:
        with psycopg.connect(postgres_url, autocommit=True) as a:
            a.execute("CREATE TABLE only_here (x int)")
        with psycopg.connect(other, autocommit=True) as b:
            seen = b.execute("SELECT to_regclass('only_here')").fetchone()[0]
        assert seen is None
    finally:
        drop_database(postgres_server, other)
