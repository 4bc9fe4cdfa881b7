"""The search engine's contract on result counts and order (issue 7 items 12 and 22).

A real folder synced into a real ``kb.db``: a few long documents match the query in
dozens of passages each, many short ones match it once. Searches must still return
``top_k`` documents, and a document's rank must not depend on ``top_k``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.settings import Settings

LONG_DOCUMENTS = 3
SECTIONS_PER_LONG_DOCUMENT = 40
SHORT_DOCUMENTS = 30


def _long_document(n: int) -> str:
    sections = [
        f"## Widget calibration step {i}\n\nCalibrate the widget: widget torque, widget "
        f"alignment, widget gauge {i} for manual {n}.\n"
        for i in range(SECTIONS_PER_LONG_DOCUMENT)
    ]
    return f"# Widget manual {n}\n\n" + "\n".join(sections)


def _short_document(n: int) -> str:
    filler = " ".join(f"note{n}word{i}" for i in range(60))
    return f"# Field note {n}\n\nOnce we saw a widget near the depot. {filler}\n"


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """A library where 3 documents hold 120 of the 150 passages that match "widget"."""
    base = tmp_path_factory.mktemp("crowded")
    folder = base / "notes"
    folder.mkdir()
    for n in range(LONG_DOCUMENTS):
        (folder / f"manual-{n}.md").write_text(_long_document(n), encoding="utf-8")
    for n in range(SHORT_DOCUMENTS):
        (folder / f"note-{n:02d}.md").write_text(_short_document(n), encoding="utf-8")
    library = Library(Settings(home=base / "home"))
    library.folders.add_folder(folder)
    library.folders.sync()
    yield library
    library.close()


@pytest.mark.parametrize("top_k", [1, 3, 5, 10, 20, 33])
def test_search_returns_top_k_documents_when_long_documents_match_many_passages(
    crowded: Library, top_k: int
) -> None:
    """issue 7 item 12: top_k 5 used to return 3 documents (the long ones ate the budget)."""
    hits = crowded.lookup.search("widget", top_k=top_k).hits
    assert len(hits) == top_k
    assert len({h.doc for h in hits}) == top_k


def test_search_returns_every_matching_document_when_fewer_than_top_k_match(
    crowded: Library,
) -> None:
    """issue 7 item 12: the read goes deeper until the matches run out, then stops."""
    hits = crowded.lookup.search("widget", top_k=100).hits
    assert len(hits) == LONG_DOCUMENTS + SHORT_DOCUMENTS


def test_search_rank_of_a_document_does_not_depend_on_top_k(crowded: Library) -> None:
    """issue 7 item 12: the first 5 of top_k 20 are exactly the results of top_k 5."""
    widest = [h.doc for h in crowded.lookup.search("widget", top_k=33).hits]
    for top_k in (1, 3, 5, 10, 20):
        assert [h.doc for h in crowded.lookup.search("widget", top_k=top_k).hits] == widest[:top_k]
        assert [h.rank for h in crowded.lookup.search("widget", top_k=top_k).hits] == list(
            range(1, top_k + 1)
        )


def test_search_scoped_to_a_source_also_returns_top_k_documents(crowded: Library) -> None:
    """issue 7 item 12: the source-scoped query reads deeper in the same way."""
    hits = crowded.lookup.search("widget", top_k=10, source="notes").hits
    assert len({h.doc for h in hits}) == 10


def test_search_empty_library_says_it_is_empty_and_how_to_add(tmp_path: Path) -> None:
    """issue 7 item 22: an empty library is not "no passage matches"."""
    with Library(Settings(home=tmp_path / "home")) as library:
        result = library.lookup.search("anything at all")
    assert result.hits == ()
    assert result.reason is not None
    assert "library is empty" in result.reason
    assert "kb-mcp add PATH" in result.reason


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """A project folder whose test file repeats the feature's words more than its doc page."""
    base = tmp_path_factory.mktemp("project")
    root = base / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "docs" / "timeouts.md").write_text(
        "# Timeouts\n\nSet how long the client waits for a request, in seconds.\n",
        encoding="utf-8",
    )
    (root / "tests" / "test_timeouts.py").write_text(
        "def test_request_timeout():\n    # set a request timeout on the client\n"
        "    assert client.get(url, timeout=1.0)\n\n\n"
        "def test_client_timeout_request():\n    assert request_timeout(client) == 5\n",
        encoding="utf-8",
    )
    for n in range(20):  # unrelated pages, so bm25's idf weighs the query's words
        (root / "docs" / f"page-{n}.md").write_text(
            f"# Page {n}\n\nNotes on topic {n}: colours, shapes and widgets.\n",
            encoding="utf-8",
        )
    library = Library(Settings(home=base / "home"))
    library.folders.add_folder(root)
    library.folders.sync()
    yield library
    library.close()
