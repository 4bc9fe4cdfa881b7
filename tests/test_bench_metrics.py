"""Retrieval metrics against hand-computed values.

Each expected number is worked out in a comment beside it. log2 values used:
log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2, so 1/log2(3) = 0.6309298.
"""

from __future__ import annotations

import pytest

from kb_mcp.bench.metrics import (
    Scores,
    avoids_all,
    hit_at_k,
    mean,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    ranks_above,
    recall_at_k,
    score_queries,
    top_k,
)
from kb_mcp.errors import InvalidInput

INV_LOG2_3 = 0.6309298


def test_ndcg_perfect_ranking_is_one() -> None:
    # DCG = 2/log2(2) + 1/log2(3) = ideal DCG, so nDCG = 1.
    assert ndcg_at_k(["a", "b", "x"], {"a": 2, "b": 1}) == pytest.approx(1.0)


def test_ndcg_single_relevant_at_rank_three_is_half() -> None:
    # DCG = 1/log2(3 + 1) = 1/2; ideal = 1/log2(2) = 1; nDCG = 0.5.
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}) == pytest.approx(0.5)


def test_ndcg_graded_rels_in_swapped_order_use_linear_gain() -> None:
    # Ranked b(1), a(2): DCG   = 1/1 + 2/log2(3) = 1 + 1.2618595 = 2.2618595
    # Ideal  a(2), b(1): IDCG  = 2/1 + 1/log2(3) = 2 + 0.6309298 = 2.6309298
    # nDCG = 2.2618595 / 2.6309298 = 0.8597186 (with 2**g - 1 gains it would be 0.7967).
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}) == pytest.approx(0.8597186)


def test_ndcg_ideal_counts_judged_docs_not_retrieved() -> None:
    # Only a retrieved: DCG = 1. Ideal has a and b: 1 + 1/log2(3) = 1.6309298.
    # nDCG = 1 / 1.6309298 = 0.6131472.
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}) == pytest.approx(0.6131472)


def test_ndcg_no_relevant_found_is_zero() -> None:
    assert ndcg_at_k(["x", "y", "z"], {"a": 2}) == 0.0


def test_ndcg_duplicate_ids_count_once() -> None:
    # [a, a] dedupes to [a]: DCG = 1, ideal = 1, so 1.0 (not (1 + 0.63) / 1).
    assert ndcg_at_k(["a", "a"], {"a": 1}) == pytest.approx(1.0)
    # [x, x, b] dedupes to [x, b]: b sits at rank 2 inside k = 2, DCG = 1/log2(3).
    assert ndcg_at_k(["x", "x", "b"], {"b": 1}, k=2) == pytest.approx(INV_LOG2_3)


def test_ndcg_respects_cutoff() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"]  # a is at rank 11
    assert ndcg_at_k(ranked, {"a": 1}, k=10) == 0.0
    # At k = 11: DCG = 1/log2(12) = 0.2789429; ideal = 1.
    assert ndcg_at_k(ranked, {"a": 1}, k=11) == pytest.approx(0.2789429)


def test_ndcg_ignores_non_positive_grades() -> None:
    # b (grade 0) and c (grade -1) add no gain and no ideal gain: DCG = 1/log2(3), ideal = 1.
    assert ndcg_at_k(["b", "a", "c"], {"a": 1, "b": 0, "c": -1}) == pytest.approx(INV_LOG2_3)


def test_recall_counts_share_of_three_relevant() -> None:
    rels = {"a": 1, "b": 2, "c": 1}
    ranked = ["a", "x", "c", "y", "b"]
    assert recall_at_k(ranked, rels, 1) == pytest.approx(1 / 3)  # a
    assert recall_at_k(ranked, rels, 4) == pytest.approx(2 / 3)  # a, c
    assert recall_at_k(ranked, rels, 5) == pytest.approx(1.0)  # a, c, b


def test_recall_duplicates_do_not_push_docs_out_of_top_k() -> None:
    # Distinct top 2 is [a, b]: both relevant found.
    assert recall_at_k(["a", "a", "b"], {"a": 1, "b": 1}, 2) == pytest.approx(1.0)


def test_mrr_is_inverse_rank_of_first_relevant() -> None:
    assert mrr_at_k(["a", "b"], {"a": 1}) == pytest.approx(1.0)  # 1/1
    assert mrr_at_k(["x", "y", "z", "a", "b"], {"a": 1, "b": 2}) == pytest.approx(0.25)  # 1/4
    assert mrr_at_k(["x", "y", "z", "a"], {"a": 1}, k=3) == 0.0  # beyond the cut-off


def test_hit_is_one_when_any_relevant_in_top_k() -> None:
    assert hit_at_k(["x", "a"], {"a": 1}, 2) == 1.0
    assert hit_at_k(["x", "a"], {"a": 1}, 1) == 0.0
    assert hit_at_k(["a"], {"a": 0}, 10) == 0.0  # grade 0 is not relevant


def test_metrics_with_empty_inputs_are_zero() -> None:
    assert ndcg_at_k([], {"a": 1}) == 0.0
    assert ndcg_at_k(["a"], {}) == 0.0
    assert recall_at_k([], {"a": 1}, 10) == 0.0
    assert recall_at_k(["a"], {}, 10) == 0.0
    assert mrr_at_k([], {"a": 1}) == 0.0
    assert hit_at_k([], {}, 10) == 0.0
    assert mean([]) == 0.0
    assert percentile([], 95) == 0.0


def test_mean_averages_values() -> None:
    assert mean([1.0, 0.5, 0.0]) == pytest.approx(0.5)  # 1.5 / 3
    assert mean(iter([0.25])) == pytest.approx(0.25)


def test_percentile_uses_nearest_rank() -> None:
    values = list(range(100, 0, -1))  # 1..100, unsorted on purpose
    assert percentile(values, 50) == 50  # ceil(0.50 * 100) = 50th smallest
    assert percentile(values, 95) == 95  # ceil(0.95 * 100) = 95th smallest
    assert percentile(values, 99.5) == 100  # ceil(99.5) = 100th
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1  # rank floored at 1
    # Nearest rank returns an observed value: on [10, 20], p50 = ceil(1.0) = 1st = 10, not 15.
    assert percentile([20.0, 10.0], 50) == 10.0


def test_percentile_rejects_out_of_range_p() -> None:
    with pytest.raises(InvalidInput, match="between 0 and 100"):
        percentile([1.0], 101)


def test_top_k_keeps_first_position_of_each_id() -> None:
    assert top_k(["a", "b", "a", "c", "b", "d"], 3) == ["a", "b", "c"]


def test_top_k_rejects_non_positive_k() -> None:
    with pytest.raises(InvalidInput, match="at least 1"):
        top_k(["a"], 0)


def test_avoids_all_fails_on_banned_doc_at_any_rank() -> None:
    ranked = [f"d{i}" for i in range(50)] + ["retracted"]
    assert avoids_all(ranked, {"retracted"}) == 0.0
    assert avoids_all(ranked[:50], {"retracted"}) == 1.0
    assert avoids_all([], {"retracted"}) == 1.0


def test_ranks_above_requires_settled_doc_before_speculative_ones() -> None:
    assert ranks_above(["x", "settled", "idea"], "settled", {"idea"}) == 1.0
    assert ranks_above(["idea", "settled"], "settled", {"idea"}) == 0.0
    assert ranks_above(["settled"], "settled", {"idea"}) == 1.0  # idea not retrieved
    assert ranks_above(["x", "idea"], "settled", {"idea"}) == 0.0  # settled missing


def test_score_queries_averages_over_queries_with_relevant_docs() -> None:
    qrels = {
        "q1": {"a": 1},  # found at rank 1: nDCG 1, R@10 1, MRR 1, hit 1
        "q2": {"b": 1, "c": 1},  # only c, at rank 2 (see below)
        "q3": {"d": 1},  # no run at all: every measure 0
        "q4": {},  # abstention query: not averaged
        "q5": {"e": 0},  # nothing relevant: not averaged
    }
    runs = {"q1": ["a"], "q2": ["x", "c"], "q4": [], "q5": ["e"]}
    # q2: DCG = 1/log2(3) = 0.6309298; ideal = 1 + 0.6309298 = 1.6309298 -> 0.3868528.
    #     recall 1/2, MRR 1/2, hit 1.
    scores = score_queries(runs, qrels)
    assert scores.n == 3
    assert scores.ndcg10 == pytest.approx((1 + 0.3868528 + 0) / 3)
    assert scores.recall10 == pytest.approx((1 + 0.5 + 0) / 3)
    assert scores.recall100 == pytest.approx((1 + 0.5 + 0) / 3)
    assert scores.mrr10 == pytest.approx((1 + 0.5 + 0) / 3)
    assert scores.hit10 == pytest.approx((1 + 1 + 0) / 3)


def test_score_queries_recall100_reaches_past_ten() -> None:
    run = [f"x{i}" for i in range(20)] + ["a"]  # a at rank 21
    scores = score_queries({"q": run}, {"q": {"a": 1}})
    assert (scores.recall10, scores.recall100) == (0.0, 1.0)


def test_score_queries_with_nothing_judged_is_empty() -> None:
    assert score_queries({}, {}) == Scores(0.0, 0.0, 0.0, 0.0, 0.0, n=0)
