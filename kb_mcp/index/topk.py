"""Top-k selection over the postings' scores: the best passage per document in FTS5's
order (moved out of ``index/postings.py``, issue 10). Which passages are worth scoring
at all is ``index/maxscore.py``'s part."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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


def best_passage_of(
    chunk_ids: np.ndarray, doc_ids: np.ndarray, scores: np.ndarray, document_ids: Sequence[int]
) -> dict[int, int]:
    """Document id → chunk id of its best passage (FTS5's order: ``round(-score, 9)``,
    then the lowest chunk id) among the passages given, for those of ``document_ids``
    that have one: the document leg's citations, shared by both stores."""
    import numpy as np

    keep = np.isin(doc_ids, np.asarray(document_ids, dtype=np.int64))
    chunk_ids, doc_ids = chunk_ids[keep], doc_ids[keep]
    ranked = best_sorted(chunk_ids, doc_ids, scores[keep], len(document_ids))
    at_doc = dict(zip(chunk_ids.tolist(), doc_ids.tolist(), strict=True))
    return {at_doc[chunk_id]: chunk_id for chunk_id, _score in ranked}
