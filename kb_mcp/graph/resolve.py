"""One key per entity, whatever its spelling, and fuzzy lookup of a name among keys. Pure.

``entity_key`` folds the spellings people use for one thing into one key: case, width
(NFKC), and the separators inside a name (space, ``_``, ``-``), so ``BlobStore``,
``blobstore``, ``Blob Store`` and ``blob_store`` are one entity. Dots, ``@`` and ``#``
stay: ``kb.search`` is not ``kbsearch``, ``@alice`` (a handle) is not ``Alice``, and
``v2.3.1`` is not ``v23.1``.

Why exact keys at ingest and fuzzy matching only at lookup: a fuzzy merge while
indexing depends on the order documents arrive (so ``reindex --rebuild`` could give
another graph), and it merges what must stay apart (``v2.3.1`` / ``v2.3.2``,
``getUser`` / ``getUsers``, ``OPS-1042`` / ``OPS-1043``). A question's words are matched
fuzzily against the stored keys instead (``best_fuzzy``), where a wrong guess costs one
weaker leg hit, not a corrupted graph.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from rapidfuzz import fuzz, process

_SEPARATORS = re.compile(r"[\s_\-]+")
# rapidfuzz ratio (0-100) a question's word must reach to stand for a stored key: one
# edit in ten characters ("blobstores" → "blobstore", "kubernets" → "kubernetes").
FUZZY_CUTOFF = 90.0
FUZZY_MIN_CHARS = 6  # shorter words are matched exactly only: "api" is not "apis" / "ape"


@lru_cache(maxsize=65_536)
def entity_key(surface: str) -> str:
    """The normalized name: NFKC, case-folded, inner separators removed. Cached: names
    repeat across a library's chunks (a third of ingest's extraction time went here)."""
    folded = unicodedata.normalize("NFKC", surface).casefold().strip()
    return _SEPARATORS.sub("", folded)


def best_fuzzy(word: str, keys: Sequence[str]) -> str | None:
    """The stored key ``word`` most likely spells (ratio ≥ ``FUZZY_CUTOFF``), or None.

    Only words of ``FUZZY_MIN_CHARS`` or more are matched, and never across a digit
    difference (``ops1042`` is not ``ops1043``): ids are exact or nothing.
    """
    if len(word) < FUZZY_MIN_CHARS or not keys:
        return None
    digits = [c for c in word if c.isdigit()]
    candidates = [k for k in keys if [c for c in k if c.isdigit()] == digits]
    found = process.extractOne(word, candidates, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF)
    return found[0] if found else None
