"""Secrets in the entity graph, document relations and the graph's LLM facts (issue 11).

``tests/test_secrets_corpus.py`` ingests every kind of secret through every source and
scans every table. This module puts the same values where the graph and the relation
detector look hardest: a title, a heading, backticks, bold, a ``#tag``, frontmatter
``supersedes`` / ``corrects`` / ``withdraws`` / ``superseded_by`` values and the prose
shapes relations are read from ("Errata for …", "WITHDRAWN: …"), in an ``add_document``
and in a folder file. The LLM pass runs against ``tests/ollama_server.py`` playing a
hostile model that answers every chunk with the seeded secrets as entities and typed
relations. Then no value may be in what the graph and the relations derived (entities,
their aliases, mentions, relation labels, ``doc_relations``' references and evidence,
``supersessions``, the LLM pass's markers in ``meta``: every text cell of those tables,
read through ``library_checks.text_cells``), in a prompt sent to the model, or in what
``entities`` and ``read`` return, unless the stored text of a document holds it too: a
value the redactor misses in its context is the redaction rules' gap, not the graph's. The
three such gaps the second pass reported are fixed (``tests/test_redact_in_context.py``), so
the stored text must hold none either.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from library_checks import text_cells
from ollama_server import OllamaServer
from test_secrets_corpus import CORPUS

from kb_mcp.library import DB_FILE, Library
from kb_mcp.settings import Settings

MODEL = "qwen3:0.6b"
# Tables whose rows the graph and the relation detector derive from the text.
DERIVED = frozenset(
    {"entities", "mentions", "entity_relations", "entity_facts", "doc_relations", "supersessions"}
)
# Where a document's own (redacted) text is kept.
STORED_TEXT = frozenset({("documents", "text"), ("chunks", "text"), ("chunks", "heading_path")})
# Kinds whose value is a secret on one line by itself (a PEM body line is one only inside
# its block, which cannot be a heading or a frontmatter value; a CSV row without a key id
# only under its header). Issue 20's multi-line classes likewise: a table row under its
# header, a block or heredoc line under its key, a wrapped or concatenated value's pieces.
NEEDS_CONTEXT = frozenset(
    {
        *("pem_private_key", "aws_secret_far_from_header", "pipe_table_password"),
        *("yaml_block_scalar", "heredoc", "prose_wrapped", "token_concatenation"),
    }
)
ONE_LINE = {kind: v for kind, v in CORPUS.items() if kind not in NEEDS_CONTEXT}
EVERY_VALUE = [s for _name, _text, secrets in CORPUS.values() for s in secrets]


def secret_line(text: str, secret: str) -> str:
    """The part of ``text``'s line around ``secret`` that makes it recognisable."""
    line = next(line for line in text.splitlines() if secret in line)
    at = line.index(secret)
    return line[max(0, at - 60) : at + len(secret) + 20].strip()


def hostile_document(kind: str, text: str, secret: str) -> str:
    """The secret where the graph and the relation detector look."""
    line = secret_line(text, secret)
    front = {
        "supersedes": [line],
        "corrects": line,
        "withdraws": [line],
        "superseded_by": line,
        "tags": [line],
    }
    return (
        f"---\n{json.dumps(front)}\n---\n# Errata for {line}\n\n"
        f"WITHDRAWN: {line}\n\nThe `{line}` and **{line}** of #{kind}.\n\n{text}\n"
    )


def hostile_model(body: dict[str, Any]) -> str:
    """A model that names every seeded secret as an entity and relates them."""
    entities = [{"name": s[:80], "type": "system"} for s in EVERY_VALUE[:20]]
    relations = [
        {"source": a[:80], "relation": "depends_on", "target": b[:80]}
        for a, b in itertools.pairwise(EVERY_VALUE[:11])
    ]
    return json.dumps({"entities": entities, "relations": relations})


def test_secrets_never_reach_entities_relations_or_the_graph_model(
    tmp_path: Path, ollama_server: OllamaServer, figures
) -> None:
    """issue 11 (secrets: entity names and aliases, doc_relations references and
    evidence, the LLM's facts and the prompts it is sent)."""
    ollama_server.chat_reply = hostile_model
    folder = tmp_path / "notes"
    folder.mkdir()
    settings = Settings(
        home=tmp_path / "home",
        embedder="none",
        allow_agent_writes=True,
        graph_extractor="ollama",
        ollama_host=ollama_server.url,
        graph_model=MODEL,
    )
    placed = 0
    for kind, (_name, text, secrets) in ONE_LINE.items():
        for n, secret in enumerate(secrets):
            (folder / f"{kind}-{n}.md").write_text(hostile_document(kind, text, secret))
            placed += 1
    with Library(settings) as library:
        library.folders.add_folder(folder)
        [report] = library.folders.sync()
        assert report.failures == []
        for kind, (_name, text, secrets) in ONE_LINE.items():
            for n, secret in enumerate(secrets):
                line = secret_line(text, secret)
                library.writing.add_document(
                    f"Errata for {line}", hostile_document(kind, text, secret), f"t://{kind}/{n}"
                )
        enriched = library.enrichment.run()
        assert enriched is not None and enriched.error is None and enriched.enriched > 0
        entities = library.entities.find(None, 100)
        named = [library.entities.find(s[:40], 20) for s in EVERY_VALUE]
        keys = [row[0] for row in library.db.query("SELECT doc_key FROM documents")]
        reads = [library.lookup.read(key) for key in keys]
        relation_rows = library.db.query("SELECT count(*) FROM doc_relations")[0][0]
    cells = list(text_cells(settings.home / DB_FILE))
    stored = "\n".join(v for t, c, v in cells if (t, c) in STORED_TEXT)
    places = {
        "graph and relation tables": "\n".join(
            f"{t}.{c}: {v}" for t, c, v in cells if t in DERIVED or (t == "meta" and "graph" in v)
        ),
        "prompts to the model": json.dumps(ollama_server.chat_requests),
        "entities": repr(entities) + repr(named),
        "read's relations": "\n".join(repr(r.relations) for r in reads),
    }
    gaps = sorted(secret for secret in EVERY_VALUE if secret in stored)
    leaks = {
        secret: [place for place, found in places.items() if secret in found]
        for secret in EVERY_VALUE
        if secret not in gaps
    }
    leaks = {secret: where for secret, where in leaks.items() if where}
    assert leaks == {}, "\n".join(
        f"{secret}: {', '.join(where)}; e.g. {_context(places[where[0]], secret)}"
        for secret, where in leaks.items()
    )
    assert relation_rows > 0 and entities
    assert gaps == []  # issue 11: the three contexts the redactor missed are caught
    figures(
        "secrets",
        f"graph and relations: {placed} values x 2 sources x 9 positions, "
        f"{len(ollama_server.chat_requests)} LLM answers naming {len(EVERY_VALUE)} secrets: "
        f"0 in {len(places)} places; {len(gaps)} values the redactor missed in these "
        f"contexts (kept in the text itself): {', '.join(g[:6] + '…' for g in gaps)}",
    )


def _context(text: str, secret: str) -> str:
    at = text.index(secret)
    return repr(text[max(0, text.rfind("\n", 0, at)) : at + len(secret) + 20][:300])


def test_text_cells_reads_every_table_the_graph_and_relations_write(tmp_path: Path) -> None:
    """issue 11 (secrets): the scan ``library_checks.text_cells`` does covers entities,
    mentions, doc_relations and the LLM markers: a word stored there is found."""
    settings = Settings(home=tmp_path / "home", embedder="none")
    with Library(settings) as library:
        library.writing.add_document(
            "ADR-0002 Zebrafinch",
            "---\ncorrects: the Quokkaplan\n---\n# ADR-0002\n\nThe `ZebrafinchStore` runs.\n",
            "t://z",
            by_agent=False,
        )
    cells = {(table, column) for table, column, value in text_cells(settings.home / DB_FILE)
             if re.search("zebrafinch|quokkaplan", value, re.IGNORECASE)}  # fmt: skip
    assert {("entities", "name"), ("mentions", "surface"), ("doc_relations", "reference")} <= cells
