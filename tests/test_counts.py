"""Per-source counts (``store/counts.py``, issue 12: the library page ≤ 100 ms at 100k
chunks also right after a change): the cheap counts equal what ``COUNT(DISTINCT ...)``
over every chunk said, on libraries built to take each path of the code: one folder (a
range count), an identical file at two paths, a document in two sources, a source whose
id range holds another's documents (the per-document fallback), failed files, a source
with nothing in it.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from kb_mcp.library import Library
from kb_mcp.settings import Settings
from kb_mcp.store.counts import failed_files, source_counts

# What the library page counted before issue 12's fix: every source's chunks through
# COUNT(DISTINCT) and a correlated IN (49 ms of CPU at 100k chunks), the reference here.
REFERENCE = (
    "SELECT l.source_id, COUNT(DISTINCT l.document_id), "
    "  (SELECT COUNT(*) FROM chunks c WHERE c.document_id IN "
    "     (SELECT document_id FROM locations WHERE source_id = l.source_id)), "
    "  SUM(l.state = 'failed') "
    "FROM locations l GROUP BY l.source_id"
)


def _reference(conn: apsw.Connection) -> dict[int, tuple[int, int, int]]:
    return {s: (d, c, f or 0) for s, d, c, f in conn.execute(REFERENCE).fetchall()}


def _note(n: int, sections: int) -> str:
    body = "".join(
        f"## Part {i} of note {n}\n\nText {i} about topic {n}.\n\n" for i in range(sections)
    )
    return f"# Note {n}\n\n{body}"


def _folder(root: Path, name: str, notes: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir()
    for rel, text in notes.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    return folder


def test_source_counts_equal_the_distinct_count_on_every_path(tmp_path: Path) -> None:
    """issue 12: the library page's numbers are unchanged by the cheaper counts."""
    shared = _note(99, 3)
    first = {f"n{i}.md": _note(i, 1 + i % 4) for i in range(6)}
    first |= {"a/same.md": shared, "b/same.md": shared, "broken.docx": "not a zip"}
    second = {f"m{i}.md": _note(100 + i, 2) for i in range(3)} | {"copy.md": shared}
    settings = Settings(home=tmp_path / "home", embedder="none", allow_agent_writes=True)
    with Library(settings) as library:
        library.folders.add_folder(_folder(tmp_path, "first", first), "first")
        library.folders.sync("first")
        # Agent documents between two syncs: ids inside "second"'s range belong to "agent".
        library.folders.add_folder(_folder(tmp_path, "second", second), "second")
        library.folders.sync("second")
        library.writing.add_document("Agent note", _note(7, 2), "t://agent/1")
        (tmp_path / "second" / "m9.md").write_text(_note(109, 5), encoding="utf-8")
        library.folders.sync("second")
        library.folders.add_folder(_folder(tmp_path, "empty", {}), "empty")
        library.folders.sync("empty")
        conn = library.db.conn
        got, want = source_counts(conn), _reference(conn)
        overview = {
            s.name: (s.documents, s.chunks, s.failed) for s in library.catalog.overview().sources
        }
    assert got == want
    assert overview["first"][0] == len(first) - 2  # the two identical paths hold one document
    assert overview["first"][2] == 1
    assert overview["second"][0] == len(second) + 1
    assert overview["empty"] == (0, 0, 0)
    assert sum(c for _d, c, _f in want.values()) > sum(d for d, _c, _f in want.values())


def test_source_counts_fallback_when_the_range_holds_another_source(tmp_path: Path) -> None:
    """issue 12: a source whose document ids interleave with another's is counted by its
    own documents, not by its id range (which would count the other's chunks too)."""
    settings = Settings(home=tmp_path / "home", embedder="none", allow_agent_writes=True)
    with Library(settings) as library:
        library.writing.add_document("Agent A", _note(1, 1), "t://agent/a")
        library.folders.add_folder(_folder(tmp_path, "f", {"x.md": _note(2, 6)}), "f")
        library.folders.sync("f")
        library.writing.add_document("Agent B", _note(3, 1), "t://agent/b")
        conn = library.db.conn
        got, want = source_counts(conn), _reference(conn)
        agent = conn.execute("SELECT id FROM sources WHERE kind = 'agent'").fetchone()[0]
        spanned = conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE document_id BETWEEN "
            "(SELECT MIN(document_id) FROM locations WHERE source_id = ?) AND "
            "(SELECT MAX(document_id) FROM locations WHERE source_id = ?)",
            (agent, agent),
        ).fetchone()[0]
    assert got == want
    assert got[agent][1] < spanned  # the folder's chunks lie inside the agent's id range


def test_failed_files_source_by_source_in_path_order_and_limited(tmp_path: Path) -> None:
    """issue 12: failed files with their reasons, as the per-source reads listed them."""
    bad = {"z.docx": "not a zip", "a.docx": "nor this", "ok.md": "# Fine\n\nText.\n"}
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        for name in ("one", "two"):
            library.folders.add_folder(_folder(tmp_path, name, bad), name)
        library.folders.sync()
        everything = failed_files(library.db.conn, 100)
        first_three = failed_files(library.db.conn, 3)
    assert [(s, p) for s, p, _r in everything] == [
        ("one", "a.docx"),
        ("one", "z.docx"),
        ("two", "a.docx"),
        ("two", "z.docx"),
    ]
    assert all(reason for _s, _p, reason in everything)
    assert first_three == everything[:3]
