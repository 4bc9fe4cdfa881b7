"""The floors: lexical coverage, the per-model cosine floor and rescue, and the CJK gate.

Guards against: a semantic floor that fires for a model nobody calibrated, a rescue that
waives the cosine floor itself, and a CJK gate that fires on an English question with one
Chinese word in it.
"""

from __future__ import annotations

import pytest

from kb_mcp.search.calibration import UNCALIBRATED, VectorCalibration, has_cjk
from kb_mcp.search.floor import COVERAGE_FLOOR, coverage, floor_reason

CALIBRATED = VectorCalibration(weight=1.0, cosine_floor=0.30, cosine_rescue=0.60)


def test_floor_lexical_only_when_the_keyword_leg_ran() -> None:
    low = COVERAGE_FLOOR / 2
    assert floor_reason(low, None, UNCALIBRATED).startswith(
        "nothing relevant: the best passage covers 10% of the query's weight (floor 20%)"
    )
    assert floor_reason(COVERAGE_FLOOR, None, UNCALIBRATED) is None
    assert floor_reason(None, 0.01, UNCALIBRATED) is None  # vector mode, no calibration


def test_floor_uncalibrated_model_never_abstains_on_cosine() -> None:
    assert floor_reason(1.0, 0.0, UNCALIBRATED) is None


def test_floor_cosine_below_the_models_floor_abstains() -> None:
    reason = floor_reason(1.0, 0.25, CALIBRATED)
    assert reason == (
        "nothing relevant: the closest passage in meaning has cosine 0.25 (floor 0.30 for "
        "this model); the answer is probably not stored"
    )
    assert floor_reason(1.0, 0.30, CALIBRATED) is None


def test_floor_close_meaning_waives_the_lexical_floor_but_not_its_own() -> None:
    assert floor_reason(0.05, 0.61, CALIBRATED) is None
    assert floor_reason(0.05, 0.59, CALIBRATED) is not None
    only_rescue = VectorCalibration(cosine_rescue=0.6)
    assert floor_reason(0.05, 0.61, only_rescue) is None


def test_floor_coverage_weighs_units_by_idf() -> None:
    units = [["rare"], ["common"]]
    df = {"rare": 1, "common": 900}
    assert coverage(units, {"rare"}, df, 1000) > 0.9
    assert coverage(units, {"common"}, df, 1000) < 0.1
    assert coverage([], set(), {}, 1000) == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("会话缓存过期时间是多少", True),
        ("MIT OpenCourseWare指什么？", True),
        ("what does 缓存 mean here", True),
        ("rollback the release", False),
        ("セッションの有効期限", True),
        ("세션 만료", False),  # Hangul is space-separated: the index treats it as words
        ("???", False),
    ],
)
def test_floor_has_cjk_finds_ideographs_and_kana(text: str, expected: bool) -> None:
    assert has_cjk(text) is expected
