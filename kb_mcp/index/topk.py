"""Top-k selection over the postings segment's scores: a cut score, then the best
passage per document in FTS5's order (moved out of ``index/postings.py``, issue 10)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def cut(scores: np.ndarray, depth: int) -> float:
    """A score at which at least the best ``depth`` passages are kept, with every passage
    tied with the last of them (the sort key is rounded to 9 decimals); 0 when there are
    not that many. One partition of the matching passages' scores: cheaper than
    gathering their ids and documents first (at 100k chunks a SciFact question matches
    about half of them)."""
    import numpy as np

    positive = scores[scores > 0]  # a partition over many equal zeros degenerates
    if len(positive) <= depth:
        return 0.0
    return float(np.partition(positive, len(positive) - depth)[len(positive) - depth]) - 1e-8


def best_per_document(
    chunk_ids: np.ndarray,
    doc_ids: np.ndarray,
    scores: np.ndarray,
    documents: int,
    preselect: int,
) -> list[tuple[int, float]]:
    """The best passage of each of the first ``documents`` documents, in FTS5's order
    (``round(-score, 9)``, then chunk id), as ``FtsIndex._ranked_passages`` sorts.

    Only the best ``preselect`` passages a document wanted are sorted (all of them when
    those do not reach ``documents`` documents), with every passage tied at the cut.
    """
    import numpy as np

    depth = documents * preselect
    if len(scores) > depth:
        cut = -np.partition(-scores, depth)[depth]
        keep = np.flatnonzero(scores >= cut - 1e-8)
        found = best_sorted(chunk_ids[keep], doc_ids[keep], scores[keep], documents)
        if len(found) == documents:
            return found
    return best_sorted(chunk_ids, doc_ids, scores, documents)


def best_sorted(
    chunk_ids: np.ndarray, doc_ids: np.ndarray, scores: np.ndarray, documents: int
) -> list[tuple[int, float]]:
    import numpy as np

    order = np.lexsort((chunk_ids, np.round(-scores, 9)))
    docs = doc_ids[order]
    _, first = np.unique(docs, return_index=True)
    first.sort()
    picked = order[first[:documents]]
    return [(int(c), float(s)) for c, s in zip(chunk_ids[picked], scores[picked], strict=True)]
