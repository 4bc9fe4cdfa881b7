"""The ``--legs`` flag ``kb-mcp search`` and the benches take: its help and its parse.

Apart from ``cli/main.py`` so ``cli/bench.py`` reads it without importing back the
module that imports it."""

from __future__ import annotations

LEGS_HELP = (
    "comma-separated legs to run instead of the mode's plan: "
    "any of keyword, vector, graph, document, feedback"
)


def parse_legs(text: str | None) -> list[str] | None:
    """``--legs keyword,graph`` → the leg names (validated by the library)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]
