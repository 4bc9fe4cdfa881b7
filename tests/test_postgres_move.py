"""Moving a SQLite library into a PostgreSQL one (issue 24): ``kb-mcp migrate --to URL``.

A real library in a SQLite home (a folder source, agent documents stating a relation,
the entity graph, vectors from the tests' deterministic embedder) is moved by the real
CLI into a fresh database on the real test server; the same home opened on the
PostgreSQL library must then answer search (keyword and hybrid), read, grep and list as
the SQLite library does, without embedding anything. A non-empty target is refused
unchanged, a move killed half-way leaves the target empty and can run again, and the
URL's secret appears in no output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from hash_embedder import HashEmbedder
from psycopg.conninfo import conninfo_to_dict
from team_notes import DOCUMENTS, QUESTIONS

from kb_mcp.embed.base import EmbedKind
from kb_mcp.errors import InvalidInput, NotFound, Refused
from kb_mcp.library import Library
from kb_mcp.render import to_data
from kb_mcp.settings import Settings, Store
from kb_mcp.store.move import REBUILT, copied_tables, postgres_tables, sqlite_tables
from kb_mcp.store.postgres import schema
from kb_mcp.store.postgres.database import PostgresDatabase
from tests.conftest import CLI_TIMEOUT_S

FOLDER = {
    "deploy.md": "# Deploy\n\n## Restart\n\nRestart the gateway with `systemctl restart gw`.\n"
    "Then check the health endpoint answers 200.\n",
    "adr/0009-postgres.md": "# ADR 9\n\nSessions move from Redis to Postgres; the gateway "
    "keeps them across a restart.\n",
    "health.txt": "Every service answers /healthz; the gateway also checks Redis.\n",
}
# An agent document stating a relation to another (frontmatter), so doc_relations and
# the names log hold rows.
SUPERSEDING = (
    "ADR 12: sessions in Postgres",
    "---\nsupersedes: agent://adr/7\n---\n# ADR 12\n\nSessions live in Postgres now; "
    "Redis is gone from the gateway.\n",
    "agent://adr/12",
    ["adr"],
)
SECRET = "Qx9-move-s3cret"


class CountingEmbedder(HashEmbedder):
    """The tests' hash embedder, counting what it embeds by kind."""

    def __init__(self) -> None:
        super().__init__("hash-64")
        self.kinds: list[str] = []

    def embed(self, texts: list[str], kind: EmbedKind = "passage"):
        self.kinds += [kind] * len(texts)
        return super().embed(texts, kind)


def _settings(home: Path, store: Store | None = None) -> Settings:
    return dataclasses.replace(
        Settings(home=home),
        allow_agent_writes=True,
        embedder="test",
        embed_model="hash-64",
        store=store or Store(),
    )


def _open(home: Path, store: Store | None = None) -> tuple[Library, CountingEmbedder]:
    embedder = CountingEmbedder()
    return Library(_settings(home, store), make_embedder=lambda _p, _m: embedder), embedder


@pytest.fixture(scope="module")
def sqlite_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose SQLite library holds a folder source, agent documents with a relation,
    entities and every passage's vector. Copied per test (a move migrates nothing in
    it, but a test must not see another's)."""
    root = tmp_path_factory.mktemp("move")
    folder = root / "notes"
    for name, text in FOLDER.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    home = root / "home"
    library, _ = _open(home)
    with library:
        for title, content, uri, tags in (*DOCUMENTS, SUPERSEDING):
            library.writing.add_document(title, content, uri, tags)
        library.folders.add_folder(folder)
        library.folders.sync()
        report = library.vectors.embed_pending()
        assert report is not None and report.complete
        conn = library.db.conn
        for table in ("doc_relations", "entities", "mentions", "names_log", "locations"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] > 0, table
        state = library.vectors.state()
        assert state.embedded > 0 and state.pending == 0
    return home


@pytest.fixture
def home(sqlite_home: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(sqlite_home, copy)
    return copy


def _migrate(home: Path, url: str, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", "migrate", "--to", url, "--home", str(home), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def _answers(library: Library) -> dict[str, object]:
    """What the five read tools answer, as comparable values (scores apart)."""
    lookup, catalog = library.lookup, library.catalog
    found: dict[str, object] = {}
    for question in (*QUESTIONS, "sessions postgres", "restart"):
        for mode in ("keyword", "auto"):
            result = lookup.search(question, mode=mode)
            found[f"search {mode} {question}"] = (
                result.mode,
                [(h.doc, h.cite, h.legs) for h in result.hits],
                [h.score for h in result.hits],
            )
    found["grep"] = to_data(lookup.grep("gateway"))
    found["grep regex"] = to_data(lookup.grep(r"Red\w+", regex=True, source="notes"))
    found["read"] = to_data(lookup.read("agent://adr/12"))
    found["read path"] = to_data(lookup.read("adr/0009-postgres.md", start_line=2))
    overview = catalog.overview()
    # ``host`` is a shared library's alone (whose machine a folder is; null on SQLite)
    sources = [{k: v for k, v in s.items() if k != "host"} for s in to_data(overview.sources)]
    found["list"] = (sources, overview.documents, overview.chunks)
    found["list notes"] = to_data(catalog.list_source("notes"))
    found["list agent"] = to_data(catalog.list_source("agent"))
    return found


def test_a_moved_library_answers_as_the_sqlite_one_and_nothing_is_embedded(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    sqlite, _ = _open(home)
    with sqlite:
        want = _answers(sqlite)
        assert any(mode == "hybrid" for mode, _, _ in _searches(want))  # hybrid is compared
    done = _migrate(home, postgres_url, child_env)
    assert done.returncode == 0, done.stderr
    assert "nothing was re-embedded" in done.stdout
    for phase in ("copying rows", "copying vectors", "indexing vectors", "indexing passages"):
        assert f"kb-mcp: done {phase}" in done.stderr, done.stderr  # stderr is not a terminal
    moved, embedder = _open(home, Store(postgres_url))
    with moved:
        state = moved.vectors.state()
        assert state.pending == 0 and state.embedded > 0  # every vector came along
        got = _answers(moved)
    assert [k for k in embedder.kinds if k != "query"] == []  # no passage was embedded
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key.startswith("search"):
            mode, hits, scores = value
            assert got[key][:2] == (mode, hits), key
            assert got[key][2] == pytest.approx(scores, abs=1e-5), key
        else:
            assert got[key] == value, key


def _searches(answers: dict[str, object]) -> list[tuple]:
    return [v for k, v in answers.items() if k.startswith("search")]


def test_ids_are_kept_and_new_rows_get_fresh_ones(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    assert _migrate(home, postgres_url, child_env).returncode == 0
    sqlite, _ = _open(home)
    with sqlite:
        want = sqlite.db.query("SELECT id, doc_key FROM documents ORDER BY id")
        chunks = sqlite.db.query("SELECT MAX(id) FROM chunks")[0][0]
    moved, _ = _open(home, Store(postgres_url))
    with moved:
        assert moved.db.query("SELECT id, doc_key FROM documents ORDER BY id") == want
        moved.writing.add_document("After", "# New\n\nA note written later.\n", "agent://new")
        (first_new,) = moved.db.query(
            "SELECT MIN(c.id) FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.uri = ?",
            ("agent://new",),
        )[0]
        assert first_new > chunks
        assert moved.lookup.search("note written later", mode="keyword").hits


def test_a_target_that_holds_a_library_is_refused_and_left_unchanged(
    home: Path, postgres_url: str, child_env: dict[str, str], tmp_path: Path
) -> None:
    other, _ = _open(tmp_path / "other", Store(postgres_url))
    with other:
        other.writing.add_document("Theirs", "# Theirs\n\nA teammate's note.\n", "agent://theirs")
    before = _snapshot(postgres_url)
    done = _migrate(home, postgres_url, child_env)
    assert done.returncode == Refused.exit_code, done.stderr
    assert "is not empty" in done.stderr and "nothing was copied" in done.stderr
    assert _snapshot(postgres_url) == before


def test_a_library_opened_but_never_written_to_is_a_target(
    home: Path, postgres_url: str, child_env: dict[str, str], tmp_path: Path
) -> None:
    """A library that ran before the move (a reindex of nothing) wrote its settings."""
    opened, _ = _open(tmp_path / "early", Store(postgres_url))
    with opened:
        opened.writing.reindex()
        assert opened.catalog.overview().documents == 0
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM meta").fetchone()[0] > 0
    done = _migrate(home, postgres_url, child_env)
    assert done.returncode == 0, done.stderr


def test_a_home_without_a_library_is_refused_before_the_target_is_touched(
    tmp_path: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    done = _migrate(tmp_path / "empty-home", postgres_url, child_env)
    assert done.returncode == NotFound.exit_code, done.stderr
    assert "no SQLite library at" in done.stderr
    assert not (tmp_path / "empty-home" / "kb.db").exists()
    with psycopg.connect(postgres_url) as conn:
        assert postgres_tables(conn) == []  # not even the schema


def _snapshot(url: str) -> dict[str, list[tuple]]:
    """Every row of every table (the change stamp aside: a refused write may bump it)."""
    with psycopg.connect(url) as conn:
        names = [t for t in postgres_tables(conn) if t != "kb_change"]
        return {t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}").fetchall())) for t in names}


def test_a_move_killed_half_way_leaves_the_target_empty_and_runs_again(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    """kill -9 while the copy's transaction is open (it waits on a lock this test holds on
    a table it writes late), then the same command again."""
    with psycopg.connect(postgres_url) as setup:
        PostgresDatabase(postgres_url).close()  # the schema, as the move makes it
        late = copied_tables_of(home, setup)[-2]  # written after most of the others
    holder = psycopg.connect(postgres_url)
    holder.execute(f"LOCK TABLE {late} IN SHARE MODE")  # the copy's COPY into it waits
    mover = subprocess.Popen(
        [sys.executable, "-m", "kb_mcp", "migrate", "--to", postgres_url, "--home", str(home)],
        env=child_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_lock_wait(postgres_url, late)
        os.kill(mover.pid, signal.SIGKILL)
        mover.wait(timeout=CLI_TIMEOUT_S)
    finally:
        holder.rollback()
        holder.close()
    _wait_for_no_other_sessions(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        for table in ("documents", "chunks", "sources", "kw_passages", "names_log"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
    again = _migrate(home, postgres_url, child_env)
    assert again.returncode == 0, again.stderr
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] > 0


def copied_tables_of(home: Path, pg: psycopg.Connection) -> list[str]:
    import apsw

    source = apsw.Connection(str(home / "kb.db"))
    try:
        return copied_tables(source, pg)
    finally:
        source.close()


def _wait_for_lock_wait(url: str, table: str) -> None:
    """Until a session waits for a lock on ``table`` (the mover, inside its transaction)."""
    deadline = time.monotonic() + CLI_TIMEOUT_S
    with psycopg.connect(url, autocommit=True) as watch:
        while time.monotonic() < deadline:
            waiting = watch.execute(
                "SELECT COUNT(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE c.relname = %s AND NOT l.granted",
                (table,),
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.05)
    raise AssertionError(f"the move never waited on {table}")


def _wait_for_no_other_sessions(url: str) -> None:
    """Until the killed mover's server sessions have ended (its transaction rolled back)."""
    deadline = time.monotonic() + CLI_TIMEOUT_S
    with psycopg.connect(url, autocommit=True) as watch:
        while time.monotonic() < deadline:
            others = watch.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchone()[0]
            if not others:
                return
            time.sleep(0.05)
    raise AssertionError("the killed move's sessions never ended")


def test_a_secret_in_the_target_url_appears_in_no_output(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    parts = conninfo_to_dict(postgres_url)
    url = (
        f"postgresql://{parts['user']}:{SECRET}@/{parts['dbname']}"
        f"?host={quote(parts['host'], safe='')}&sslmode=disable"
    )
    runs = [
        _migrate(home, url, child_env),  # the move itself
        _migrate(home, url, child_env),  # refused: not empty any more
        _migrate(home, url, child_env, "--json"),
        _migrate(home, url.replace("sslmode", "sslmod"), child_env),  # a bad URL
        _migrate(home, url.replace(quote(parts["host"], safe=""), "%2Fno-server"), child_env),
    ]
    assert [r.returncode for r in runs][:2] == [0, Refused.exit_code]
    for done in runs:
        assert SECRET not in done.stdout + done.stderr, done.stdout + done.stderr


def test_every_table_of_either_library_is_copied_or_made_another_way(
    home: Path, postgres_url: str
) -> None:
    """A table added to either schema must be copied or declared made (``REBUILT``,
    ``schema.LEFT_OUT``): the move refuses to run otherwise, and this says which."""
    import apsw

    source = apsw.Connection(str(home / "kb.db"))
    with psycopg.connect(postgres_url) as pg:
        PostgresDatabase(postgres_url).close()
        copied = set(copied_tables(source, pg))
        in_postgres = set(postgres_tables(pg))
    in_sqlite = sqlite_tables(source)
    source.close()
    assert {"documents", "chunks", "entities", "names_log", "link_queue", "meta"} <= copied
    made = {t for t in in_postgres - copied if any(t.startswith(p[:-1]) for p in REBUILT)}
    assert in_postgres - copied == made
    left_out = {
        t
        for t in in_sqlite - copied
        if any(t.startswith(p[:-1]) if p.endswith("*") else t == p for p in schema.LEFT_OUT)
    }
    assert in_sqlite - copied == left_out


@pytest.fixture(autouse=True)
def _no_store_from_outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("KB_MCP_STORE", raising=False)
    yield


def test_vectors_are_read_a_batch_at_a_time_and_all_of_them(home: Path) -> None:
    """The move reads vectors in batches (a million would not fit in memory at once)."""
    import numpy as np

    from kb_mcp.index import vectors

    library, _ = _open(home)
    with library:
        conn = library.db.conn
        (signature,) = vectors.signatures(conn)
        ids, matrix = vectors.all_vectors(conn, signature.id)
        batches = list(vectors.iter_vectors(conn, signature.id, batch=3))
    assert len(ids) > 3 and {len(b[0]) for b in batches[:-1]} == {3}
    assert [i for b in batches for i in b[0]] == ids
    assert np.array_equal(np.concatenate([b[1] for b in batches]), matrix)


def test_text_holding_nul_from_an_older_library_moves_with_u_fffd_and_is_counted(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    """SQLite kept NUL where PostgreSQL's text cannot (add_document refuses it now, an
    older library may hold it): the move stores U+FFFD, as a reader's NUL is stored, and
    says how many rows it changed, instead of failing inside the copy."""
    with Library(_settings(home)) as sqlite, sqlite.db.write() as conn:
        (doc,) = conn.execute("SELECT id FROM documents ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE documents SET text = text || ? WHERE id = ?", ("a\x00b", doc))
        conn.execute(
            "UPDATE chunks SET text = text || ? WHERE id = "
            "(SELECT MIN(id) FROM chunks WHERE document_id = ?)",
            ("a\x00b", doc),
        )
    done = _migrate(home, postgres_url, child_env, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nul_rows"] == 2
    with psycopg.connect(postgres_url) as pg:
        (text,) = pg.execute("SELECT text FROM documents WHERE id = %s", (doc,)).fetchone()
    assert text.endswith("a\ufffdb")


def test_migrate_says_before_it_starts_when_the_vector_graph_will_not_fit_in_memory(
    tmp_path: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    """An HNSW build past ``maintenance_work_mem`` goes on on disk, many times slower: a
    move of a large library into a server at its default setting would spend hours
    there unannounced. 1,200 passages of 64 dims need about 1.3 MB; given 1 MB, the
    move says so first, with the size to ask for, and still completes."""
    home = tmp_path / "home"
    library, _ = _open(home)
    with library:
        body = "".join(f"## Part {n}\n\nPart {n} is about topic {n * 7}.\n\n" for n in range(1200))
        library.writing.add_document("Many parts", "# Many parts\n\n" + body, "agent://many")
        report = library.vectors.embed_pending()
        assert report is not None and report.complete
        assert library.vectors.state().embedded == 1200
    done = _migrate(home, postgres_url, child_env, "--build-memory", "1MB")
    assert done.returncode == 0, done.stderr
    note, *later = done.stderr.splitlines()
    assert note == (
        "kb-mcp: the vector index's graph needs about 2MB to build in memory and "
        "--build-memory gives it 1MB: the rest is built on disk, many times slower. "
        "If the server has the memory, stop and rerun with --build-memory 2MB."
    )
    assert any("vectors" in line for line in later)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone() == (1200,)


def test_a_build_memory_the_server_does_not_take_is_refused_before_anything_is_copied(
    home: Path, postgres_url: str, child_env: dict[str, str]
) -> None:
    for bad in ("lots", "12kB", "-1GB"):
        done = _migrate(home, postgres_url, child_env, f"--build-memory={bad}")
        assert done.returncode == InvalidInput.exit_code, (bad, done.stderr)
        assert f"--build-memory {bad!r} is not a memory size the server takes" in done.stderr
        with psycopg.connect(postgres_url) as conn:
            assert conn.execute("SELECT COUNT(*) FROM documents").fetchone() == (0,)
    done = _migrate(home, postgres_url, child_env, "--build-memory", "1GB")
    assert done.returncode == 0, done.stderr
    assert "needs about" not in done.stderr
