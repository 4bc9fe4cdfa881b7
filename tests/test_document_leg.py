"""The document leg: documents ranked as wholes by bm25 over ``docs_fts`` (issue 21).

Guards against: a document whose question words sit in different passages losing to one
passage holding more of them (the leg's reason to exist); the documents' index drifting
from the passages' (a replaced, rewritten or removed document still found by its old
words, or missing); a library built before the index never getting it (migration 12);
a scoped search answering from another source; CJK questions that address the index
differently from the passages' one; damage to the index going unreported.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from library_checks import integrity_problems, keyword_library, write_notes

from kb_mcp.index.columns import head_text
from kb_mcp.ingest import filework, pipeline
from kb_mcp.ingest.pipeline import rewrite_in_place
from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings
from kb_mcp.store import documents as rows

QUESTION = "quorum fencing lease"
RUNBOOK = (
    "# Failover runbook\n\n## Voters\n\nThe cluster keeps a quorum of three voters.\n\n"
    "## Isolation\n\nA stale primary is fenced off the storage network.\n\n"
    "## Timing\n\nA leader lease lasts nine seconds.\n"
)
GLOSSARY = (
    "# Glossary\n\nQuorum and fencing are both terms of distributed storage, defined in "
    "the course notes.\n"
)
FILLER = {
    f"note-{i}.md": f"# Note {i}\n\n{topic}\n"
    for i, topic in enumerate(
        [
            "The build runs on every push to the main branch.",
            "Invoices are sent on the first working day of the month.",
            "The office closes at six on Fridays.",
            "Backups are copied to a second region every night.",
            "New starters get a laptop on their first morning.",
            "The style guide asks for short sentences.",
            "The office lease ends in May.",
        ]
    )
}
NOTES = {"runbook.md": RUNBOOK, "glossary.md": GLOSSARY, **FILLER}


def _ranked(library: Library, question: str, legs: tuple[str, ...], **kwargs: object) -> list[str]:
    result = library.lookup.search(question, top_k=5, legs=legs, **kwargs)  # type: ignore[arg-type]
    return [Path(h.path or "").name for h in result.hits]


def _document_rows(library: Library) -> int:
    return library.db.conn.execute("SELECT count(*) FROM docs_fts").fetchone()[0]


def test_document_leg_ranks_a_document_by_words_spread_over_its_passages(
    tmp_path: Path,
) -> None:
    """No passage of the runbook holds more than one of the question's words, the
    glossary's one passage holds two: passages rank the glossary first, the document leg
    the runbook, which holds all three; its hit cites one of the runbook's passages."""
    with keyword_library(tmp_path, NOTES) as library:
        wanted = {w: set(library.fts.tokens(w)) for w in QUESTION.split()}
        passages = library.db.conn.execute(
            "SELECT c.heading_path, c.text, d.title FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE d.title = 'Failover runbook'"
        ).fetchall()
        assert len(passages) == 3
        for path, text, title in passages:
            held = set(library.fts.tokens(f"{head_text(title, json.loads(path))}\n{text}"))
            assert sum(1 for tokens in wanted.values() if tokens <= held) == 1
        assert _ranked(library, QUESTION, ("keyword",))[0] == "glossary.md"
        assert _ranked(library, QUESTION, ("document",))[:2] == ["runbook.md", "glossary.md"]
        first = library.lookup.search(QUESTION, legs=("document",)).hits[0]
        assert first.legs == ("document",) and "lease" in first.text.lower()


def test_document_leg_fuses_with_the_keyword_leg_by_document(tmp_path: Path) -> None:
    """Named together, each document is one hit holding both legs' contributions."""
    with keyword_library(tmp_path, NOTES) as library:
        result = library.lookup.search(QUESTION, legs=("keyword", "document"))
        names = [Path(h.path or "").name for h in result.hits]
        assert sorted(names[:2]) == ["glossary.md", "runbook.md"]
        assert len(names) == len(set(names))
        assert all(set(h.legs) == {"keyword", "document"} for h in result.hits[:2])
        assert result.mode == "keyword"  # both legs are bm25's: not a hybrid search


def test_document_index_follows_a_replaced_and_a_removed_file(tmp_path: Path) -> None:
    """Edited: found by its new words, not its old ones; deleted: gone; one index row
    per document throughout (``library_checks``)."""
    with keyword_library(tmp_path, NOTES) as library:
        notes = tmp_path / "notes"
        (notes / "runbook.md").write_text(RUNBOOK.replace("lease", "heartbeat"), "utf-8")
        library.folders.sync()
        assert "runbook.md" not in _ranked(library, "lease", ("document",))
        assert _ranked(library, "heartbeat", ("document",)) == ["runbook.md"]
        assert _document_rows(library) == len(NOTES)
        (notes / "runbook.md").unlink()
        library.folders.sync()
        assert _ranked(library, "heartbeat voters", ("document",)) == []
        assert _document_rows(library) == len(NOTES) - 1
    assert integrity_problems(tmp_path / "home" / DB_FILE) == []


def test_document_index_follows_a_text_rewritten_in_place(tmp_path: Path) -> None:
    """A stored text rewritten under its id (what the stored-redaction upgrade does)."""
    with keyword_library(tmp_path, NOTES) as library:
        conn = library.db.conn
        (doc_id,) = conn.execute("SELECT id FROM documents WHERE title = 'Glossary'").fetchone()
        old = rows.get_document_by_id(conn, doc_id)
        assert old is not None
        with library.db.write() as conn:
            text = "# Glossary\n\nA witness is a voter that holds no data.\n"
            rewrite_in_place(conn, old, text=text, title="Glossary", uri=old.uri, tags=old.tags)
        assert _ranked(library, "fencing", ("document",)) == ["runbook.md"]
        assert _ranked(library, "witness", ("document",)) == ["glossary.md"]
    assert integrity_problems(tmp_path / "home" / DB_FILE) == []


def test_document_row_of_a_large_file_is_the_whole_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large file, stored and indexed a few passages at a time, gets the row the
    whole-file path writes: the document leg scores it the same."""
    sections = [
        f"## Part {n}\n\nRoutine paragraph number {n} about nothing much.\n" for n in range(60)
    ]
    sections[5] += "The quorum is three voters.\n"
    sections[50] += "A leader lease lasts nine seconds.\n"
    notes = {"big.md": "# Big handbook\n\n" + "\n".join(sections), **FILLER}
    with keyword_library(tmp_path / "whole", notes) as library:
        whole = library.lookup.search("quorum lease", legs=("document",)).hits
    monkeypatch.setattr(filework, "LARGE_FILE_BYTES", 1_000)
    monkeypatch.setattr(pipeline, "LARGE_SLICE_CHUNKS", 4)
    sliced_paths: list[str] = []
    in_slices = pipeline._index_in_slices

    def recorded(conn: apsw.Connection, document_id: int, doc: object, chunks: object) -> int:
        sliced_paths.append(getattr(doc, "title", ""))
        return in_slices(conn, document_id, doc, chunks)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "_index_in_slices", recorded)
    with keyword_library(tmp_path / "sliced", notes) as library:
        sliced = library.lookup.search("quorum lease", legs=("document",)).hits
    assert sliced_paths == ["Big handbook"]
    assert [(h.doc, h.leg_scores) for h in sliced] == [(h.doc, h.leg_scores) for h in whole]
    assert "Big handbook" in [h.title for h in whole]


def _as_before_the_index(db_path: Path, *, stale_representation: bool = False) -> None:
    """``db_path`` made a library of schema 11: no documents' index, as before it (nor
    the later migrations' tables: the link queue of 13, the keyword totals of 14)."""
    conn = apsw.Connection(str(db_path))
    conn.execute("DROP TABLE docs_fts")
    conn.execute("DROP TABLE link_queue")
    conn.execute("DROP TABLE kw_totals")
    conn.execute("PRAGMA user_version = 11")
    if stale_representation:
        conn.execute("UPDATE meta SET value = 'older' WHERE key = 'fts_version'")
    conn.close()


def test_migration_fills_the_document_index_of_an_older_library(tmp_path: Path) -> None:
    """Migration 12 indexes every document of a library built without the index, the
    same rows ingestion writes: the leg's scores are those of a library built new."""
    with keyword_library(tmp_path, NOTES) as library:
        built = library.lookup.search(QUESTION, legs=("document",)).hits
    _as_before_the_index(tmp_path / "home" / DB_FILE)
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        assert _document_rows(library) == len(NOTES)
        migrated = library.lookup.search(QUESTION, legs=("document",)).hits
    assert [(h.doc, h.score, h.leg_scores) for h in migrated] == [
        (h.doc, h.score, h.leg_scores) for h in built
    ]
    assert integrity_problems(tmp_path / "home" / DB_FILE) == []


def test_older_library_of_another_representation_gets_the_index_from_the_rebuild(
    tmp_path: Path,
) -> None:
    """The migration leaves a stale index to the first reader's rebuild (the table is
    made, so a write before it finds both tables); the rebuild fills it."""
    keyword_library(tmp_path, NOTES).close()
    _as_before_the_index(tmp_path / "home" / DB_FILE, stale_representation=True)
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        assert _document_rows(library) == 0
        assert _ranked(library, QUESTION, ("document",))[0] == "runbook.md"
        assert _document_rows(library) == len(NOTES)


def test_document_leg_answers_a_scoped_search_from_that_source_only(tmp_path: Path) -> None:
    with keyword_library(tmp_path, NOTES) as library:
        other = {"quorum.md": "# Quorum notes\n\nA quorum, a fencing token and a lease.\n"}
        library.folders.add_folder(write_notes(tmp_path / "other", other), name="other")
        library.folders.sync()
        assert _ranked(library, QUESTION, ("document",), source="other") == ["quorum.md"]
        everywhere = _ranked(library, QUESTION, ("document",))
        assert {"quorum.md", "runbook.md", "glossary.md"} <= set(everywhere)


def test_document_leg_matches_a_cjk_question_across_passages(tmp_path: Path) -> None:
    """The question's characters are addressed as the passages' index holds them: the
    document whose sections hold 人工智能 and 深度网络 apart comes first."""
    notes = {
        "ml.md": (
            "# 机器学习\n\n## 背景\n\n人工智能的研究由来已久。\n\n"
            "## 方法\n\n深度网络需要大量数据。\n"
        ),
        "other.md": "# 网络运维\n\n机房的网络设备每年检查一次。\n",
        **FILLER,
    }
    with keyword_library(tmp_path, notes) as library:
        assert _ranked(library, "人工智能 深度网络", ("document",))[0] == "ml.md"


def test_keyword_index_check_reports_a_damaged_document_index(tmp_path: Path) -> None:
    """``doctor``'s keyword index check reads the documents' index too."""
    with keyword_library(tmp_path, NOTES) as library:
        assert library.fts.integrity_problem() is None
        library.db.conn.execute(
            "UPDATE docs_fts_data SET block = substr(block, 1, 5) WHERE id > 10"
        )
        problem = library.fts.integrity_problem()
        assert problem is not None and "docs_fts" in problem


def test_cli_search_names_the_document_leg(
    tmp_path: Path, kb_cli: Callable[..., subprocess.CompletedProcess]
) -> None:
    keyword_library(tmp_path, NOTES).close()  # its home is the ``home`` fixture's
    done = kb_cli("search", "--legs", "keyword,document", QUESTION)
    assert done.returncode == 0, done.stderr
    assert "Failover runbook" in done.stdout
