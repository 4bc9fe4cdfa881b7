"""The naive FTS5 baseline ``kb-mcp bench perf`` measures kb-mcp against.

What someone would write in an afternoon: one FTS5 table holding each passage's title and
text as they are, the same tokenizer as ours, every query word quoted and OR-ed, ranked
by ``bm25``. No index copy (so CJK runs stay whole tokens), no stopwords, no pruning, no
citation work. It lives beside the real index because it is SQL; nothing but the bench
uses it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import apsw

from kb_mcp.index.textprep import FTS_TOKENIZER

_WORD = re.compile(r"\w+")


class NaiveIndex:
    """One FTS5 table in its own database file."""

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS naive USING fts5(title, body, "
            f"tokenize='{FTS_TOKENIZER}')"
        )

    def add(self, passages: Iterable[tuple[str, str]]) -> None:
        """Insert ``(title, text)`` rows in one transaction."""
        with self.conn:
            self.conn.executemany("INSERT INTO naive(title, body) VALUES (?, ?)", passages)

    @staticmethod
    def expression(query: str) -> str | None:
        """Every word of ``query`` quoted, OR-ed; None when it has no word."""
        words = _WORD.findall(query)
        return " OR ".join('"' + w + '"' for w in words) if words else None

    def search(self, query: str, top_k: int = 10) -> list[tuple[int, str, str]]:
        """``(rowid, title, text)`` of the best ``top_k`` passages by bm25."""
        expression = self.expression(query)
        if expression is None:
            return []
        return self.conn.execute(
            "SELECT rowid, title, body FROM naive WHERE naive MATCH ? ORDER BY bm25(naive) LIMIT ?",
            (expression, top_k),
        ).fetchall()

    def close(self) -> None:
        self.conn.close()


def serve_lines(path: Path) -> None:
    """Answer one query per stdin line with one JSON line of ``search`` results: the naive
    table behind a pipe, so ``kb-mcp bench perf --stdio`` times both sides as a client
    does. No protocol beyond the lines (JSON-RPC framing would only cost it)."""
    index = NaiveIndex(path)
    for line in sys.stdin:
        hits = index.search(line.rstrip("\n"), 10)
        sys.stdout.write(json.dumps([[r, t, b] for r, t, b in hits], ensure_ascii=False) + "\n")
        sys.stdout.flush()
    index.close()


if __name__ == "__main__":
    serve_lines(Path(sys.argv[1]))
