"""Stored text follows today's redaction rules (issue 7 follow-up to items 1 and 5).

Failure modes guarded: a library written under older rules keeps a secret a newer rule
catches, in its rows, chunks, FTS terms, database file and ``docs/`` files, and grep
still matches it; the upgrade moves lines (cites break), runs again at every open, loses
its place when killed, runs before the MCP handshake, or trips over a second process.

An "old" library is written the way an older kb-mcp wrote it: through the real ingestion
path (``store_document``) and the real agent-file code, minus today's redaction, with an
old rules version in ``meta``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import apsw
import pytest

import kb_mcp.redact as redact_pkg
from kb_mcp.chunk import split_document
from kb_mcp.fsutil import atomic_write
from kb_mcp.ingest import agent, reredact
from kb_mcp.ingest.pipeline import store_document, text_hash
from kb_mcp.library import DB_FILE, Library
from kb_mcp.redact.version import RULE_MODULES, RULES_FINGERPRINT, RULES_VERSION
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store import meta
from kb_mcp.store.db import Database

VAULT = "hvs.CAESIJq3x9ZtT2kLmN4pQ8rV6wY1zB5cD7eF"
PROSE_PASSWORD = "Tr0ub4dor&3xyz"
SECRETS = (VAULT, PROSE_PASSWORD)
# Line 4 (1-based) holds the vault token, line 6 the password in prose.
BODY = (
    "# Deploy runbook\n\nLog in to vault first.\n"
    f"export VAULT_TOKEN={VAULT}\n\nFor the console the password is {PROSE_PASSWORD} today.\n"
    "Then run the deploy script.\n"
)
SECRET_LINES = {VAULT: 4, PROSE_PASSWORD: 6}
NOW = "2024-05-01T10:00:00+00:00"


def _raw_agent_document(lib: Library, n: int) -> str:
    """An agent document stored and filed raw, as before today's rules; its doc key."""
    uri = f"https://wiki.example/runbook-{n}"
    doc = agent.AgentDocument(
        doc_key=agent.doc_key_for_uri(uri),
        title=f"Runbook {n}",
        uri=uri,
        tags=("ops",),
        content=BODY,
        created_at=NOW,
        updated_at=NOW,
    )
    atomic_write(agent.agent_file(lib.home, doc.doc_key), agent.render_agent_file(doc).encode())
    record = rows.NewDocument(
        doc.doc_key, doc.title, uri, "markdown", None, BODY, text_hash(BODY), None,
        doc.tags, NOW, NOW,
    )  # fmt: skip
    with lib.db.write() as conn:
        source_id = rows.ensure_source(conn, agent.AGENT_SOURCE, "agent", NOW)
    path = lib.db.paths.of(f"{doc.doc_key}.md")
    store_document(lib.db, source_id, path, record, split_document(BODY, "markdown"),
                   seen_at=NOW)  # fmt: skip
    return doc.doc_key


def _raw_folder_file(lib: Library, folder: Path) -> str:
    """A folder file stored raw with its stat and hash recorded (a sync skips it)."""
    path = folder / "runbook.md"
    path.write_text(BODY, encoding="utf-8")
    lib.folders.add_folder(folder)
    digest = text_hash(BODY)
    record = rows.NewDocument(
        "f-" + digest[:16], "Deploy runbook", None, "markdown", None, BODY, digest, "2024-05-01",
        (), NOW, NOW,
    )  # fmt: skip
    with lib.db.write() as conn:
        source_id = rows.ensure_source(conn, folder.name, "folder", NOW, str(folder.resolve()))
    stat, digest = path.stat(), hashlib.sha256(path.read_bytes()).hexdigest()
    at = lib.db.paths.of("runbook.md")
    store_document(lib.db, source_id, at, record, split_document(BODY, "markdown"),
                   size=stat.st_size, mtime_ns=stat.st_mtime_ns, file_hash=digest,
                   seen_at=NOW)  # fmt: skip
    return record.doc_key


def _old_library(home: Path, folder: Path | None = None, agent_docs: int = 1) -> list[str]:
    """Write a library as an older kb-mcp did; the doc keys, agent documents first."""
    with Library(Settings(home=home)) as lib:
        lib.fts.ensure_current()  # the index table, as any older library has it
        keys = [_raw_agent_document(lib, n) for n in range(agent_docs)]
        if folder is not None:
            keys.append(_raw_folder_file(lib, folder))
        with lib.db.write() as conn:
            meta.put(conn, reredact.VERSION_KEY, str(RULES_VERSION - 1))
    assert _leaks(home), "the old library must hold the secrets raw"
    return keys


def _leaks(home: Path) -> list[str]:
    """Where a secret can still be found: table values, FTS terms and segments, db files."""
    found = []
    conn = apsw.Connection(str(home / DB_FILE))
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        terms = {r[0] for r in conn.execute("SELECT term FROM chunks_fts_vocab")}
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    blob = value.encode() if isinstance(value, str) else value
                    if isinstance(blob, bytes):
                        found += [f"{table}: {s}" for s in SECRETS if s.lower().encode() in
                                  blob.lower()]  # fmt: skip
        with Library(Settings(home=home.parent / "probe")) as probe:
            for secret in SECRETS:
                found += [f"vocab: {t}" for t in probe.fts.tokens(secret) if len(t) >= 6 and
                          t in terms]  # fmt: skip
    finally:
        conn.close()
    for name in (DB_FILE, DB_FILE + "-wal"):
        path = home / name
        if path.exists():
            data = path.read_bytes().lower()
            found += [f"{name} bytes: {s}" for s in SECRETS if s.lower().encode() in data]
    for path in (home / agent.DOCS_DIR).glob("*.md"):
        text = path.read_text(encoding="utf-8")
        found += [f"docs/{path.name}: {s}" for s in SECRETS if s in text]
    return found


def _spans(lib: Library, name: str) -> list[tuple[int, int]]:
    """Line spans of the chunks of the document ``name`` (a doc key or a folder path)."""
    doc = rows.get_document(lib.db.conn, name) or rows.find_documents_by_path(lib.db.conn, name)[0]
    ids = rows.chunk_ids(lib.db.conn, doc.id)
    return [(p.start_line, p.end_line) for p in rows.passages(lib.db.conn, ids).values()]


def test_reredact_old_library_takes_the_secret_out_of_every_table_term_and_file(
    tmp_path: Path,
) -> None:
    """issue 7 follow-up: text stored under old rules is redacted at first use, in place."""
    home, folder = tmp_path / "home", tmp_path / "notes"
    folder.mkdir()
    agent_key, folder_key = _old_library(home, folder)
    before = agent.parse_agent_file(agent.agent_file(home, agent_key))
    names = (agent_key, "runbook.md")
    with Library(Settings(home=home)) as lib:
        spans = {name: _spans(lib, name) for name in names}
        assert lib.lookup.grep(VAULT).matches == ()  # the grep oracle is closed from the first call
        notes = rows.get_source(lib.db.conn, "notes").id
        folder_state = {s.path: s for s in rows.source_locations(lib.db.conn, notes).values()}
        assert (folder_state["runbook.md"].mtime_ns, folder_state["runbook.md"].file_hash) == (
            None,
            None,
        )  # the next sync (or read) re-reads the raw file under today's rules
        for name in names:
            assert _spans(lib, name) == spans[name]  # same lines: cites stay exact
            row = (
                rows.get_document(lib.db.conn, name)
                or rows.find_documents_by_path(lib.db.conn, name)[0]
            )
            assert row.text.count("\n") == BODY.count("\n")
            assert row.content_hash == text_hash(row.text)
            for secret, line in SECRET_LINES.items():
                text = lib.lookup.read(name, line, line).text
                assert "[REDACTED:" in text and secret not in text
        new_key = rows.find_documents_by_path(lib.db.conn, "runbook.md")[0].doc_key
        assert new_key != folder_key  # a folder file's key follows its (redacted) text
        report = lib.folders.sync()[0]
        assert (report.failed, report.removed, report.updated) == (0, 0, 0)
        assert rows.find_documents_by_path(lib.db.conn, "runbook.md")[0].doc_key == new_key
    assert _leaks(home) == []
    after = agent.parse_agent_file(agent.agent_file(home, agent_key))
    assert (after.doc_key, after.created_at, after.updated_at, after.tags) == (
        before.doc_key,
        before.created_at,
        before.updated_at,
        before.tags,
    )
    assert after.content.count("\n") == BODY.count("\n")
    assert "[REDACTED:vault_token]" in after.content.splitlines()[SECRET_LINES[VAULT] - 1]


def test_reredact_second_open_writes_nothing(tmp_path: Path) -> None:
    """issue 7 follow-up: the upgrade runs once; the next open finds nothing due."""
    home = tmp_path / "home"
    (key,) = _old_library(home)
    with Library(Settings(home=home)) as lib:
        assert lib.redaction.ensure_current().changed == 1
        lib.graph.ensure_current()  # derived at first use too (issue 9), then current
        lib.dates.ensure_current()  # issue 21: documents dated under today's rules
        lib.relations.ensure_current()  # issue 9: the other lazy step of a first open
    doc_file = agent.agent_file(home, key)
    state = (hashlib.sha256((home / DB_FILE).read_bytes()).hexdigest(), doc_file.stat().st_mtime_ns)
    with Library(Settings(home=home)) as lib:
        assert lib.redaction.ensure_current() is None
        lib.lookup.search("deploy runbook")
        lib.lookup.grep("vault")
    assert state == (
        hashlib.sha256((home / DB_FILE).read_bytes()).hexdigest(),
        doc_file.stat().st_mtime_ns,
    )


def test_reredact_killed_halfway_is_finished_by_the_next_open(tmp_path: Path) -> None:
    """issue 7 follow-up: kill -9 after a committed batch; the next open resumes there."""
    home = tmp_path / "home"
    keys = _old_library(home, agent_docs=5)
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from kb_mcp.ingest import reredact
        from kb_mcp.store.db import Database
        home = Path({str(home)!r})
        db = Database(home / "kb.db")
        reredact._run_batch(db, home, reredact.RunReport(), batch_documents=2)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == -9, done.stderr
    db = Database(home / DB_FILE)
    try:
        assert reredact.is_due(db.conn)  # the version is written only when all is done
        cursor = int(meta.get(db.conn, reredact.CURSOR_KEY))
        texts = {key: rows.get_document(db.conn, key) for key in keys}
        assert [VAULT in texts[k].text for k in keys] == [False, False, True, True, True]
        assert cursor == texts[keys[1]].id
    finally:
        db.close()
    with Library(Settings(home=home)) as lib:
        report = lib.redaction.ensure_current()
        assert (report.documents, report.changed) == (3, 3)  # only what was left
        assert meta.get(lib.db.conn, reredact.CURSOR_KEY) is None
        assert not reredact.is_due(lib.db.conn)
    assert _leaks(home) == []


def test_reredact_two_processes_at_once_share_the_work(tmp_path: Path) -> None:
    """issue 7 follow-up: two openers of one home take turns by batch; none is done twice."""
    home = tmp_path / "home"
    _old_library(home, agent_docs=6)
    libraries = [Library(Settings(home=home)) for _ in range(2)]
    reports: list[reredact.RunReport] = []
    errors: list[BaseException] = []

    def run(lib: Library) -> None:
        try:
            reports.append(reredact.upgrade(lib.db, lib.home, batch_documents=1))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lib,)) for lib in libraries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for lib in libraries:
        lib.close()
    assert errors == []
    assert sum(r.changed for r in reports) == 6
    assert _leaks(home) == []


def test_library_open_leaves_the_upgrade_to_first_use(tmp_path: Path) -> None:
    """issue 7 follow-up: opening (what the MCP handshake may wait for) never runs it."""
    home = tmp_path / "home"
    _old_library(home)
    with Library(Settings(home=home)) as lib:
        assert lib.catalog.overview().health["stored_redaction"] == "pending upgrade"
        assert reredact.is_due(lib.db.conn)
        lib.lookup.search("deploy")
        assert lib.catalog.overview().health["stored_redaction"] == "current"


def test_reredact_leaves_text_of_a_newer_rules_version_alone(tmp_path: Path) -> None:
    """issue 7 follow-up: an older kb-mcp cannot redact more than a newer one did."""
    home = tmp_path / "home"
    _old_library(home)
    with Library(Settings(home=home)) as lib:
        with lib.db.write() as conn:
            meta.put(conn, reredact.VERSION_KEY, str(RULES_VERSION + 1))
        assert lib.redaction.ensure_current() is None


def _canonical(node: object) -> str:
    """An AST as text without docstrings, positions or empty fields (stable across Pythons)."""
    if isinstance(node, list):
        return "[" + ",".join(_canonical(v) for v in node) + "]"
    if not isinstance(node, ast.AST):
        return repr(node)
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
        first = body[0].value
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            body = body[1:]
    fields = []
    for name in node._fields:
        value = body if name == "body" and isinstance(body, list) else getattr(node, name, None)
        if value is not None and value != []:
            fields.append(f"{name}={_canonical(value)}")
    return f"{type(node).__name__}({','.join(fields)})"


def test_redact_rules_fingerprint_says_whether_rules_version_was_considered() -> None:
    """issue 7 follow-up: a rules change without a version decision fails here."""
    folder = Path(redact_pkg.__file__).parent
    digest = hashlib.sha256()
    for name in RULE_MODULES:
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        digest.update(_canonical(tree).encode("utf-8"))
    assert digest.hexdigest()[:16] == RULES_FINGERPRINT, (
        "the credential rules' code changed: if it can now redact more, add 1 to "
        "RULES_VERSION in kb_mcp/redact/version.py; either way set RULES_FINGERPRINT to "
        f"{digest.hexdigest()[:16]!r}"
    )


@pytest.mark.parametrize("missing", [True, False])
def test_reredact_fresh_library_is_stamped_without_work(tmp_path: Path, missing: bool) -> None:
    """issue 7 follow-up: a new library records today's version at first use."""
    home = tmp_path / "home"
    with Library(Settings(home=home)) as lib:
        if not missing:
            with lib.db.write() as conn:
                meta.put(conn, reredact.VERSION_KEY, "not a number")
        report = lib.redaction.ensure_current()
        assert (report.documents, report.changed) == (0, 0)
        assert meta.get(lib.db.conn, reredact.VERSION_KEY) == str(RULES_VERSION)
    assert os.path.exists(home / DB_FILE)
