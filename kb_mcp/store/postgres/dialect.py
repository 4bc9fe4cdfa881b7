"""One SQL text for both engines: the store's statements in PostgreSQL's parameter style.

The store's modules write each statement once, in the dialect SQLite (3.44+) and
PostgreSQL share: ``ON CONFLICT … DO NOTHING / DO UPDATE``, ``RETURNING``, ``COALESCE``,
explicit id columns instead of ``rowid``, and ``?`` parameters. apsw binds ``?``;
psycopg binds ``%s`` and reads every other ``%`` as the start of one, so a statement
goes to PostgreSQL with each ``?`` outside a string literal turned into ``%s`` and each
``%`` doubled. Statements are few and fixed, so each is converted once.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def to_postgres(sql: str) -> str:
    """``sql`` with psycopg's placeholders: ``?`` → ``%s`` and ``%`` → ``%%`` outside
    single-quoted literals; a literal's own text (``'100%'``, ``'?'``) is kept as is,
    except that psycopg needs its ``%`` doubled too."""
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted  # '' inside a literal toggles twice: still quoted
        if ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    if quoted:
        raise ValueError(f"unterminated string literal in SQL: {sql[:80]!r}")
    return "".join(out)
