"""Freshness on the fused score: every move is a factor the candidate reports.

Guards against: a reorder that leaves a lower score above a higher one (the bug of issue
8: freshness sorted by bm25 while the reported score was RRF), a move that does not say
why, and near-ties read on the flat RRF scale instead of the legs' own scores.
"""

from __future__ import annotations

import pytest

from kb_mcp.ingest.dates import parse_date
from kb_mcp.search.adjust import Adjustment, Candidate, apply_rules
from kb_mcp.search.freshness import (
    DEMOTION,
    DEMOTION_RANKS,
    as_of_date,
    demotion_rule,
    near_tied,
    reorder,
    section_date,
)
from kb_mcp.search.fuse import RRF_K


def rrf(rank: int) -> float:
    return 1 / (RRF_K + rank)


def cand(key: str, rank: int, bm25: float, **kw) -> Candidate:
    return Candidate(key=key, score=rrf(rank), evidence={"keyword": bm25}, **kw)


def keys(ranked: list[Candidate]) -> list[str]:
    return [c.key for c in ranked]


def assert_scores_explain_order(ranked: list[Candidate], before: list[Candidate]) -> None:
    """Scores are non-increasing, and each is its fused score times its factors."""
    scores = [c.score for c in ranked]
    assert scores == sorted(scores, reverse=True)
    fused = {c.key: c.score for c in before}
    for c in ranked:
        product = 1.0
        for a in c.adjustments:
            product *= a.factor
        assert c.score == pytest.approx(fused[c.key] * product)


def test_freshness_demotion_is_worth_its_ranks_at_the_head() -> None:
    """A demoted rank-1 document scores as rank 1 + DEMOTION_RANKS would."""
    assert rrf(1) * DEMOTION == pytest.approx(rrf(1 + DEMOTION_RANKS))


def test_freshness_superseded_document_says_by_whom_and_since_when() -> None:
    old = cand("runbook-v1", 1, 9.0, superseded_on="2024-03-01T10:00", superseded_by="runbook-v2")
    new = cand("runbook-v2", 2, 8.0, date="2024-03-01")
    ranked = apply_rules([old, new], [demotion_rule(None)])
    assert keys(ranked) == ["runbook-v2", "runbook-v1"]
    assert ranked[1].adjustments == (
        Adjustment("superseded by runbook-v2 on 2024-03-01", DEMOTION),
    )
    assert ranked[1].score == pytest.approx(rrf(1) * DEMOTION)
    assert ranked[0].adjustments == ()


def test_freshness_supersession_after_the_asked_date_does_not_demote() -> None:
    old = cand("v1", 1, 9.0, superseded_on="2024-03-01", superseded_by="v2")
    assert demotion_rule("2024-02-29")(old) is None
    assert demotion_rule("2024-03-01")(old) is not None


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("speculative", "speculative: a draft, proposal or idea"),
        ("obsolete", "obsolete: its status says it no longer holds"),
    ],
)
def test_freshness_status_demotion_names_the_status(status: str, reason: str) -> None:
    assert demotion_rule(None)(cand("d", 1, 1.0, status=status)) == Adjustment(reason, DEMOTION)
    assert demotion_rule(None)(cand("d", 1, 1.0)) is None


def test_freshness_demoted_document_far_ahead_still_comes_first() -> None:
    """Asked about the proposal itself, the proposal still wins over a distant current doc."""
    proposal = cand("idea-kafka", 1, 20.0, status="speculative")
    current = cand("adr-nats", 1 + DEMOTION_RANKS + 2, 3.0)
    ranked = apply_rules([proposal, current], [demotion_rule(None)])
    assert keys(ranked) == ["idea-kafka", "adr-nats"]


def test_freshness_newer_near_tied_version_moves_up_to_the_older_ones_score() -> None:
    older = cand("limits-2023", 1, 10.0, date="2023-01-10", topic="API rate limits")
    newer = cand("limits-2024", 2, 8.5, date="2024-02-01", topic="API rate limits")
    other = cand("billing", 3, 8.0, date="2022-01-01", topic="Billing overview")
    before = [older, newer, other]
    ranked = reorder(before, None)
    assert keys(ranked) == ["limits-2024", "limits-2023", "billing"]
    assert ranked[0].score == ranked[1].score == rrf(1)
    (moved,) = ranked[0].adjustments
    assert moved.reason == "newer version of limits-2023: moved above it"
    assert moved.factor == pytest.approx(rrf(1) / rrf(2))
    assert ranked[2].adjustments == ()
    assert_scores_explain_order(ranked, before)


def test_freshness_near_tie_reads_the_legs_not_the_fused_score() -> None:
    """Adjacent in RRF, but bm25 says the older one matches far better: no move."""
    older = cand("limits-2023", 1, 10.0, date="2023-01-10", topic="API rate limits")
    newer = cand("limits-2024", 2, 5.0, date="2024-02-01", topic="API rate limits")
    assert not near_tied(older, newer)
    assert keys(reorder([older, newer], None)) == ["limits-2023", "limits-2024"]


def test_freshness_near_tie_needs_every_leg_that_found_the_upper_one() -> None:
    upper = Candidate("a", rrf(1), evidence={"keyword": 10.0, "vector": 0.80})
    assert near_tied(upper, Candidate("b", rrf(2), evidence={"keyword": 9.0, "vector": 0.79}))
    assert not near_tied(upper, Candidate("b", rrf(2), evidence={"keyword": 9.0}))
    assert not near_tied(upper, Candidate("b", rrf(2), evidence={"keyword": 9.0, "vector": 0.5}))


def test_freshness_recency_ignores_unrelated_topics() -> None:
    older = cand("limits", 1, 10.0, date="2023-01-10", topic="API rate limits")
    newer = cand("lunch", 2, 9.5, date="2024-02-01", topic="Office lunch menu")
    assert keys(reorder([older, newer], None)) == ["limits", "lunch"]


def test_freshness_as_of_places_later_documents_below_with_one_factor() -> None:
    later = cand("limits-2024", 1, 10.0, date="2024-05-01")
    later2 = cand("limits-2025", 2, 9.0, date="2025-01-01")
    current = cand("limits-2023", 3, 8.0, date="2023-06-01")
    before = [later, later2, current]
    ranked = reorder(before, as_of_date("what were the limits as of 2023?"))
    assert keys(ranked) == ["limits-2023", "limits-2024", "limits-2025"]
    assert ranked[1].score == pytest.approx(ranked[0].score)
    factors = [a.factor for c in ranked[1:] for a in c.adjustments]
    assert factors == [pytest.approx(rrf(3) / rrf(1))] * 2
    assert ranked[1].adjustments[0].reason == (
        "dated 2024-05-01, after the asked date 2023-12-31: placed below the documents of that time"
    )
    assert_scores_explain_order(ranked, before)


def test_freshness_as_of_leaves_later_documents_already_below_untouched() -> None:
    current = cand("limits-2023", 1, 10.0, date="2023-06-01")
    later = cand("limits-2024", 2, 9.0, date="2024-05-01", topic="x")
    ranked = reorder([current, later], "2023-12-31")
    assert keys(ranked) == ["limits-2023", "limits-2024"]
    assert ranked[1].adjustments == ()


def test_freshness_recency_never_lifts_a_document_past_the_asked_date() -> None:
    current = cand("limits-2023", 1, 10.0, date="2023-06-01", topic="API rate limits")
    later = cand("limits-2024", 2, 9.9, date="2024-05-01", topic="API rate limits")
    assert keys(reorder([current, later], "2023-12-31")) == ["limits-2023", "limits-2024"]


def test_freshness_cascade_of_versions_keeps_scores_non_increasing() -> None:
    versions = [
        cand(f"v{year}", rank, 10.0 - rank * 0.3, date=f"{year}-01-01", topic="Release cadence")
        for rank, year in enumerate((2020, 2021, 2022, 2023), start=1)
    ]
    ranked = reorder(versions, None)
    assert keys(ranked) == ["v2023", "v2022", "v2021", "v2020"]
    assert_scores_explain_order(ranked, versions)
    assert all(c.score == rrf(1) for c in ranked)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("rate limits as of March 2024", "2024-03-31"),
        ("as of 2023-10-01, which version", "2023-10-01"),
        ("release cadence as of mid-2022", "2022-06-30"),
        ("as of 2023", "2023-12-31"),
        ("rate limits today", None),
    ],
)
def test_freshness_as_of_date_reads_the_question(query: str, expected: str | None) -> None:
    assert as_of_date(query) == expected


def test_freshness_recency_never_lifts_a_demoted_document_over_a_current_one() -> None:
    current = cand("pool-v2", 1, 10.0, date="2024-02-01", topic="Ledger pool size")
    idea = cand(
        "idea-pool", 2, 9.9, date="2024-03-01", status="speculative", topic="Ledger pool size"
    )
    ranked = reorder(apply_rules([current, idea], [demotion_rule(None)]), None)
    assert keys(ranked) == ["pool-v2", "idea-pool"]
    # Two drafts stand equally: the later one still wins the near-tie.
    draft = cand(
        "draft-pool", 1, 10.0, date="2024-02-01", status="speculative", topic="Ledger pool size"
    )
    ranked = reorder(apply_rules([draft, idea], [demotion_rule(None)]), None)
    assert keys(ranked) == ["idea-pool", "draft-pool"]


def test_freshness_section_date_reads_a_changelog_entry_not_an_event() -> None:
    """issue 9 (time_bound, "dated in a changelog heading"): a passage is as old as the
    changelog entry it sits in; a heading that names an event's date is no entry date."""
    assert section_date(("Changelog", "2024-06-01"), "2026-01-01") == "2024-06-01"
    assert section_date(("Changelog", "[2.4.0] - 2025-03-01"), None) == "2025-03-01"
    assert section_date(("Log", "3 February — interval 30 s"), "2026-05-01") == "2026-02-03"
    assert section_date(("Log", "v2.3 — March 2025"), None) == "2025-03-01"
    assert section_date(("Fares", "Zones merge on 1 June 2025"), None) is None
    assert section_date(("Fares 2024",), None) is None


def test_freshness_as_of_reads_the_changelog_entry_of_the_passage() -> None:
    """issue 9: a changelog last edited after the asked date is not cut below the
    documents of that time when its passage is an entry dated before it."""
    changelog = cand("changelog", 1, 10.0, date="2026-01-10", topic="x", section_date="2024-05-01")
    page = cand("page-2023", 2, 9.0, date="2023-06-01", topic="y")
    assert keys(reorder([changelog, page], "2024-12-31")) == ["changelog", "page-2023"]
    undated_entry = cand("changelog", 1, 10.0, date="2026-01-10", topic="x")
    assert keys(reorder([undated_entry, page], "2024-12-31")) == ["page-2023", "changelog"]


def test_parse_date_month_and_year_is_not_a_day() -> None:
    """ "March 2025" is the month, never 20 March (the "20" of the year read as a day)."""
    assert parse_date("effective March 2025", None) == "2025-03-01"
    assert parse_date("March 20, 2025", None) == "2025-03-20"
    assert parse_date("March 20", "2024-01-01") == "2024-03-20"
