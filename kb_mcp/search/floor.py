"""The score floor: how much of a query's weight a passage covers. Pure.

BM25 scores are not comparable across queries, so the floor is not a score threshold.
It is query coverage: the share of the query's IDF weight whose terms occur in the best
passage. A question whose rare, specific words appear nowhere near each other in the
library ("GDPR deletion deadline" in a library without GDPR) covers little of its own
weight, and the search then answers with nothing rather than with noise.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from kb_mcp.search.calibration import VectorCalibration

# The best passage must cover this share of the query's IDF weight, or the search returns
# nothing. Chosen against the false-empty rate on answerable queries, which matters more
# to an agent than a missed abstention (issue #3, golden set / SciFact train / CoSQA dev /
# CMRC2018 dev): at 0.20 false-empty is 0.4-0.7% on the public sets and 1.9% on the
# golden set, abstention 12.5%; at 0.25 they are 0.8-2.0% and 25%; at 0.35, 4-7% and 62%.
COVERAGE_FLOOR = 0.2


def idf(doc_frequency: int, documents: int) -> float:
    """BM25's (Robertson–Spärck Jones) IDF, floored at 0; an unseen term weighs the most."""
    return math.log(1 + (documents - doc_frequency + 0.5) / (doc_frequency + 0.5))


def coverage(
    units: Sequence[Sequence[str]],
    present: Collection[str],
    df: Mapping[str, int],
    documents: int,
) -> float:
    """Share of the units' IDF weight covered by ``present`` tokens (1.0 for no units).

    A unit is a query term (one token, or several for a phrase); it counts as covered when
    all its tokens are present, and weighs the IDF of its rarest token.
    """
    total = covered = 0.0
    for unit in units:
        if not unit:
            continue
        weight = max(idf(df.get(token, 0), documents) for token in unit)
        total += weight
        if all(token in present for token in unit):
            covered += weight
    return covered / total if total else 1.0


def floor_reason(
    lexical: float | None, cosine: float | None, calibration: VectorCalibration
) -> str | None:
    """Why a search should answer with nothing, or None when its best passage clears.

    ``lexical`` is the best passage's query coverage (None when the keyword leg did not
    run); ``cosine`` the vector leg's best cosine (None when it did not run). The lexical
    floor says the question's specific words are not stored together anywhere; the
    semantic floor, calibrated per model, says nothing stored is about the question.
    A passage close enough in meaning (``cosine_rescue``) answers a paraphrase whose
    words the library does not use; with that rescue, a model's calibration may ask for
    more lexical coverage (``coverage_floor``) than keyword search alone can afford.
    """
    floor = calibration.cosine_floor
    if cosine is not None and floor is not None and cosine < floor:
        return (
            f"nothing relevant: the closest passage in meaning has cosine {cosine:.2f} "
            f"(floor {floor:.2f} for this model); the answer is probably not stored"
        )
    rescued = (
        cosine is not None
        and calibration.cosine_rescue is not None
        and cosine >= calibration.cosine_rescue
    )
    lexical_floor = COVERAGE_FLOOR
    if cosine is not None and calibration.coverage_floor is not None:
        lexical_floor = calibration.coverage_floor
    if lexical is not None and lexical < lexical_floor and not rescued:
        return (
            f"nothing relevant: the best passage covers {lexical:.0%} of the query's "
            f"weight (floor {lexical_floor:.0%}); the answer is probably not stored"
        )
    return None
