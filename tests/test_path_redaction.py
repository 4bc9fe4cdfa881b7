"""A secret in a file's name or folder name (issue 20 item 3).

A file named ``password=<value>.txt`` kept the value in ``locations.path``, so in
``kb.db`` and in every listing, and ``read '<that name>'`` answered only when the guessed
value was right: the path confirmed a guessed secret. Each value below is in a path
only, never in a file's text; after a CLI sync and a second one, it must be nowhere: not
in any table or the raw bytes of kb.db and its WAL, not in list / search / read / grep
output (CLI and MCP), the web view or the audit log. ``read`` by the path with the right
value and with a wrong one answers the same; the files stay readable and re-syncable
(``store/paths.py`` says how), and a library from before keeps none of its raw paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from library_checks import text_cells
from starlette.testclient import TestClient
from test_secrets_corpus import database_bytes, database_text

from kb_mcp.ingest import agent, reredact
from kb_mcp.library import DB_FILE, Library
from kb_mcp.redact.version import RULES_VERSION
from kb_mcp.server.audit import AUDIT_FILE
from kb_mcp.settings import Settings
from kb_mcp.store import meta, migrations
from kb_mcp.web.app import build_app
from kb_mcp.web.guard import Policy

# Each file: its path (with the value in it), its text (naming a word to search for).
PASSWORD = "Zq8vLm3nRt7wXy2Kp4"
SECRET_KEY = "Hk2sPq9xWm4tLz7Rb3"
IN_FOLDER = "Nc5vBw8qTz1kXs6Mf2"
PATHS = {
    PASSWORD: f"password={PASSWORD}.txt",
    SECRET_KEY: f"notes/secret_key={SECRET_KEY}.md",
    IN_FOLDER: f"api_key={IN_FOLDER}/runbook.md",
}
# A provider token right after a hyphen (issue 20 item 2: only a letter or digit before a
# provider's prefix keeps it from being a token).
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
GITHUB = "ghp_R8kq2LmX7vNz4TpW9sYb3HcJ6fDg1AeQ5uVo"
AFTER_HYPHEN = {STRIPE: f"notes/stripe-{STRIPE}.md", GITHUB: f"token-{GITHUB}.txt"}


def write_folder(folder: Path, paths: dict[str, str]) -> None:
    for n, path in enumerate(paths.values()):
        file = folder / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"# Rotation note {n}\n\nThe blueberry rotation runbook, part {n}.\n")


def mcp_text(result: Any) -> str:
    blocks = "\n".join(getattr(block, "text", "") for block in result.content)
    return blocks + "\n" + json.dumps(result.structured_content)


async def mcp_outputs(client: Any, names: list[str]) -> list[str]:
    outputs = [mcp_text(await client.call_tool("list", {"limit": 100}))]
    for arguments in (
        {"query": "blueberry rotation runbook"},
        {"query": "password"},
        {"query": "runbook", "mode": "keyword"},
    ):
        outputs.append(mcp_text(await client.call_tool("search", arguments)))
    for arguments in ({"pattern": "blueberry"}, {"pattern": "Rotation", "regex": True}):
        outputs.append(mcp_text(await client.call_tool("grep", arguments)))
    for name in names:
        result = await client.call_tool("read", {"doc": name}, raise_on_error=False)
        outputs.append(mcp_text(result).replace(name, "<argument>"))
    return outputs


def cli_outputs(kb_cli: Any, names: list[str]) -> tuple[list[str], dict[str, Any]]:
    """What the CLI prints for the listing, search and grep commands and for a ``read`` of
    each name; and each name's ``read --json`` process, for comparing answers."""
    outputs = []
    commands = [
        ("list",),
        ("list", "--json"),
        ("search", "blueberry rotation runbook"),
        ("search", "--json", "password"),
        ("grep", "blueberry"),
        ("grep", "--json", "--regex", "Rotation"),
    ]
    for command in commands:
        done = kb_cli(*command)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    reads = {name: kb_cli("read", "--json", name) for name in names}
    for name, done in reads.items():
        outputs.append((done.stdout + done.stderr).replace(name, "<argument>"))
    return outputs, reads


def web_outputs(home: Path) -> Iterator[str]:
    with Library(Settings(home=home, embedder="none")) as library:
        keys = [r[0] for r in library.db.query("SELECT doc_key FROM documents")]
        app = build_app(library, Policy("127.0.0.1", None))
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            yield client.get("/").text
            yield client.get("/search", params={"q": "blueberry rotation runbook"}).text
            for key in keys:
                yield client.get(f"/doc/{key}").text


def wrong_guess(path: str, value: str) -> str:
    """``path`` with another value of the same shape: a provider's prefix kept (``sk_live_``,
    ``ghp_``), the rest of the value reversed."""
    prefix = value[: value.index("_", 3) + 1] if value.startswith(("sk_", "ghp_")) else ""
    return path.replace(value, prefix + value[len(prefix) :][::-1])


def leaks_of(paths: dict[str, str], places: dict[str, str], vocab: set[str]) -> dict[str, list]:
    leaks = {}
    for value in paths:
        where = [place for place, text in places.items() if value in text or value[:12] in text]
        if any(value.lower()[:12] in term for term in vocab):
            where.append("FTS terms")
        if where:
            leaks[value] = where
    return leaks


async def check_paths_leave_no_trace(
    paths: dict[str, str], tmp_path: Path, home: Path, kb_cli: Any, mcp_client: Any
) -> None:
    folder = tmp_path / "vault"
    write_folder(folder, paths)
    added = kb_cli("add", str(folder), "--yes", "--embedder", "none")
    assert added.returncode == 0, added.stderr
    again = kb_cli("sync")  # the second walk finds every file by its key
    assert again.returncode == 0, again.stderr
    names = [*paths.values(), *(wrong_guess(p, v) for v, p in paths.items())]
    async with mcp_client() as client:
        mcp = await mcp_outputs(client, names)
        right = [
            await client.call_tool("read", {"doc": p}, raise_on_error=False) for p in paths.values()
        ]
        wrong = [
            await client.call_tool("read", {"doc": wrong_guess(p, v)}, raise_on_error=False)
            for v, p in paths.items()
        ]
    cli, cli_reads = cli_outputs(kb_cli, names)
    places = {
        "sync output": added.stdout + added.stderr + again.stdout + again.stderr,
        "MCP output": "\n".join(mcp),
        "CLI output": "\n".join(cli),
        "web view": "\n".join(web_outputs(home)),
        "audit log": (home / AUDIT_FILE).read_text() if (home / AUDIT_FILE).exists() else "",
        **database_bytes(home),
    }
    places["kb.db tables"], vocab = database_text(home / DB_FILE)
    assert leaks_of(paths, places, vocab) == {}
    # A right and a wrong guess of the value in a path get the same answer.
    for (value, path), a, b in zip(paths.items(), right, wrong, strict=True):
        assert mcp_text(a) == mcp_text(b), (value, path)
        assert not a.is_error, mcp_text(a)
    for value, path in paths.items():
        by_right, by_wrong = cli_reads[path], cli_reads[wrong_guess(path, value)]
        assert by_right.returncode == by_wrong.returncode == 0, by_right.stderr
        assert by_right.stdout == by_wrong.stdout


@pytest.mark.anyio
async def test_a_secret_in_a_path_is_nowhere_and_a_guess_of_it_is_not_confirmed(
    tmp_path: Path, home: Path, kb_cli, mcp_client
) -> None:
    await check_paths_leave_no_trace(PATHS, tmp_path, home, kb_cli, mcp_client)


@pytest.mark.anyio
async def test_a_provider_token_after_a_hyphen_in_a_file_name_is_nowhere(
    tmp_path: Path, home: Path, kb_cli, mcp_client
) -> None:
    await check_paths_leave_no_trace(AFTER_HYPHEN, tmp_path, home, kb_cli, mcp_client)


def test_a_file_with_a_secret_in_its_path_is_found_again_synced_and_refreshed(
    tmp_path: Path,
) -> None:
    """The stored path is redacted, yet a re-sync finds each file unchanged (by its key),
    an edit is seen by ``read`` (the file is found by walking its folder), and a file
    deleted since is gone. Two files whose names differ only in the secret are two."""
    folder = tmp_path / "vault"
    paths = {**PATHS, "Wq3eRt5yUi7oPa9sDf": "password=Wq3eRt5yUi7oPa9sDf.txt"}
    write_folder(folder, paths)
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.folders.add_folder(folder)
        [first] = library.folders.sync()
        assert (first.added, first.failed) == (len(paths), 0)
        [second] = library.folders.sync()
        assert (second.added, second.unchanged, second.removed) == (0, len(paths), 0)
        runbook = folder / PATHS[IN_FOLDER]
        runbook.write_text("# Rotation note\n\nThe cranberry procedure replaced it.\n")
        read = library.lookup.read(wrong_guess(PATHS[IN_FOLDER], IN_FOLDER))
        assert read.stale and "cranberry" in read.text
        assert IN_FOLDER not in (read.path or "")
        with pytest.raises(Exception, match="2 documents have the path"):
            library.lookup.read(PATHS[PASSWORD])  # two files show as the same redacted path
        (folder / PATHS[SECRET_KEY]).unlink()
        with pytest.raises(Exception, match="deleted from its folder"):
            library.lookup.read(PATHS[SECRET_KEY])
        [third] = library.folders.sync()
        assert (third.added, third.removed) == (0, 0)


def old_library(db_path: Path, folder: Path, paths: dict[str, str]) -> None:
    """A library as kb-mcp wrote it before this fix: schema 8, raw paths in locations."""
    conn = apsw.Connection(str(db_path))
    for step in migrations.MIGRATIONS[:8]:
        step(conn) if callable(step) else conn.execute(step)
    conn.execute("PRAGMA user_version = 8")
    conn.execute(
        "INSERT INTO sources(id, name, kind, root, created_at) "
        "VALUES (1, 'vault', 'folder', ?, '2026-01-01')",
        (str(folder),),
    )
    for path in paths.values():
        conn.execute(
            "INSERT INTO locations(source_id, path, state, reason) VALUES (1, ?, 'failed', ?)",
            (path, f"could not read {path}"),
        )
    conn.close()


def test_a_library_from_before_keeps_no_raw_path(tmp_path: Path) -> None:
    """The schema step rewrites every stored path (and a failure's reason naming it)
    redacted and compacts the file; the next sync still knows each file."""
    folder = tmp_path / "vault"
    write_folder(folder, PATHS)
    home = tmp_path / "home"
    home.mkdir()
    old_library(home / DB_FILE, folder, PATHS)
    with Library(Settings(home=home, embedder="none")) as library:
        found = database_bytes(home)
        found["kb.db tables"] = "\n".join(v for _t, _c, v in text_cells(home / DB_FILE))
        assert leaks_of(PATHS, found, set()) == {}
        library.folders.add_folder(folder)  # the registry file, which the old library had too
        [report] = library.folders.sync()
        assert report.removed == 0 and report.added == len(PATHS)
        assert leaks_of(PATHS, database_bytes(home), set()) == {}


def test_an_uploaded_file_named_with_a_secret_keeps_it_nowhere(tmp_path: Path) -> None:
    """An upload's uri is its file name: stored and written to ``docs/`` redacted."""
    home = tmp_path / "home"
    upload = tmp_path / PATHS[PASSWORD]
    upload.write_text("# Rotation\n\nThe blueberry rotation runbook.\n")
    with Library(Settings(home=home, embedder="none")) as library:
        added = library.writing.import_file(upload)
        read = library.lookup.read(added.doc)
    found = database_bytes(home)
    found["docs/"] = "\n".join(p.read_text() for p in (home / "docs").glob("*.md"))
    found["read"] = json.dumps([read.title, read.path])
    assert leaks_of({PASSWORD: ""}, found, set()) == {}


def test_a_rules_upgrade_redacts_stored_paths_at_once(tmp_path: Path) -> None:
    """A path stored under older rules (here: written back raw) is redacted by the
    stored-redaction upgrade at first use, before the next sync re-reads the file, and
    does not survive in the file; that sync then finds the file by its key."""
    folder = tmp_path / "vault"
    write_folder(folder, {PASSWORD: PATHS[PASSWORD]})
    home = tmp_path / "home"
    with Library(Settings(home=home, embedder="none")) as library:
        library.folders.add_folder(folder)
        library.folders.sync()
        with library.db.write() as conn:
            conn.execute("UPDATE locations SET path = ?", (PATHS[PASSWORD],))
            meta.put(conn, reredact.VERSION_KEY, str(RULES_VERSION - 1))
    assert PASSWORD in "\n".join(v for _t, _c, v in text_cells(home / DB_FILE))
    with Library(Settings(home=home, embedder="none")) as library:
        assert library.lookup.grep("blueberry").matches  # first use: the upgrade runs
        assert leaks_of({PASSWORD: ""}, database_bytes(home), set()) == {}
        [report] = library.folders.sync()
        assert (report.added, report.updated, report.removed) == (0, 0, 0)


def test_an_upload_from_before_is_renamed_in_kb_db_and_its_docs_file(tmp_path: Path) -> None:
    """An upload stored before this fix, its raw file name as its uri in its row and its
    ``docs/`` file, under today's rules version: the schema step redacts the uri and makes
    the stored-redaction upgrade due, which rewrites the ``docs/`` file at first use."""
    home = tmp_path / "home"
    (home / agent.DOCS_DIR).mkdir(parents=True)
    name, now = PATHS[PASSWORD], "2026-01-01T00:00:00+00:00"
    doc = agent.AgentDocument(
        "u-0123456789abcdef", "Rotation", name, (), "# Rotation\n\nblueberry\n", now, now,
        source=agent.UPLOAD_SOURCE,
    )  # fmt: skip
    agent.agent_file(home, doc.doc_key).write_text(agent.render_agent_file(doc))
    conn = apsw.Connection(str(home / DB_FILE))
    for step in migrations.MIGRATIONS[:8]:
        step(conn) if callable(step) else conn.execute(step)
    conn.execute("PRAGMA user_version = 8")
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?)", (reredact.VERSION_KEY, str(RULES_VERSION))
    )
    conn.execute(
        "INSERT INTO sources(id, name, kind, created_at) VALUES (1, 'uploads', 'upload', ?)",
        (now,),
    )
    conn.execute(
        "INSERT INTO documents(id, doc_key, title, uri, kind, text, content_hash, created_at, "
        "updated_at) VALUES (1, ?, 'Rotation', ?, 'markdown', ?, '0', ?, ?)",
        (doc.doc_key, name, doc.content, now, now),
    )
    conn.execute(
        "INSERT INTO locations(source_id, path, document_id) VALUES (1, ?, 1)",
        (f"{doc.doc_key}.md",),
    )
    conn.close()
    with Library(Settings(home=home, embedder="none")) as library:
        assert library.lookup.read(doc.doc_key).path == "password=[REDACTED:password]"
    found = database_bytes(home)
    found["docs/"] = agent.agent_file(home, doc.doc_key).read_text()
    assert leaks_of({PASSWORD: ""}, found, set()) == {}
