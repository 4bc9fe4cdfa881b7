"""Whether a document states settled fact, or is speculation / obsolete. Pure.

Search ranks drafts, proposals and obsolete documents below settled ones that answer the
same question (``search/freshness.py``). The status comes from the author's own words:
a frontmatter ``status:`` when there is one, else the conventional title prefixes teams
put on speculative writing ("Proposal:", "RFC", "Draft", "Spike:", "What if …").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

CURRENT = "current"
SPECULATIVE = "speculative"
OBSOLETE = "obsolete"

_SPECULATIVE_STATUS = frozenset(
    "draft proposed proposal idea rfc speculative brainstorm exploring spike wip".split()
)
_OBSOLETE_STATUS = frozenset(
    "deprecated obsolete superseded rejected withdrawn retracted archived abandoned".split()
)
_SPECULATIVE_TITLE = re.compile(
    r"^\s*(?:\[?(?:draft|wip)\]?\b|proposal\b|rfc\b|idea\b|spike\b|musing\b|brainstorm\b|"
    r"what if\b|should we\b|could we\b)",
    re.IGNORECASE,
)


def classify_status(title: str, meta: Mapping[str, Any]) -> str:
    """``current``, ``speculative`` or ``obsolete``; frontmatter status wins over the title."""
    declared = str(meta.get("status") or "").strip().lower()
    if declared in _SPECULATIVE_STATUS:
        return SPECULATIVE
    if declared in _OBSOLETE_STATUS:
        return OBSOLETE
    if not declared and _SPECULATIVE_TITLE.match(title):
        return SPECULATIVE
    return CURRENT
