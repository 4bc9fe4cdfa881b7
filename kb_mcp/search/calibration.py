"""What the engine knows about each embedding model, measured on the tuning splits. Pure.

A vector leg is only as good as its model, and models differ in ways the engine must
respect: how much weight the leg deserves in the fusion, how low a cosine means "nothing
here is about the question" (cosines are not comparable across models: one model's
unrelated passages sit at 0.1, another's at 0.7), and whether the model reads Chinese and
Japanese at all (an English-only model ranks CJK text at random and drags a fused list
down). Each known model has its row; an unknown one (an Ollama model of the user's
choice) gets equal weight and no cosine floor, so only the lexical floor decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kb_mcp.index.textprep import CJK_RUN

if TYPE_CHECKING:  # embed.base imports numpy: keyword-only search must not
    from kb_mcp.embed.base import EmbeddingSignature

# A question is "mainly CJK" when at least this share of its word characters are CJK
# ideographs or kana: a Chinese question with an English identifier in it still is.
CJK_QUESTION_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class VectorCalibration:
    """One model's place in the fusion."""

    weight: float = 1.0  # RRF weight of the vector leg (the keyword leg's is 1.0)
    cosine_floor: float | None = None  # best-passage cosine below which nothing is relevant
    cosine_rescue: float | None = None  # best cosine at which the lexical floor is waived
    coverage_floor: float | None = None  # the lexical floor beside this model (None: keyword's)
    reads_cjk: bool = True  # False: the leg sits out mainly-CJK questions
    source: str = "not calibrated: equal weight, lexical floor only"


UNCALIBRATED = VectorCalibration()

# provider:model → calibration. Each value names the bench runs it comes from.
CALIBRATIONS: dict[str, VectorCalibration] = {}


def calibration_for(signature: EmbeddingSignature) -> VectorCalibration:
    return CALIBRATIONS.get(f"{signature.provider}:{signature.model}", UNCALIBRATED)


def mainly_cjk(text: str) -> bool:
    """Whether most of the word characters of ``text`` are CJK."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    letters = sum(1 for ch in text if ch.isalnum())
    return letters > 0 and cjk / letters >= CJK_QUESTION_SHARE
