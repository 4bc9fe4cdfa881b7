"""The index's view of a query: each term's tokens, their document frequencies, the chunk
count. Read once per search; the ranking features and the relation pass share it."""

from __future__ import annotations

from dataclasses import dataclass

from kb_mcp.index.fts import FtsIndex
from kb_mcp.search.query import Query


@dataclass(frozen=True, slots=True)
class UnitStats:
    """The index's view of a query: each term's tokens, their frequencies, the chunk count."""

    tokens: dict[str, list[str]]
    df: dict[str, int]
    chunks: int

    def unit_df(self) -> dict[str, int]:
        """A term's frequency is its rarest token's (0 when a token is not indexed at all)."""
        return {
            u: min((self.df.get(t, 0) for t in toks), default=0) for u, toks in self.tokens.items()
        }


def unit_stats(fts: FtsIndex, query: Query) -> UnitStats:
    tokens = {unit: fts.tokens(unit) for unit in (*query.phrases, *query.terms)}
    df = fts.doc_frequencies(t for toks in tokens.values() for t in toks)
    return UnitStats(tokens, df, fts.chunk_count())
