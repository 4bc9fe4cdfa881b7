"""A statement written once runs on both engines: ``?`` parameters reach psycopg as ``%s``."""

from __future__ import annotations

import psycopg
import pytest

from kb_mcp.store.postgres.dialect import to_postgres


def test_parameters_become_psycopg_placeholders_outside_literals() -> None:
    sql = "SELECT id FROM t WHERE a = ? AND b LIKE '50%?' AND c = 'it''s ?' AND d = ?"
    assert to_postgres(sql) == (
        "SELECT id FROM t WHERE a = %s AND b LIKE '50%%?' AND c = 'it''s ?' AND d = %s"
    )


def test_an_unterminated_literal_is_refused() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        to_postgres("SELECT 'oops FROM t WHERE a = ?")


def test_converted_statement_binds_on_a_real_server(postgres_url: str) -> None:
    sql = "SELECT ? || '%', '?', ? + 1"
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute(to_postgres(sql), ("50", 41)).fetchone()
    assert row == ("50%", "?", 42)
