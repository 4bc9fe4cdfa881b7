"""The linking phase (issue 22 item 2): a file is keyword-searchable before its entities,
relations and near-duplicates are recorded; the phase catches up from the stored rows, to
the same rows the one ingest path made; ``kill -9`` in either phase loses and doubles
nothing; the server's ``add_document`` returns before it and the server catches up.

Real SQLite files, real folders, real processes (the kills are real SIGKILLs at a point
the child process chooses, never a sleep).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kb_mcp.fsutil import FileLock
from kb_mcp.index import graph
from kb_mcp.ingest import links
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import link_queue

FILLER = 420  # more than readahead.PARALLEL_MIN_FILES: the pools run, in both phases

FILES = {
    "adr/adr-7.md": "# ADR-7: Use Postgres for orders\n\nTeam Atlas runs SearchCluster.\n",
    "adr/adr-12.md": (
        "---\nsupersedes: ADR-7\n---\n# ADR-12: Use SQLite for orders\n\n"
        "Team Atlas moves SearchCluster to SQLite.\n"
    ),
    "notes/march-release-notes.md": "# March release notes\n\nThe exporter ships in v2.3.1.\n",
    "notes/errata.md": (
        "# Errata for the March release notes\n\nThe exporter ships in v2.3.2, not v2.3.1.\n"
    ),
    "a/readme.md": "# Handbook\n\n" + "Team Atlas keeps the on-call rota in the wiki.\n" * 30,
    "b/readme.md": "# Handbook\n\n"
    + "Team Atlas keeps the on-call rota in the wiki.\n" * 29
    + "Ask #atlas-oncall first.\n",
}


def _write_folder(folder: Path, filler: int = FILLER) -> None:
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    for i in range(filler):
        (folder / "log").mkdir(parents=True, exist_ok=True)
        (folder / "log" / f"day-{i:04d}.md").write_text(
            f"# Day {i}\n\nTeam Atlas paged Orion Billing about SearchCluster "
            f"shard {i % 7}; see #atlas-oncall.\n",
            encoding="utf-8",
        )


def _library(home: Path) -> Library:
    return Library(Settings(home=home, embedder="none", max_files_per_source=100_000))


def linked_rows(lib: Library) -> tuple:
    """Everything the linking phase records, by names and keys (never ids): the graph,
    the relations, the near-duplicate pairs."""
    conn = lib.db.conn
    relations = set(
        conn.execute(
            "SELECT s.doc_key, f.doc_key, t.doc_key, r.kind, r.reference, r.effective, "
            "r.start_line, r.detected, r.state FROM doc_relations r "
            "JOIN documents s ON s.id = r.stated_by LEFT JOIN documents f ON f.id = r.from_id "
            "LEFT JOIN documents t ON t.id = r.to_id"
        )
    )
    pairs = {
        (frozenset((a, b)), similarity)  # stored as (lower id, higher id): ids differ
        for a, b, similarity in conn.execute(
            "SELECT a.doc_key, b.doc_key, n.similarity FROM near_duplicates n "
            "JOIN documents a ON a.id = n.document_id JOIN documents b ON b.id = n.other_id"
        )
    }
    return (*lib.graph.snapshot(), relations, pairs)


def _reference(tmp_path: Path) -> tuple:
    """The rows of a library built the one-path way: every document linked right after
    it is stored, before the next one (a sync per file, each linking at once)."""
    folder, home = tmp_path / "ref-folder", tmp_path / "ref-home"
    _write_folder(tmp_path / "all", filler=8)
    folder.mkdir()
    with _library(home) as lib:
        lib.folders.add_folder(folder, "corpus")
        for path in sorted((tmp_path / "all").rglob("*.md")):
            target = folder / path.relative_to(tmp_path / "all")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            lib.folders.sync("corpus")  # link=True: the phase runs before the next file arrives
            assert link_queue.pending_count(lib.db.conn) == 0
        return linked_rows(lib)


def test_a_file_is_keyword_searchable_before_its_links_and_gets_them_later(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "notes"
    _write_folder(folder, filler=0)
    with _library(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "corpus")
        lib.folders.sync("corpus", link=False)
        found = lib.lookup.search("exporter ships", mode="keyword")
        assert "notes/errata.md" in {h.path for h in found.hits}
        assert lib.lookup.grep("v2.3.2").matches
        assert "v2.3.2" in lib.lookup.read("notes/errata.md").text
        # nothing of the linking phase yet, and list / doctor say how much waits
        assert linked_rows(lib) == (set(), set(), set(), set(), set())
        assert lib.catalog.overview().health["entities_and_relations"] == "6 of 6 documents pending"
        assert any(c.detail == "6 of 6 documents pending" for c in lib.health.report().checks)
        report = lib.links.run()
        assert (report.linked, report.pending) == (6, 0)
        assert lib.catalog.overview().health["entities_and_relations"] == "current"
        entities, _mentions, _pairs, relations, duplicates = linked_rows(lib)
    assert {"teamatlas", "searchcluster"} <= {e[0] for e in entities}
    expected = {
        ("f-", "supersedes", "ADR-7", "resolved"),
        ("f-", "corrects", "the March release notes", "resolved"),
    }
    assert {(r[0][:2], r[3], r[4], r[8]) for r in relations} >= expected
    assert len(duplicates) == 1


def test_the_keyword_segment_is_built_after_linking_and_never_after_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 22: the keyword postings segment is built after the linking phase, not in
    the sync's keyword phase; a linking run asked to stop returns without building it
    (a build can take seconds at scale, and the stop would wait for it)."""
    from kb_mcp.index import postings

    monkeypatch.setattr(postings, "SEGMENT_MIN_CHUNKS", 1)  # due on any library
    folder = tmp_path / "notes"
    _write_folder(folder, filler=0)
    with _library(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "corpus")
        lib.folders.sync("corpus", link=False)
        assert postings.delta_size(lib.db.conn) is None  # the keyword phase built none
        lib.links.run(should_stop=lambda: True)
        assert postings.delta_size(lib.db.conn) is None
        lib.links.run()
        assert postings.delta_size(lib.db.conn) is not None


def test_the_phase_catches_up_to_the_rows_the_one_path_made(tmp_path: Path) -> None:
    """Keyword phase over the whole folder (reader pool), then the linking phase (its own
    pool): the same graph, relations and near-duplicates as documents linked one by one
    as they arrived."""
    expected = _reference(tmp_path)
    folder = tmp_path / "folder"
    _write_folder(folder, filler=8)
    with _library(tmp_path / "home") as lib:
        lib.folders.add_folder(folder, "corpus")
        lib.folders.sync("corpus", link=False)
        assert link_queue.pending_count(lib.db.conn) == len(FILES) + 8
        lib.links.run()
        assert linked_rows(lib) == expected
        graph.rebuild(lib.db)  # and a rebuild from the chunks agrees
        assert linked_rows(lib) == expected


def test_the_pools_link_a_large_folder_as_in_process_linking_does(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    _write_folder(folder)
    homes = (tmp_path / "pooled", tmp_path / "alone")
    for home in homes:
        with _library(home) as lib:
            lib.folders.add_folder(folder, "corpus")
            lib.folders.sync("corpus", link=False)
    with _library(homes[0]) as lib:
        assert lib.links.run().linked == len(FILES) + FILLER  # in the reader pool
        pooled = linked_rows(lib)
    with _library(homes[1]) as lib:
        while link_queue.pending_count(lib.db.conn):  # in this process, a group at a time
            entries = link_queue.entries_after(lib.db.conn, 0, links.GROUP_DOCUMENTS)
            links.write(lib.db, links.compute(lib.db.conn, [(e, d) for e, d, _n in entries]))
        assert linked_rows(lib) == pooled


def test_a_result_for_a_document_changed_meanwhile_is_not_written(tmp_path: Path) -> None:
    """A queue entry names one version: linking what was computed for a document that
    was replaced since writes nothing for it (no doubled mentions, no stale relations)."""
    with _library(tmp_path / "home") as lib:
        lib.writing.add_document(
            "Team Atlas", "Team Atlas runs SearchCluster.", "kb://a", by_agent=False, link=False
        )
        entries = [(e, d) for e, d, _n in link_queue.entries_after(lib.db.conn, 0, 10)]
        stale = links.compute(lib.db.conn, entries)
        lib.writing.add_document(
            "Team Atlas", "Team Atlas runs Orion.", "kb://a", by_agent=False, link=False
        )
        assert links.write(lib.db, stale) == 0
        assert lib.links.run().linked == 1
        entities = {e[0]: e[4] for e in lib.graph.snapshot()[0]}
    assert "searchcluster" not in entities and entities["orion"] == 1


KILLED = """
import os, signal, sys
from pathlib import Path
from kb_mcp.fsutil import FileLock
from kb_mcp.index import graph
from kb_mcp.ingest import links
from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store import link_queue

phase, after = sys.argv[1], int(sys.argv[2])
calls = [0]

def killing(real):
    def call(*args, **kwargs):
        calls[0] += 1
        if calls[0] > after:  # inside the write transaction, before it commits
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call

if phase == "keyword":
    import kb_mcp.ingest.pipeline as pipeline
    pipeline.link_queue = type("Q", (), {
        "enqueue": staticmethod(killing(link_queue.enqueue)),
        "enqueue_new": staticmethod(killing(link_queue.enqueue_new)),
        "is_queued": staticmethod(link_queue.is_queued),
    })
else:
    links.GROUP_DOCUMENTS = 2
    links.queue = type("Q", (), {
        name: staticmethod(getattr(link_queue, name)) for name in dir(link_queue)
        if not name.startswith("_")
    })
    links.queue.done = staticmethod(killing(link_queue.done))
lib = Library(Settings(home=Path(sys.argv[3]), embedder="none"))
if phase == "keyword":
    lib.folders.add_folder(Path(sys.argv[4]), "corpus")
    lib.folders.sync("corpus", link=False)
else:
    lib.links.run()
print("not killed")
"""


@pytest.mark.parametrize(("phase", "after"), [("keyword", 3), ("links", 5)])
def test_kill_9_in_either_phase_loses_nothing_and_doubles_nothing(
    tmp_path: Path, phase: str, after: int
) -> None:
    expected = _reference(tmp_path)
    folder, home = tmp_path / "folder", tmp_path / "home"
    _write_folder(folder, filler=8)
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED), encoding="utf-8")
    if phase == "links":  # the keyword phase done and committed, nothing linked
        with _library(home) as lib:
            lib.folders.add_folder(folder, "corpus")
            lib.folders.sync("corpus", link=False)
    args = [sys.executable, str(script), phase, str(after), str(home), str(folder)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    with _library(home) as lib:
        if phase == "links":  # the groups committed before the kill stay linked
            assert 0 < link_queue.pending_count(lib.db.conn) < len(FILES) + 8
        lib.folders.sync("corpus")  # the keyword phase resumes, then the linking phase
        assert link_queue.pending_count(lib.db.conn) == 0
        assert linked_rows(lib) == expected
        chunks = lib.db.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        indexed = lib.db.conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        assert chunks == indexed == len(FILES) + 8


GATED_SERVER = '''\
"""kb-mcp serve, whose linking phase waits until the gate file exists."""
import sys
import time
from pathlib import Path

from kb_mcp.library import linking
from kb_mcp.cli.main import main

GATE = Path(sys.argv.pop(1))
_link = linking.Linking.run


def gated(self, *args, **kwargs):
    while not GATE.exists():
        time.sleep(0.05)
    return _link(self, *args, **kwargs)


linking.Linking.run = gated
sys.exit(main(sys.argv[1:]))
'''


@pytest.mark.anyio
async def test_add_document_returns_before_linking_and_the_server_catches_up(
    mcp_client, home: Path, tmp_path: Path
) -> None:
    wrapper, gate = tmp_path / "gated_server.py", tmp_path / "gate"
    wrapper.write_text(GATED_SERVER, encoding="utf-8")
    async with mcp_client(allow_agent_writes=True, entry=[str(wrapper), str(gate)]) as client:
        added = await client.call_tool(
            "add_document",
            {
                "title": "Errata for the March release notes",
                "content": "Team Atlas: the exporter ships in v2.3.2.",
                "source_uri": "kb://errata",
            },
        )
        assert added.structured_content["outcome"] == "created"
        found = await client.call_tool("search", {"query": "exporter ships", "mode": "keyword"})
        assert found.structured_content["results"]  # keyword-searchable already
        with _library(home) as lib:
            assert link_queue.pending_count(lib.db.conn) == 1  # and not linked: gated
            gate.touch()
            deadline = time.monotonic() + 60
            while link_queue.pending_count(lib.db.conn) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert link_queue.pending_count(lib.db.conn) == 0
            assert "teamatlas" in {e[0] for e in lib.graph.snapshot()[0]}


def test_a_library_from_before_the_queue_has_every_document_linked(tmp_path: Path) -> None:
    """Migration 13 on a library the one path built: the queue starts empty, its
    entities and relations stay, nothing is linked twice."""
    folder, home = tmp_path / "notes", tmp_path / "home"
    _write_folder(folder, filler=0)
    with _library(home) as lib:
        lib.folders.add_folder(folder, "corpus")
        lib.folders.sync("corpus")
        before = linked_rows(lib)
        with lib.db.write() as conn:  # as the library was at schema 12
            conn.execute("DROP TABLE link_queue")
            conn.execute("DROP TABLE kw_totals")  # and 14's keyword totals
            conn.execute("PRAGMA user_version = 12")
    with _library(home) as lib:
        assert lib.catalog.overview().health["entities_and_relations"] == "current"
        assert lib.links.run().linked == 0
        assert linked_rows(lib) == before


def test_cli_add_says_keyword_search_works_before_it_links(tmp_path: Path, kb_cli) -> None:
    folder = tmp_path / "notes"
    _write_folder(folder, filler=0)
    done = kb_cli("add", str(folder), "--yes")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    searchable = lines.index(
        "keyword search works now; recording entities and relations of 6 documents"
    )
    assert lines[searchable + 1].startswith("entities and relations: 6 documents in ")
    listed = kb_cli("list")
    assert "entities_and_relations=current" in listed.stdout


def test_one_process_links_a_library_at_a_time(tmp_path: Path) -> None:
    """Another process's run holds the library's linking lock: a run that must not wait
    (the server's) leaves the queue to it; once it is released the queue is linked."""
    folder, home = tmp_path / "notes", tmp_path / "home"
    _write_folder(folder, filler=0)
    with _library(home) as lib:
        lib.folders.add_folder(folder, "corpus")
        lib.folders.sync("corpus", link=False)
        other = FileLock(home / "locks" / f"{links.LOCK_NAME}.lock")
        assert other.acquire()
        try:
            assert lib.links.run(wait=False) is None
            assert link_queue.pending_count(lib.db.conn) == 6
        finally:
            other.release()
        assert lib.links.run(wait=False).linked == 6
