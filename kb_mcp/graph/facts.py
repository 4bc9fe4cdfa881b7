"""What the LLM extractor states about one chunk, as values: typed entities and the
labelled relations between them. Pure.

Apart from ``graph/llm.py`` (the client that asks the model), so the graph's storage
(``index/graph_facts.py``) reads these without importing a network client.
"""

from __future__ import annotations

from dataclasses import dataclass

from kb_mcp.graph.resolve import entity_key


@dataclass(frozen=True, slots=True)
class LlmEntity:
    surface: str  # as written in the chunk
    kind: str  # one of extract.KINDS

    @property
    def key(self) -> str:
        return entity_key(self.surface)


@dataclass(frozen=True, slots=True)
class LlmRelation:
    source: LlmEntity
    label: str  # one of RELATIONS
    target: LlmEntity


@dataclass(frozen=True, slots=True)
class LlmFacts:
    """What the model found in one chunk, validated: every surface occurs in its text."""

    entities: tuple[LlmEntity, ...]
    relations: tuple[LlmRelation, ...]
