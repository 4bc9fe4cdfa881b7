"""A passage without a vector yet is not outranked for lacking one (issue 8: hybrid
search; found by a user trying kb-mcp on a real folder).

Failure guarded: a note an agent had just saved with ``add_document`` was first in the
keyword leg, but until the background embedding reached it the fused score counted only
that (1/61), and every document both legs found, even fourth in each (2/65), ranked
above it. The engine now stands in for the missing vector rank with the keyword rank,
under a leg name of its own, and only for documents the vector leg could not see.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from library_checks import embedded_library

from kb_mcp.index import vectors
from kb_mcp.library import Library
from kb_mcp.search.engine import UNEMBEDDED_LEG
from tests.hash_embedder import HashEmbedder

# Three notes about turbo modes in general, all embedded: each shares the question's
# common words, so both legs find them.
NOTES = {
    f"turbo-{n}.md": f"# Turbo mode {n}\n\nThe turbo mode of pump {n} raises the flow. "
    f"Turbo mode is switched on in the pump settings, mode turbo.\n"
    for n in range(3)
}
# And notes on other things, so one note waiting for its vector leaves the library's
# coverage above ``USABLE_COVERAGE`` (hybrid still runs).
NOTES |= {
    f"other-{n}.md": f"# Backup {n}\n\nThe nightly backup of volume {n} runs at 02:00.\n"
    for n in range(30)
}
QUESTION = "how do I switch on zorblax turbo mode"
NOTE = "# Zorblax\n\nZorblax turbo mode is switched on with `zorblax --turbo`.\n"


def _library(tmp_path: Path) -> Library:
    return embedded_library(tmp_path, NOTES, HashEmbedder(), allow_agent_writes=True)


def test_search_just_added_note_ranks_first_before_it_has_a_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The only note naming zorblax is first in hybrid while it waits for its vector and
    says so in its legs; once embedded and in the cached codes, nothing stands in for its
    vector rank."""
    with _library(tmp_path) as library:
        library.writing.add_document("Zorblax", NOTE, "t://zorblax")
        waiting = library.lookup.search(QUESTION, mode="hybrid")
        assert waiting.mode == "hybrid" and waiting.hits[0].title == "Zorblax"
        assert waiting.hits[0].legs == ("keyword", "document", UNEMBEDDED_LEG)
        assert all(UNEMBEDDED_LEG not in hit.legs for hit in waiting.hits[1:])
        library.vectors.embed_pending()
        monkeypatch.setattr(vectors, "RELOAD_CHECK_S", 0.0)  # the codes reload at once
        embedded = library.lookup.search(QUESTION, mode="hybrid")
        assert embedded.hits[0].title == "Zorblax" and "vector" in embedded.hits[0].legs
        assert all(UNEMBEDDED_LEG not in hit.legs for hit in embedded.hits)


def test_search_keyword_mode_has_no_stand_in_for_vectors(tmp_path: Path) -> None:
    """Keyword mode fuses one leg: nothing stands in for a vector leg that did not run."""
    with _library(tmp_path) as library:
        library.writing.add_document("Zorblax", NOTE, "t://zorblax")
        result = library.lookup.search(QUESTION, mode="keyword")
        assert result.hits[0].title == "Zorblax"
        assert all(set(hit.legs) <= {"keyword", "document", "feedback"} for hit in result.hits)


def test_search_just_embedded_note_ranks_first_before_the_cached_codes_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedded, but in the second before the vector index reloads its codes (found by a
    new user over MCP: a note saved with ``add_document`` came first, then vanished from
    the first results for about a second, then came back). Its vector is stored, so it
    counted as embedded, yet the vector leg could not see it and nothing stood in."""
    monkeypatch.setattr(vectors, "RELOAD_CHECK_S", 3600.0)  # that second, however slow the run
    with _library(tmp_path) as library:
        assert library.lookup.search(QUESTION, mode="hybrid").mode == "hybrid"  # codes cached now
        library.writing.add_document("Zorblax", NOTE, "t://zorblax")
        library.vectors.embed_pending()  # stored; cached codes are checked at most once a second
        result = library.lookup.search(QUESTION, mode="hybrid")
        assert result.mode == "hybrid" and result.hits[0].title == "Zorblax"
        assert result.hits[0].legs == ("keyword", "document", UNEMBEDDED_LEG)
