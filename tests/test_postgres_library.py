"""A library on PostgreSQL (issue 24) answers as the same library on SQLite does.

The same agent documents are added through ``Library`` to a library on a real
PostgreSQL server (fixture ``postgres_url``) and to one in a SQLite file; search in
keyword and default modes, read, grep and list must give the same answers, scores and
cites included. A second ``Library`` on the same URL with a home of its own (another
machine's server) sees what the first one wrote.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from team_notes import DOCUMENTS, QUESTIONS

from kb_mcp.errors import InvalidInput, NotFound
from kb_mcp.index.postgres import keyword_merge
from kb_mcp.ingest import readahead
from kb_mcp.library import Library
from kb_mcp.render import overview_text
from kb_mcp.settings import Settings, Store


def _settings(home: Path, store: Store | None = None) -> Settings:
    # No embedder: the default mode answers from the keyword legs on both stores alike
    # (tests/test_postgres_hybrid.py has the vectors).
    return dataclasses.replace(
        Settings(home=home), allow_agent_writes=True, embedder="none", store=store or Store()
    )


def _filled(settings: Settings) -> Library:
    library = Library(settings)
    for title, content, uri, tags in DOCUMENTS:
        library.writing.add_document(title, content, uri, tags)
    return library


@pytest.fixture
def both(tmp_path: Path, postgres_url: str) -> Iterator[tuple[Library, Library]]:
    """The same documents in a SQLite library and in one on the PostgreSQL server."""
    sqlite = _filled(_settings(tmp_path / "sqlite"))
    postgres = _filled(_settings(tmp_path / "postgres", Store(postgres_url)))
    try:
        yield sqlite, postgres
    finally:
        sqlite.close()
        postgres.close()


def _answers(hits: tuple) -> list[tuple]:
    return [(h.doc, h.score, h.cite, h.text, h.leg_scores, h.legs) for h in hits]


@pytest.mark.parametrize("mode", ["keyword", "auto"])
def test_search_ranks_as_the_sqlite_library_does(both: tuple[Library, Library], mode: str) -> None:
    sqlite, postgres = both
    for question in QUESTIONS:
        want = sqlite.lookup.search(question, mode=mode)
        got = postgres.lookup.search(question, mode=mode)
        assert want.hits, question  # the comparison means something
        assert _answers(got.hits) == _answers(want.hits), question
        assert (got.mode, got.reason) == (want.mode, want.reason)


def test_read_grep_and_list_answer_as_the_sqlite_library_does(
    both: tuple[Library, Library],
) -> None:
    sqlite, postgres = both
    for _title, _content, uri, _tags in DOCUMENTS:
        want, got = sqlite.lookup.read(uri), postgres.lookup.read(uri)
        assert (got.doc, got.text, got.title, got.tags, got.path) == (
            want.doc,
            want.text,
            want.title,
            want.tags,
            want.path,
        )
        hit = postgres.lookup.search(_title, mode="keyword").hits[0]
        assert postgres.lookup.read(hit.cite).text == sqlite.lookup.read(hit.cite).text
    for pattern in ("gateway", "Redis", "health"):
        assert postgres.lookup.grep(pattern).matches == sqlite.lookup.grep(pattern).matches
    listed = [
        [(d.doc, d.title, d.path) for d in library.catalog.list_source("agent").documents]
        for library in (sqlite, postgres)
    ]
    assert listed[1] == listed[0] and len(listed[0]) == len(DOCUMENTS)
    overview = postgres.catalog.overview()
    assert (overview.documents, overview.health["database"]) == (len(DOCUMENTS), "ok")


def test_a_second_server_on_the_same_url_sees_the_first_ones_document(
    tmp_path: Path, postgres_url: str
) -> None:
    first = Library(_settings(tmp_path / "machine-a", Store(postgres_url)))
    second = Library(_settings(tmp_path / "machine-b", Store(postgres_url)))
    try:
        assert second.lookup.search("gateway", mode="keyword").hits == ()
        title, content, uri, tags = DOCUMENTS[0]
        added = first.writing.add_document(title, content, uri, tags)
        hits = second.lookup.search("restart the gateway", mode="keyword").hits
        assert [h.doc for h in hits] == [added.doc]
        assert second.lookup.read(added.doc).text == first.lookup.read(added.doc).text
        assert [m.line_number for m in second.lookup.grep("gateway").matches] == [
            m.line_number for m in first.lookup.grep("gateway").matches
        ]
        assert [d.doc for d in second.catalog.list_source("agent").documents] == [added.doc]
        second.writing.add_document(title, "# Deploy\n\nDrain the load balancer first.\n", uri)
        assert first.lookup.search("restart the gateway", mode="keyword").hits == ()
        assert [h.doc for h in first.lookup.search("drain", mode="keyword").hits] == [added.doc]
        assert len(first.catalog.list_source("agent").documents) == 1
    finally:
        first.close()
        second.close()


async def _tool_answers(client) -> dict[str, object]:
    """What each read-side tool answers after the documents are added over MCP."""
    for title, content, uri, tags in DOCUMENTS:
        added = await client.call_tool(
            "add_document", {"title": title, "content": content, "source_uri": uri, "tags": tags}
        )
        assert added.structured_content["outcome"] == "created"
    answers: dict[str, object] = {}
    for question in QUESTIONS:
        found = await client.call_tool("search", {"query": question, "mode": "keyword"})
        answers[f"search {question}"] = found.structured_content
    first = answers[f"search {QUESTIONS[0]}"]["results"][0]["cite"]  # type: ignore[index]
    read = (await client.call_tool("read", {"doc": first})).structured_content
    answers["read"] = {k: v for k, v in read.items() if not k.endswith("_at")}
    answers["grep"] = (await client.call_tool("grep", {"pattern": "gateway"})).structured_content
    listed = (await client.call_tool("list", {"source": "agent"})).structured_content
    answers["list"] = [(d["doc"], d["title"], d["path"]) for d in listed["documents"]]
    return answers


@pytest.mark.anyio
async def test_the_tools_over_stdio_answer_as_on_the_sqlite_library(
    spawn_mcp, child_env: dict[str, str], postgres_url: str, tmp_path: Path
) -> None:
    """``kb-mcp serve`` with ``KB_MCP_STORE`` naming the server: add_document, search,
    read, grep and list give what the same calls give a server on a SQLite home."""
    answers = []
    for name, env in (
        ("sqlite", child_env),
        ("postgres", child_env | {"KB_MCP_STORE": postgres_url}),
    ):
        home = tmp_path / name
        log = tmp_path / f"{name}.log"
        async with spawn_mcp(home, log_file=log, allow_agent_writes=True, env=env) as client:
            answers.append(await _tool_answers(client))
        assert not (home / "kb.db").exists() or name == "sqlite"
    assert answers[0]["search restart the gateway"]["results"]  # type: ignore[index]
    assert answers[1] == answers[0]


def test_a_large_addition_is_merged_into_the_keyword_index_and_ranks_alike(
    tmp_path: Path, postgres_url: str
) -> None:
    """After its linking run, a library merges the keyword delta once it is due, on
    PostgreSQL its own index's (``keyword_merge``), not SQLite's postings; the merged
    index ranks as the SQLite library does."""
    steps = "".join(
        f"## Step {i}\n\nCheck valve {i} of pump {i % 7} before the restart; "
        f"note pressure {i * 3}.\n\n"
        for i in range(keyword_merge.DELTA_MIN + 100)
    )
    libraries = [
        Library(_settings(tmp_path / "sqlite")),
        Library(_settings(tmp_path / "postgres", Store(postgres_url))),
    ]
    try:
        for library in libraries:
            library.writing.add_document("Plant checklist", steps, "agent://plant")
            library.writing.add_document(*DOCUMENTS[0][:3])
        with libraries[1].db.conn.pinned() as pg:
            assert not keyword_merge.merge_due(pg)  # merged: the delta is empty again
            assert pg.execute("SELECT generation FROM kw_segment").fetchone() is not None
        for question in ("pump 3 valve pressure", "restart the gateway"):
            want, got = (lib.lookup.search(question, mode="keyword") for lib in libraries)
            assert want.hits and _answers(got.hits) == _answers(want.hits)
    finally:
        for library in libraries:
            library.close()


def test_many_queued_documents_are_linked_on_postgresql_too(
    tmp_path: Path, postgres_url: str
) -> None:
    """Past ``readahead.PARALLEL_MIN_FILES`` queued documents the linking phase computes
    in worker processes that open the SQLite file; a PostgreSQL library links them in
    its own process instead, every one of them."""
    library = Library(_settings(tmp_path / "home", Store(postgres_url)))
    try:
        for n in range(readahead.PARALLEL_MIN_FILES):
            library.writing.add_document(
                f"Note {n}",
                f"Service svc-{n} calls the Gateway API.\n",
                f"agent://n/{n}",
                link=False,
            )
        assert library.links.pending() == readahead.PARALLEL_MIN_FILES
        report = library.links.run()
        assert report is not None and library.links.pending() == 0
    finally:
        library.close()


@pytest.mark.parametrize("rebuild", [False, True])
def test_a_reindex_from_another_home_drops_nothing(
    tmp_path: Path, postgres_url: str, rebuild: bool
) -> None:
    """On PostgreSQL a reindex rebuilds from the database's own copy of the text, not
    from its home's files, which hold only what this writer wrote: every other writer's
    document is kept (tests/test_postgres_reindex.py has the rest)."""
    first = _filled(_settings(tmp_path / "machine-a", Store(postgres_url)))
    second = Library(_settings(tmp_path / "machine-b", Store(postgres_url)))
    try:
        second.writing.reindex(rebuild=rebuild)
        assert len(first.catalog.list_source("agent").documents) == len(DOCUMENTS)
    finally:
        first.close()
        second.close()


def test_a_nul_character_is_refused_in_clear_words_and_changes_nothing(
    both: tuple[Library, Library],
) -> None:
    """PostgreSQL's text cannot hold U+0000; SQLite's can. Content with a NUL is refused
    on both stores alike, and a lookup key with one is ``InvalidInput`` on PostgreSQL
    (``NotFound`` on SQLite, where it is merely absent), never psycopg's own error."""
    sqlite, postgres = both
    before = [library.catalog.overview().documents for library in both]
    for library in both:
        with pytest.raises(InvalidInput, match=r"NUL character \(U\+0000\) at line 1, column 4"):
            library.writing.add_document("Zero byte", "abc\x00def", "notes://nul")
    with pytest.raises(NotFound):
        sqlite.lookup.read("notes://team\x00")
    with pytest.raises(InvalidInput, match=r"NUL character \(U\+0000\)"):
        postgres.lookup.read("notes://team\x00")
    assert [library.catalog.overview().documents for library in both] == before


def test_list_names_the_shared_store_before_this_home(both: tuple[Library, Library]) -> None:
    """A shared library is the store, not this home's folder: ``list`` says so first."""
    sqlite, postgres = both
    assert sqlite.catalog.overview().store is None
    store = postgres.catalog.overview().store
    assert store is not None and store.startswith("postgresql://")
    assert overview_text(sqlite.catalog.overview()).startswith(f"library: {sqlite.home} — ")
    assert overview_text(postgres.catalog.overview()).startswith(
        f"library: {store} (shared; home {postgres.home}) — "
    )
