"""fuse_rankings: weighted RRF, order, tie-breaks, and the explanation that is the score.

Guards against: an RRF formula that drifts from weight / (k + rank), a test that checks
presence instead of order, and an explanation computed apart from the score.
"""

from __future__ import annotations

from kb_mcp.search.fuse import RRF_K, Contribution, FusedHit, LegHit, fuse_rankings


def _ids(hits: list[FusedHit]) -> list[int]:
    return [h.chunk_id for h in hits]


def test_fuse_rrf_k_is_60() -> None:
    assert RRF_K == 60


def test_fuse_scores_are_weight_over_60_plus_rank_summed_over_legs() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(1, 1, 9.0), LegHit(2, 2, 7.5)],
            "vector": [LegHit(2, 1, 0.91), LegHit(3, 2, 0.80)],
        },
        weights={"keyword": 1.0, "vector": 0.5},
    )
    scores = {h.chunk_id: h.score for h in fused}
    assert scores == {
        1: 1.0 / 61,
        2: 1.0 / 62 + 0.5 / 61,
        3: 0.5 / 62,
    }


def test_fuse_orders_by_fused_score() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(1, 1, 9.0), LegHit(2, 2, 7.5), LegHit(3, 3, 1.0)],
            "vector": [LegHit(3, 1, 0.9), LegHit(2, 2, 0.8)],
        }
    )
    # 3: 1/63 + 1/61, 2: 1/62 + 1/62, 1: 1/61
    assert _ids(fused) == [3, 2, 1]
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)


def test_fuse_doc_in_two_legs_beats_doc_in_one_leg_at_same_rank() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(10, 1, 5.0)],
            "vector": [LegHit(20, 1, 0.9)],
            "graph": [LegHit(20, 1, 1.0)],
        }
    )
    assert _ids(fused) == [20, 10]
    assert fused[0].score == 2 / 61


def test_fuse_doc_in_two_legs_beats_single_leg_doc_ranked_higher() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(1, 1, 5.0), LegHit(2, 2, 4.0)],
            "vector": [LegHit(3, 1, 0.9), LegHit(2, 2, 0.8)],
        }
    )
    assert _ids(fused) == [2, 1, 3]


def test_fuse_weights_change_order() -> None:
    legs = {"keyword": [LegHit(1, 1, 5.0)], "vector": [LegHit(2, 1, 0.9)]}

    assert _ids(fuse_rankings(legs, weights={"keyword": 1.0, "vector": 2.0})) == [2, 1]
    assert _ids(fuse_rankings(legs, weights={"keyword": 2.0, "vector": 1.0})) == [1, 2]
    # A weight beats a rank: weight 1.5 at rank 10 outscores weight 1.0 at rank 1.
    legs = {"keyword": [LegHit(1, 1, 5.0)], "vector": [LegHit(2, 10, 0.1)]}
    assert _ids(fuse_rankings(legs, weights={"vector": 1.5})) == [2, 1]


def test_fuse_missing_weight_defaults_to_one() -> None:
    fused = fuse_rankings({"keyword": [LegHit(1, 1, 5.0)]}, weights={"vector": 3.0})
    assert fused[0].score == 1 / 61
    assert fused[0].contributions[0].weight == 1.0


def test_fuse_tie_goes_to_more_recent_passage() -> None:
    legs = {"keyword": [LegHit(1, 1, 5.0)], "vector": [LegHit(2, 1, 0.9)]}
    recency = {1: "2023-05-01", 2: "2024-01-31"}
    assert _ids(fuse_rankings(legs, recency=recency)) == [2, 1]
    recency = {1: "2024-02-01T08:00:00", 2: "2024-01-31"}
    assert _ids(fuse_rankings(legs, recency=recency)) == [1, 2]


def test_fuse_tie_without_date_sorts_oldest() -> None:
    legs = {"keyword": [LegHit(1, 1, 5.0)], "vector": [LegHit(2, 1, 0.9)]}
    assert _ids(fuse_rankings(legs, recency={2: "1999-01-01"})) == [2, 1]


def test_fuse_tie_on_score_and_date_goes_to_lower_chunk_id() -> None:
    legs = {
        "keyword": [LegHit(7, 1, 5.0)],
        "vector": [LegHit(3, 1, 0.9)],
        "graph": [LegHit(5, 1, 1)],
    }
    assert _ids(fuse_rankings(legs)) == [3, 5, 7]
    same_day = {3: "2024-01-01", 5: "2024-01-01", 7: "2024-01-01"}
    assert _ids(fuse_rankings(legs, recency=same_day)) == [3, 5, 7]


def test_fuse_tie_break_never_outranks_a_higher_score() -> None:
    legs = {"keyword": [LegHit(1, 1, 5.0), LegHit(2, 2, 4.0)]}
    assert _ids(fuse_rankings(legs, recency={2: "2099-01-01"})) == [1, 2]


def test_fuse_reports_contributions_per_leg() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(1, 3, 4.25)],
            "vector": [LegHit(1, 1, 0.87), LegHit(2, 2, 0.5)],
        },
        weights={"keyword": 1.0, "vector": 0.8},
    )
    assert fused == [
        FusedHit(
            key=1,
            score=1.0 / 63 + 0.8 / 61,
            contributions=(
                Contribution(
                    "keyword", rank=3, leg_score=4.25, weight=1.0, value=1 / 63, chunk_id=1
                ),
                Contribution(
                    "vector", rank=1, leg_score=0.87, weight=0.8, value=0.8 / 61, chunk_id=1
                ),
            ),
        ),
        FusedHit(
            key=2,
            score=0.8 / 62,
            contributions=(
                Contribution(
                    "vector", rank=2, leg_score=0.5, weight=0.8, value=0.8 / 62, chunk_id=2
                ),
            ),
        ),
    ]
    assert fused[0].legs == ("keyword", "vector")
    assert fused[1].legs == ("vector",)


def test_fuse_explanation_equals_score() -> None:
    fused = fuse_rankings(
        {
            "keyword": [LegHit(i, i, 10.0 - i) for i in range(1, 20)],
            "vector": [LegHit(20 - i, i, 1.0 / i) for i in range(1, 20)],
            "graph": [LegHit(i * 2, i, 1.0) for i in range(1, 10)],
        },
        weights={"keyword": 1.0, "vector": 0.7, "graph": 0.3},
    )
    for hit in fused:
        assert sum(c.value for c in hit.contributions) == hit.score
        assert all(c.value == c.weight / (RRF_K + c.rank) for c in hit.contributions)


def test_fuse_custom_k() -> None:
    fused = fuse_rankings({"keyword": [LegHit(1, 1, 5.0)]}, k=0)
    assert fused[0].score == 1.0


def test_fuse_no_legs_is_empty() -> None:
    assert fuse_rankings({}) == []
    assert fuse_rankings({"keyword": [], "vector": []}) == []


def test_fuse_grouped_on_documents_sums_two_passages_of_one_document() -> None:
    """Fused on chunks, a document whose best passage differs by leg counted as two."""
    legs = {
        "keyword": [LegHit(11, 1, 9.0), LegHit(30, 2, 8.0)],
        "vector": [LegHit(12, 1, 0.9), LegHit(30, 2, 0.8)],
    }
    group = {11: "doc-a", 12: "doc-a", 30: "doc-b"}
    fused = fuse_rankings(legs, group=group)
    assert [(h.key, h.score) for h in fused] == [("doc-a", 2 / 61), ("doc-b", 2 / 62)]
    assert [c.chunk_id for c in fused[0].contributions] == [11, 12]


def test_fuse_grouped_hit_shows_the_passage_of_its_strongest_contribution() -> None:
    legs = {"keyword": [LegHit(11, 3, 9.0)], "vector": [LegHit(12, 1, 0.9)]}
    fused = fuse_rankings(legs, group={11: "doc-a", 12: "doc-a"})
    assert fused[0].chunk_id == 12
    # A tie goes to the first leg's passage.
    legs = {"keyword": [LegHit(11, 1, 9.0)], "vector": [LegHit(12, 1, 0.9)]}
    assert fuse_rankings(legs, group={11: "doc-a", 12: "doc-a"})[0].chunk_id == 11


def test_fuse_grouped_recency_is_keyed_by_the_group() -> None:
    legs = {"keyword": [LegHit(1, 1, 5.0)], "vector": [LegHit(2, 1, 0.9)]}
    group = {1: "old", 2: "new"}
    recency = {"old": "2023-01-01", "new": "2024-01-01"}
    assert [h.key for h in fuse_rankings(legs, recency=recency, group=group)] == ["new", "old"]
