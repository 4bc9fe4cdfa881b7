"""The vector index of a library's engine: the one place its functions are chosen.

A library on SQLite keeps its vectors in BLOB tables searched by numpy
(``index/vectors.py``); one on PostgreSQL in pgvector tables with an HNSW index
(``index/postgres/vectors.py``), function for function the same surface. The embedding
queue, ``embed/active.py``, ingestion and the catalog call these names with whatever
connection they hold, so no caller asks which engine it runs on (as
``index/keyword_store`` does for the keyword index).

The PostgreSQL functions speak psycopg themselves (binary vectors, arrays, ``SET
LOCAL``): each call runs on the raw connection of a ``PgConnection.pinned`` block,
inside the caller's write when there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kb_mcp.index import vectors
from kb_mcp.index.keyword_store import on_postgres

if TYPE_CHECKING:
    from kb_mcp.store.db import Database


def _by_engine(name: str) -> Callable[..., Any]:
    """``name`` of the connection's engine's vector module, called with that connection
    (on PostgreSQL, its pinned psycopg connection)."""
    on_sqlite = getattr(vectors, name)

    def call(conn: Any, *args: Any, **kwargs: Any) -> Any:
        if not on_postgres(conn):
            return on_sqlite(conn, *args, **kwargs)
        from kb_mcp.index.postgres import vectors as pg_vectors

        with conn.pinned() as pg:
            return getattr(pg_vectors, name)(pg, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = on_sqlite.__doc__
    return call


# The surface the library uses; each takes the connection first.
generation = _by_engine("generation")
signatures = _by_engine("signatures")
signature_row = _by_engine("signature_row")
find_signature = _by_engine("find_signature")
ensure_signature = _by_engine("ensure_signature")
drop_signature = _by_engine("drop_signature")
record_failure = _by_engine("record_failure")
record_success = _by_engine("record_success")
failed_documents = _by_engine("failed_documents")
embedded_among = _by_engine("embedded_among")
pending_chunks = _by_engine("pending_chunks")
totals = _by_engine("totals")
coverage = _by_engine("coverage")
store_vectors = _by_engine("store_vectors")
remove_chunks = _by_engine("remove_chunks")
reuse_kept = _by_engine("reuse_kept")
forget_kept = _by_engine("forget_kept")
has_kept = _by_engine("has_kept")
forget_all = _by_engine("forget_all")


def index(db: Database) -> Any:
    """The nearest-neighbour index a library's searches ask: ``VectorIndex`` over codes
    in memory on SQLite; on PostgreSQL pgvector's HNSW in the server, each of its calls
    on the pinned psycopg connection of the connection it is handed (``_Pinned``)."""
    if not on_postgres(db):
        return vectors.VectorIndex()
    from kb_mcp.index.postgres.vectors import VectorIndex

    return _Pinned(VectorIndex())


class _Pinned:
    """The PostgreSQL ``VectorIndex`` called with a ``PgConnection`` (as search holds
    one): it runs on that connection's pinned psycopg connection."""

    def __init__(self, index: Any) -> None:
        self._index = index

    def search(self, conn: Any, *args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        with conn.pinned() as pg:
            return self._index.search(pg, *args, **kwargs)

    def warm(self, conn: Any, sig_id: int) -> None:
        """Nothing to load: the server holds the index."""

    def loaded_through(self, sig_id: int) -> int | None:
        return self._index.loaded_through(sig_id)

    def discard(self, sig_id: int) -> None:
        self._index.discard(sig_id)
