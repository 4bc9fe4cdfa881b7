"""Folder sources kept in sync: what is read, what is never read, and how changes land.

Real folders in ``tmp_path``, a real ``kb.db`` built by the production migrations, and
for background sync the real ``kb-mcp serve`` over stdio. Each test checks what an
agent would see afterwards, through ``search``, ``grep``, ``list`` and ``read``, plus the
``SyncReport`` a user reads. (GitHub issue "Folder sources and real file formats".)
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from kb_mcp.errors import NotFound
from kb_mcp.ingest.filework import read_without_gc
from kb_mcp.ingest.sources import REGISTRY_FILE
from kb_mcp.ingest.sync import SyncReport
from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows
from kb_mcp.store.documents import LocationState

# --- helpers ----------------------------------------------------------------------------------


@contextmanager
def open_library(home: Path, **overrides: Any) -> Iterator[Library]:
    """A ``Library`` on ``home`` with ``Settings`` overrides (e.g. a small file cap)."""
    library = Library(Settings(home=home, **overrides))
    try:
        yield library
    finally:
        library.close()


def make(root: Path, files: dict[str, str]) -> None:
    """Write each ``rel path → text`` under ``root``, creating folders."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def sync_one(library: Library) -> SyncReport:
    """Sync every source and return the report of the only one."""
    [report] = library.folders.sync()
    return report


def sync_one_with(library: Library, should_stop: Callable[[], bool]) -> SyncReport:
    """Sync every source, stopping when ``should_stop`` says so; the only report."""
    [report] = library.folders.sync(should_stop=should_stop)
    return report


def counts(report: SyncReport) -> dict[str, int]:
    return {
        "added": report.added,
        "updated": report.updated,
        "unchanged": report.unchanged,
        "removed": report.removed,
        "failed": report.failed,
    }


def search_paths(library: Library, query: str) -> list[str | None]:
    return [hit.path for hit in library.lookup.search(query).hits]


def grep_paths(library: Library, text: str) -> list[str]:
    return [m.path for m in library.lookup.grep(text, ignore_case=True).matches]


def all_stored_text(library: Library) -> str:
    """Every stored document's path and text, for 'never stored anywhere' checks."""
    return "\n".join(
        f"{path}\n{text}" for _doc, path, text in rows.iter_texts(library.db.conn, None)
    )


def indexed_paths(library: Library, source: str) -> set[str]:
    return {d.path for d in library.catalog.list_source(source, limit=200).documents}


def locations(library: Library, source: str) -> dict[str, LocationState]:
    source_row = rows.get_source(library.db.conn, source)
    assert source_row is not None
    recorded = rows.source_locations(library.db.conn, source_row.id)
    return {state.path: state for state in recorded.values()}  # by the path shown


def set_mtime(path: Path, seconds_ago: int) -> int:
    """Give ``path`` an mtime ``seconds_ago`` seconds in the past; returns it in ns."""
    mtime_ns = (int(os.path.getmtime(path)) - seconds_ago) * 1_000_000_000
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return mtime_ns


def swap_content_keeping_stat(path: Path, text: str) -> None:
    """Rewrite ``path`` with same-length ``text`` and its old mtime: only reading it can tell."""
    before = path.stat()
    data = text.encode("utf-8")
    assert len(data) == before.st_size, "the new text must be exactly as long"
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """The folder registered as source ``notes``."""
    path = tmp_path / "notes"
    path.mkdir()
    return path


# --- ignore rules and pruning -----------------------------------------------------------------


def test_kbignore_rules_exclude_matching_files(library: Library, notes: Path) -> None:
    make(
        notes,
        {
            "keep.md": "kept plain note",
            "scratch.draft.txt": "star pattern excludes this",
            "final.draft.txt": "negation brings this back",
            "drafts/wip.md": "trailing slash excludes the folder",
            "drafts.md": "a file named drafts is not a folder, kept",
            "todo.md": "leading slash excludes the root todo",
            "sub/todo.md": "leading slash keeps this deeper todo",
            "logs/run.md": "double star excludes logs at the root",
            "a/deep/logs/run.md": "double star excludes logs at any depth",
            "# not a comment.md": "an escaped hash is a literal name",
        },
    )
    (notes / ".kbignore").write_text(
        "# comments and blank lines are skipped\n"
        "\n"
        "*.draft.txt\n"
        "!final.draft.txt\n"
        "drafts/\n"
        "/todo.md\n"
        "**/logs\n"
        "\\# not a comment.md\n",
        encoding="utf-8",
    )
    library.folders.add_folder(notes)
    report = sync_one(library)
    kept = {"keep.md", "final.draft.txt", "drafts.md", "sub/todo.md"}
    assert indexed_paths(library, "notes") == kept
    assert report.added == len(kept)
    # scratch.draft.txt, drafts/, /todo.md, logs/, a/deep/logs/, "# not a comment.md"
    assert report.skipped["ignored"] == 6
    assert search_paths(library, "excludes") == []
    assert grep_paths(library, "excludes") == []


def test_ignore_globs_given_at_registration_exclude_files(library: Library, notes: Path) -> None:
    make(
        notes,
        {
            "guide.md": "kept guide",
            "vendor/lib/readme.md": "vendored readme excluded",
            "generated/api.md": "generated docs excluded",
            "notes/old.bak.md": "backup excluded",
        },
    )
    library.folders.add_folder(notes, ignore=["vendor/", "generated/**", "*.bak.md"])
    sync_one(library)
    assert indexed_paths(library, "notes") == {"guide.md"}
    assert grep_paths(library, "excluded") == []


def test_walk_never_indexes_pruned_folders_junk_or_lock_files(
    library: Library, notes: Path
) -> None:
    make(
        notes,
        {
            "readme.md": "the real note",
            ".git/description.md": "prunedword git",
            "node_modules/pkg/readme.md": "prunedword node",
            "__pycache__/cache.md": "prunedword pycache",
            ".obsidian/workspace.json": '{"prunedword": "dot folder"}',
            "env/pyvenv.cfg": "home = /usr",
            "env/lib/notes.md": "prunedword virtualenv",
            ".hidden.md": "prunedword dot file",
            ".DS_Store": "prunedword junk",
            "readme.md~": "prunedword editor backup",
            "~$memo.docx": "prunedword office lock",
            "yarn.lock": "prunedword lock",
            "package-lock.json": '{"prunedword": "lock"}',
            "poetry.lock": "prunedword lock",
        },
    )
    library.folders.add_folder(notes)
    report = sync_one(library)
    assert indexed_paths(library, "notes") == {"readme.md"}
    assert "prunedword" not in all_stored_text(library)
    assert search_paths(library, "prunedword") == []
    assert report.skipped["pruned"] == 4  # .git, node_modules, __pycache__, env (pyvenv.cfg)
    assert report.skipped["junk"] == 6


# --- sensitive files --------------------------------------------------------------------------

SECRETS = {
    ".env": "API_TOKEN=envsecretvalue",
    "config/.env.production": "DB_PASSWORD=envsecretvalue",
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nkeysecretvalue\n",
    "deploy/credentials.json": '{"password": "credsecretvalue"}',
    ".ssh/config.md": "Host prod sshsecretvalue",
    "home/.ssh/notes.txt": "sshsecretvalue in a nested credential folder",
}


def assert_never_stored(library: Library, *values: str) -> None:
    """No index, listing or report holds these values or the files that carry them."""
    stored = all_stored_text(library)
    for value in values:
        assert value not in stored, value
        assert library.lookup.search(value).hits == (), value
        assert library.lookup.grep(value, ignore_case=True).matches == (), value


def test_sensitive_files_are_never_indexed_or_reported(library: Library, notes: Path) -> None:
    make(notes, {"readme.md": "plain readme note", **SECRETS})
    library.folders.add_folder(notes)
    report = sync_one(library)
    assert indexed_paths(library, "notes") == {"readme.md"}
    assert (report.added, report.failed, report.failures) == (1, 0, [])
    assert report.skipped["sensitive"] == 6  # four files and two .ssh folders
    assert_never_stored(
        library, "envsecretvalue", "keysecretvalue", "credsecretvalue", "sshsecretvalue"
    )
    assert set(locations(library, "notes")) == {"readme.md"}  # no failed rows naming them


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_symlink_named_like_a_note_into_an_ssh_folder_is_never_read(
    library: Library, notes: Path, tmp_path: Path, where: str
) -> None:
    ssh = (tmp_path / "elsewhere" if where == "outside" else notes) / ".ssh"
    make(ssh, {"id_ed25519": "sshkeysecretvalue", "work.md": "sshnotesecretvalue"})
    make(notes, {"readme.md": "plain readme note"})
    (notes / "notes.md").symlink_to(ssh / "id_ed25519")
    (notes / "work.md").symlink_to(ssh / "work.md")  # a harmless name inside .ssh too
    (notes / "vault").symlink_to(ssh, target_is_directory=True)
    library.folders.add_folder(notes)
    report = sync_one(library)
    assert indexed_paths(library, "notes") == {"readme.md"}
    assert report.failures == []
    assert_never_stored(library, "sshkeysecretvalue", "sshnotesecretvalue")


def test_symlink_to_a_file_outside_the_root_is_never_read(
    library: Library, notes: Path, tmp_path: Path
) -> None:
    make(tmp_path / "other", {"diary.md": "outsidediaryvalue"})
    make(notes, {"readme.md": "plain readme note"})
    (notes / "diary.md").symlink_to(tmp_path / "other" / "diary.md")
    library.folders.add_folder(notes)
    report = sync_one(library)
    assert indexed_paths(library, "notes") == {"readme.md"}
    assert report.skipped["outside_root_symlink"] == 1
    assert_never_stored(library, "outsidediaryvalue")


# --- changes picked up by the next sync -------------------------------------------------------


@pytest.fixture
def synced(library: Library, notes: Path) -> Library:
    """``notes`` with three notes, registered and synced once."""
    make(
        notes,
        {
            "alpha.md": "# Alpha\n\nalpha talks about aardvarks\n",
            "beta.md": "# Beta\n\nbeta talks about badgers\n",
            "gamma.md": "# Gamma\n\ngamma talks about gophers\n",
        },
    )
    library.folders.add_folder(notes)
    assert counts(sync_one(library))["added"] == 3
    return library


def test_sync_edit_replaces_old_text_with_new(synced: Library, notes: Path) -> None:
    (notes / "beta.md").write_text("# Beta\n\nbeta now talks about bison\n", encoding="utf-8")
    report = sync_one(synced)
    assert counts(report) == {"added": 0, "updated": 1, "unchanged": 2, "removed": 0, "failed": 0}
    assert search_paths(synced, "badgers") == []
    assert grep_paths(synced, "badgers") == []
    assert search_paths(synced, "bison") == ["beta.md"]
    assert synced.catalog.overview().documents == 3


def test_sync_rename_moves_the_path_without_duplicate(synced: Library, notes: Path) -> None:
    (notes / "archive").mkdir()
    (notes / "beta.md").rename(notes / "archive" / "beta-2023.md")
    report = sync_one(synced)
    assert (report.added, report.removed, report.updated) == (1, 1, 0)
    assert search_paths(synced, "badgers") == ["archive/beta-2023.md"]
    assert grep_paths(synced, "badgers") == ["archive/beta-2023.md"]
    assert indexed_paths(synced, "notes") == {"alpha.md", "archive/beta-2023.md", "gamma.md"}
    assert synced.catalog.overview().documents == 3


def test_sync_delete_removes_chunks_from_search_and_grep(synced: Library, notes: Path) -> None:
    (notes / "gamma.md").unlink()
    report = sync_one(synced)
    assert counts(report) == {"added": 0, "updated": 0, "unchanged": 2, "removed": 1, "failed": 0}
    assert search_paths(synced, "gophers") == []
    assert grep_paths(synced, "gophers") == []
    assert indexed_paths(synced, "notes") == {"alpha.md", "beta.md"}
    assert (synced.catalog.overview().documents, synced.catalog.overview().chunks) == (2, 2)


def test_sync_unchanged_tree_reports_unchanged_and_opens_no_file(
    synced: Library, notes: Path
) -> None:
    before = locations(synced, "notes")
    # Same size, same mtime, other bytes: a sync that opened the file would see the change.
    swap_content_keeping_stat(notes / "alpha.md", "# Alpha\n\nalpha talks about axolotlss\n")
    # Where permissions apply (not as root), an unreadable file would fail if it were opened.
    (notes / "gamma.md").chmod(0)
    try:
        report = sync_one(synced)
    finally:
        (notes / "gamma.md").chmod(0o644)
    assert counts(report) == {"added": 0, "updated": 0, "unchanged": 3, "removed": 0, "failed": 0}
    assert report.failures == []
    assert locations(synced, "notes") == before
    assert search_paths(synced, "aardvarks") == ["alpha.md"]
    assert search_paths(synced, "axolotls") == []


def test_sync_touched_file_with_same_content_is_unchanged(synced: Library, notes: Path) -> None:
    before = locations(synced, "notes")["beta.md"]
    new_mtime = set_mtime(notes / "beta.md", seconds_ago=3600)
    report = sync_one(synced)
    assert counts(report) == {"added": 0, "updated": 0, "unchanged": 3, "removed": 0, "failed": 0}
    after = locations(synced, "notes")["beta.md"]
    assert (after.document_id, after.file_hash, after.state) == (
        before.document_id,
        before.file_hash,
        "indexed",
    )
    assert after.mtime_ns == new_mtime  # recorded, so the next sync does not hash it again
    assert search_paths(synced, "badgers") == ["beta.md"]


def test_sync_interrupted_then_resumed_indexes_the_rest(library: Library, notes: Path) -> None:
    for i in range(8):
        make(notes, {f"n{i}.md": f"# Note {i}\n\nresumeword{i} body\n"})
        set_mtime(notes / f"n{i}.md", seconds_ago=100 - i)  # n7 is the newest
    library.folders.add_folder(notes)
    calls = 0

    def stop_after_three() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    first = sync_one_with(library, stop_after_three)
    assert counts(first) == {"added": 3, "updated": 0, "unchanged": 0, "removed": 0, "failed": 0}
    assert indexed_paths(library, "notes") == {"n7.md", "n6.md", "n5.md"}  # newest first
    assert search_paths(library, "resumeword0") == []
    second = sync_one(library)
    assert counts(second) == {"added": 5, "updated": 0, "unchanged": 3, "removed": 0, "failed": 0}
    assert all(search_paths(library, f"resumeword{i}") == [f"n{i}.md"] for i in range(8))


def test_sync_interrupted_does_not_remove_files_it_did_not_reach(
    synced: Library, notes: Path
) -> None:
    (notes / "gamma.md").unlink()
    report = sync_one_with(synced, lambda: True)
    assert report.removed == 0
    assert search_paths(synced, "gophers") == ["gamma.md"]
    assert sync_one(synced).removed == 1


def test_sync_failed_file_is_reported_and_not_retried_until_it_changes(
    library: Library, notes: Path
) -> None:
    make(notes, {"good.md": "a good gazelle note"})
    bad = notes / "bad.txt"
    bad.write_bytes(b"\x01\x02\x00\x03\x04binary" * 20)
    library.folders.add_folder(notes)
    first = sync_one(library)
    assert (first.added, first.failed) == (1, 1)
    [(path, reason)] = first.failures
    assert path == "bad.txt" and "binary data" in reason
    assert library.catalog.overview().health["failed_files"] == 1
    assert [(s.name, s.failed) for s in library.catalog.overview().sources] == [("notes", 1)]

    # Not retried while unchanged: even readable bytes behind the same size and mtime stay unread.
    swap_content_keeping_stat(bad, "flamingo".ljust(bad.stat().st_size, "."))
    second = sync_one(library)
    # still failing and not retried: counted as failed again, listed once
    assert (second.added, second.failed, second.failures) == (0, 1, [(path, reason)])
    assert search_paths(library, "flamingo") == []

    bad.write_text("fixed now: a flamingo note\n", encoding="utf-8")
    third = sync_one(library)
    assert (third.added, third.failed, third.failures) == (1, 0, [])
    assert search_paths(library, "flamingo") == ["bad.txt"]
    assert library.catalog.overview().health["failed_files"] == 0


# --- the per-source cap -----------------------------------------------------------------------


def make_aged_files(folder: Path, n: int) -> None:
    """``f0.md`` (oldest) … ``f{n-1}.md`` (newest), each with the word ``capword<i>``."""
    for i in range(n):
        make(folder, {f"f{i}.md": f"capword{i} note\n"})
        set_mtime(folder / f"f{i}.md", seconds_ago=1000 - i)


def test_cap_keeps_the_newest_files_and_reports_the_surplus(home: Path, notes: Path) -> None:
    make_aged_files(notes, 5)
    with open_library(home, max_files_per_source=2) as library:
        library.folders.add_folder(notes)
        report = sync_one(library)
        assert (report.added, report.over_cap, report.removed) == (2, 3, 0)
        assert indexed_paths(library, "notes") == {"f3.md", "f4.md"}
        assert search_paths(library, "capword0") == []
        assert library.folders.estimate_folder(notes).over_cap == 3


def test_cap_lowered_keeps_documents_indexed_before(home: Path, notes: Path) -> None:
    make_aged_files(notes, 5)
    with open_library(home) as library:
        library.folders.add_folder(notes)
        assert sync_one(library).added == 5
    with open_library(home, max_files_per_source=2) as library:
        report = sync_one(library)
        assert counts(report) == {
            "added": 0,
            "updated": 0,
            "unchanged": 2,
            "removed": 0,
            "failed": 0,
        }
        assert report.over_cap == 3
        assert indexed_paths(library, "notes") == {f"f{i}.md" for i in range(5)}
        assert all(search_paths(library, f"capword{i}") == [f"f{i}.md"] for i in range(5))


# --- deduplication ----------------------------------------------------------------------------


@pytest.fixture
def two_sources(library: Library, tmp_path: Path) -> Library:
    """Sources ``a`` and ``b``: one identical file (two names), and near-identical ones."""
    make(tmp_path / "a", {"shared.md": "# Shared\n\nidentical quasar text\n"})
    make(tmp_path / "b", {"copy-of-shared.md": "# Shared\n\nidentical quasar text\n"})
    make(tmp_path / "a", {"near.md": "# Near\n\nnearly pulsar text, first version\n"})
    make(tmp_path / "b", {"near.md": "# Near\n\nnearly pulsar text, second version\n"})
    library.folders.add_folder(tmp_path / "a")
    library.folders.add_folder(tmp_path / "b")
    assert [r.added for r in library.folders.sync()] == [2, 2]
    return library


def test_dedup_identical_file_in_two_sources_is_one_document(two_sources: Library) -> None:
    hits = two_sources.lookup.search("quasar").hits
    assert len(hits) == 1
    doc = hits[0].doc
    assert [m.doc for m in two_sources.lookup.grep("quasar").matches] == [doc]
    listed = {
        (name, d.path)
        for name in ("a", "b")
        for d in two_sources.catalog.list_source(name).documents
        if d.doc == doc
    }
    assert listed == {("a", "shared.md"), ("b", "copy-of-shared.md")}  # two locations
    assert two_sources.catalog.overview().documents == 3


def test_dedup_removing_one_source_keeps_the_other_copy(two_sources: Library) -> None:
    two_sources.folders.remove_source("a")
    [hit] = two_sources.lookup.search("quasar").hits
    assert (hit.source, hit.path) == ("b", "copy-of-shared.md")
    assert two_sources.lookup.read(hit.cite).text.endswith("identical quasar text")


def test_dedup_near_identical_files_are_both_indexed(two_sources: Library) -> None:
    hits = two_sources.lookup.search("pulsar").hits
    assert sorted((h.source, h.path) for h in hits) == [("a", "near.md"), ("b", "near.md")]
    assert len({h.doc for h in hits}) == 2


# --- removing a source ------------------------------------------------------------------------


def test_remove_source_drops_its_documents_and_leaves_the_folder(
    two_sources: Library, tmp_path: Path, home: Path
) -> None:
    folder_before = {p: p.read_bytes() for p in (tmp_path / "a").rglob("*")}
    removed = two_sources.folders.remove_source("a")
    assert removed == 2
    assert [(h.source, h.path) for h in two_sources.lookup.search("pulsar").hits] == [
        ("b", "near.md")
    ]
    assert grep_paths(two_sources, "first version") == []
    with pytest.raises(NotFound):
        two_sources.catalog.list_source("a")
    assert [s.name for s in two_sources.catalog.overview().sources] == ["b"]
    assert {p: p.read_bytes() for p in (tmp_path / "a").rglob("*")} == folder_before
    registry = json.loads((home / REGISTRY_FILE).read_text(encoding="utf-8"))
    assert [entry["name"] for entry in registry] == ["b"]
    # A later sync does not bring it back.
    assert [r.source for r in two_sources.folders.sync()] == ["b"]
    assert grep_paths(two_sources, "first version") == []


def test_remove_source_unknown_raises_not_found(synced: Library, home: Path) -> None:
    registry = (home / REGISTRY_FILE).read_bytes()
    with pytest.raises(NotFound, match="no source named 'nope'"):
        synced.folders.remove_source("nope")
    assert (home / REGISTRY_FILE).read_bytes() == registry
    assert synced.catalog.overview().documents == 3


# --- the registry outlives the database -------------------------------------------------------


def test_rebuild_after_deleting_the_database_resyncs_registered_folders(
    home: Path, notes: Path
) -> None:
    make(
        notes,
        {
            "alpha.md": "# Alpha\n\nalpha talks about aardvarks\n",
            "sub/beta.md": "# Beta\n\nbeta talks about badgers\n",
            "code.py": "def gopher_count():\n    return 'gophers'\n",
        },
    )
    queries = ("aardvarks", "badgers", "gophers")

    def answers(library: Library) -> list[list[tuple]]:
        return [
            [(h.doc, h.path, h.source, h.title, h.cite) for h in library.lookup.search(q).hits]
            for q in queries
        ]

    with open_library(home) as library:
        library.folders.add_folder(notes)
        sync_one(library)
        expected = answers(library)
    assert all(expected)
    for path in home.glob(DB_FILE + "*"):
        path.unlink()
    with open_library(home) as library:
        assert library.catalog.overview().documents == 0
        report = library.writing.reindex(rebuild=True)
        assert (report.documents, report.failed) == (3, ())
        assert answers(library) == expected


# --- read notices a changed file --------------------------------------------------------------


def test_read_notices_a_changed_file_and_returns_its_new_text(synced: Library, notes: Path) -> None:
    [hit] = synced.lookup.search("badgers").hits
    assert synced.lookup.read(hit.doc).stale is False
    new_text = "# Beta\n\nbeta was rewritten to talk about bison instead\n"
    (notes / "beta.md").write_text(new_text, encoding="utf-8")
    result = synced.lookup.read(hit.doc)
    assert (result.stale, result.text, result.path) == (True, new_text, "beta.md")
    assert search_paths(synced, "bison") == ["beta.md"]
    assert search_paths(synced, "badgers") == []
    assert synced.lookup.read(result.doc).stale is False


def test_read_of_a_deleted_file_is_not_presented_as_current(synced: Library, notes: Path) -> None:
    [hit] = synced.lookup.search("gophers").hits
    (notes / "gamma.md").unlink()
    try:
        result = synced.lookup.read(hit.doc)
    except NotFound:
        return  # also acceptable: the document went with its file
    assert result.stale is True


# --- background sync in a running server ------------------------------------------------------

POLL_LIMIT_S = 60.0  # bounds a failure only: the poll ends at the first hit


async def wait_for_hit(client: Client, query: str) -> dict[str, Any]:
    """Poll ``search`` until ``query`` has a hit; fail after ``POLL_LIMIT_S`` seconds."""
    with anyio.move_on_after(POLL_LIMIT_S):
        while True:
            result = await client.call_tool("search", {"query": query})
            if result.structured_content["results"]:
                return result.structured_content["results"][0]
            await anyio.sleep(0.2)
    pytest.fail(f"{query!r} not searchable within {POLL_LIMIT_S} s")


@pytest.mark.anyio
async def test_background_sync_makes_new_files_searchable_in_a_running_server(
    home: Path, notes: Path, child_env: dict[str, str], server_log: Path
) -> None:
    make(notes, {"before.md": "# Before\n\nwritten before the server started: earlyword\n"})
    with open_library(home) as library:
        library.folders.add_folder(notes)  # registered, not synced: the server does that
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "kb_mcp", "serve", "--home", str(home)],
        env={**child_env, "KB_MCP_SYNC_INTERVAL_S": "1"},
        keep_alive=False,
        log_file=server_log,
    )
    async with Client(transport, timeout=30) as client:
        early = await wait_for_hit(client, "earlyword")
        assert (early["path"], early["source"]) == ("before.md", "notes")
        make(notes, {"later/after.md": "# After\n\nwritten while the server ran: lateword\n"})
        late = await wait_for_hit(client, "lateword")
        assert (late["path"], late["source"]) == ("later/after.md", "notes")
        read = await client.call_tool("read", {"doc": late["cite"]})
        assert "lateword" in read.structured_content["text"]


def test_sync_reads_files_while_no_write_transaction_is_open(tmp_path: Path) -> None:
    """issue 11 (concurrency): a sync holds the write lock only while it writes, never
    while it reads the next files (in this process, the reader pool or a PDF's bounded
    process): between files, another writer gets the lock at once."""
    import apsw

    folder = tmp_path / "notes"
    make(folder, {f"n{i}.md": f"# Note {i}\n\nword{i}z here.\n" for i in range(6)})
    probes: list[str] = []

    def other_writer_gets_in() -> bool:
        conn = apsw.Connection(str(tmp_path / "home" / DB_FILE))
        conn.set_busy_timeout(0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            probes.append("free")
        except apsw.BusyError:
            probes.append("locked")
        finally:
            conn.close()
        return False

    with open_library(tmp_path / "home", embedder="none") as library:
        library.folders.add_folder(folder)
        report = sync_one_with(library, other_writer_gets_in)
        assert report.added == 6
        assert library.lookup.search("word5z").hits
    assert len(probes) >= 6
    assert set(probes) == {"free"}


def test_sync_reader_pauses_the_collector_only_while_it_reads() -> None:
    """issue 10 (ingest CPU): a reader worker reads a file with cyclic collection
    paused (``read_without_gc``), hands back what the read returned, and leaves the
    collector as it found it, enabled or not."""
    seen: list[bool] = []

    def read(*args: object) -> tuple[object, ...]:
        seen.append(gc.isenabled())
        return args

    assert gc.isenabled()
    assert read_without_gc(read, "root", 1) == ("root", 1)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        read_without_gc(read)
        assert not gc.isenabled()
    finally:
        gc.enable()
