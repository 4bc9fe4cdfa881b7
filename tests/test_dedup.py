"""Identical files are one document; near-identical ones stay two and are reported."""

from __future__ import annotations

from pathlib import Path

from kb_mcp.ingest.dedup import NEAR_DUPLICATE, similarity
from kb_mcp.library import Library
from kb_mcp.settings import Settings

NOTE = "# Release checklist\n\n" + "".join(
    f"{n}. Check the {word} before the release.\n"
    for n, word in enumerate(["changelog", "migrations", "feature flags", "dashboards"] * 5)
)


def test_similarity_is_high_for_an_edited_copy_and_low_for_another_text() -> None:
    edited = NOTE.replace("dashboards", "alerts", 1)
    assert similarity(NOTE, edited) >= NEAR_DUPLICATE
    assert similarity(NOTE, "# Lunch menu\n\nSoup, bread, apples.\n") < NEAR_DUPLICATE


def test_near_duplicates_are_kept_apart_and_listed_identical_files_are_one(tmp_path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        folder.mkdir()
        (folder / "same.md").write_text(NOTE, encoding="utf-8")
    (two / "edited.md").write_text(NOTE.replace("dashboards", "alerts", 1), encoding="utf-8")
    (two / "other.md").write_text("# Release checklist\n\nAsk the on-call first.\n")
    with Library(Settings(home=tmp_path / "home")) as library:
        library.folders.add_folder(one, "one")
        library.folders.add_folder(two, "two")
        library.folders.sync()
        overview = library.catalog.overview()
        assert overview.documents == 3  # same.md twice is one document
        assert overview.health["near_duplicate_pairs"] == 1
        [pair] = overview.near_duplicates
        assert {pair.a, pair.b} == {"same.md", "edited.md"} and pair.similarity >= 90

        (two / "edited.md").unlink()
        library.folders.sync()
        assert library.catalog.overview().health["near_duplicate_pairs"] == 0


def test_an_older_database_gains_the_near_duplicate_table(tmp_path: Path) -> None:
    import apsw

    from kb_mcp.store.migrations import MIGRATIONS

    home = tmp_path / "home"
    home.mkdir()
    conn = apsw.Connection(str(home / "kb.db"))
    conn.execute(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    with Library(Settings(home=home)) as library:
        assert library.catalog.overview().health["near_duplicate_pairs"] == 0
        assert library.db.query("PRAGMA user_version")[0][0] == len(MIGRATIONS)
