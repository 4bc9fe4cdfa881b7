"""What the engine knows about each embedding model, measured on the tuning splits. Pure.

A vector leg is only as good as its model, and models differ in ways the engine must
respect: how much weight the leg deserves in the fusion, and whether the model reads
Chinese and Japanese at all (an English-only model ranks CJK text at random and drags a
fused list down). Each known model has its row; an unknown one (an Ollama model of the
user's choice) gets equal weight. What a cosine means for abstention is the ranking
model's to weigh (``search/model.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb_mcp.index.textprep import CJK_RUN

if TYPE_CHECKING:  # embed.base imports numpy: keyword-only search must not
    from kb_mcp.embed.base import EmbeddingSignature


@dataclass(frozen=True, slots=True)
class VectorCalibration:
    """One model's place in the fusion."""

    weight: float = 1.0  # RRF weight of the vector leg (the keyword leg's is 1.0)
    reads_cjk: bool = True  # False: the leg sits out questions in CJK
    source: str = "not calibrated: equal weight"


UNCALIBRATED = VectorCalibration()

# provider:model → calibration. Each value names the bench runs it comes from.
CALIBRATIONS: dict[str, VectorCalibration] = {
    # Tuning splits, hybrid nDCG@10 by vector weight 0.5 / 0.75 / 1.0 / 1.25 / 1.5 (keyword
    # alone): SciFact train 0.705 / 0.704 / 0.696 / 0.688 / 0.687 (0.705), CoSQA dev
    # 0.509 / 0.527 / 0.535 / 0.545 / 0.550 (0.409), golden 0.946 / 0.946 / 0.953 /
    # 0.944 / 0.943 (0.911). 1.0: the golden set's best, +0.13 on code, -0.009 on SciFact.
    # English-only (WordPiece vocabulary): CMRC2018 dev falls from 0.987 to 0.69 fused.
    "local:all-MiniLM-L6-v2-int8": VectorCalibration(
        weight=1.0,
        reads_cjk=False,
        source="issue 8 tuning: SciFact train, CoSQA dev, CMRC2018 dev, golden",
    ),
}


def calibration_for(signature: EmbeddingSignature) -> VectorCalibration:
    return CALIBRATIONS.get(f"{signature.provider}:{signature.model}", UNCALIBRATED)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds CJK ideographs or kana.

    A model that cannot read them sits out the whole question, not only mostly-CJK ones:
    "MIT OpenCourseWare指什么？" is readable to it in part, but the passages that answer
    it are Chinese (CMRC2018 dev: gating only questions at least half CJK left 16 mixed
    ones fused, 0.986 against keyword's 0.987; gating every CJK question, 0.987).
    """
    return CJK_RUN.search(text) is not None
