"""The ranking model: logistic regressions over ``search/features.py``, per leg set.

Why a model and not ordered rules: each rule kb-mcp used to have (floors, demotions,
phrase-triggered passes) was tuned on a handful of questions and carried poorly to
questions nobody tuned for. A model's weights are fitted on public training splits and
its value is measured on data it never saw (docs/retrieval.md, "Learned ranking").

Two jobs, two heads on the same features. The *order* head scores each candidate; its
logit orders them. The *answers* head reads the first candidate's features with the order
head's logit and its margin over the second, and gives the probability that the first
answers at all; below the shipped threshold the search answers with nothing
("abstention"). The threshold was chosen on development questions for few false empties.
Apart, because what orders the candidates of one question is relative (which is best),
while whether the best answers is absolute (does it hold what was asked).

The weights live in ``ranker.json`` beside this module, written by ``kb-mcp bench
train-ranker``: the feature names (a file for other names is refused, not misread), a
mean and scale per feature (standardisation), the weights, the bias and the threshold,
per leg set (``keyword``: keyword legs only; ``hybrid``: with vectors). Pure Python: a
search scores about forty candidates, and the engine imports no numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kb_mcp.errors import Unavailable
from kb_mcp.search.features import NAMES

WEIGHTS_FILE = Path(__file__).with_name("ranker.json")
FORMAT = 1


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


@dataclass(frozen=True, slots=True)
class LinearModel:
    """Standardised logistic regression: logit = bias + Σ wᵢ (xᵢ − meanᵢ) / scaleᵢ."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]

    def logit(self, row: Sequence[float]) -> float:
        total = self.bias
        for x, w, m, s in zip(row, self.weights, self.mean, self.scale, strict=True):
            total += w * (x - m) / s
        return total

    def probability(self, row: Sequence[float]) -> float:
        return sigmoid(self.logit(row))

    def as_json(self) -> dict[str, object]:
        return {
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
        }


# What the answers head reads: the first candidate's order logit, its margin over the
# second candidate's, then the first candidate's features.
ANSWER_NAMES = ("order_logit", "order_margin", *NAMES)


@dataclass(frozen=True, slots=True)
class LegSetModel:
    """The two heads of one leg set, and the abstention threshold."""

    order: LinearModel
    answers: LinearModel
    threshold: float  # P(the first answers) below this: answer with nothing

    def confidence(self, rows: Sequence[Sequence[float]]) -> tuple[list[float], float]:
        """Each row's order logit, and the probability that the best of them answers."""
        logits = [self.order.logit(row) for row in rows]
        if not logits:
            return logits, 0.0
        ranked = sorted(range(len(rows)), key=lambda i: -logits[i])
        first = ranked[0]
        margin = logits[first] - logits[ranked[1]] if len(ranked) > 1 else 10.0
        return logits, self.answers.probability([logits[first], margin, *rows[first]])

    def as_json(self) -> dict[str, object]:
        return {
            "order": self.order.as_json(),
            "answers": self.answers.as_json(),
            "threshold": self.threshold,
        }


@dataclass(frozen=True, slots=True)
class Ranker:
    models: dict[str, LegSetModel]  # leg set ("keyword", "hybrid") → its heads
    trained_on: tuple[str, ...] = ()
    # Passages of the smallest library it was trained on. The absolute features (IDF
    # shares, bm25 over its most) mean little in a library of a few dozen passages, so a
    # smaller one gets the model's order but never an empty answer from it.
    abstains_from: int = 0

    def for_legs(self, legs: Sequence[str]) -> LegSetModel:
        """The model for a search that ran ``legs``: hybrid when vectors ran."""
        return self.models["hybrid" if "vector" in legs else "keyword"]


def parse(data: dict[str, object]) -> Ranker:
    """A ``Ranker`` from the JSON ``kb-mcp bench train-ranker`` writes; ``Unavailable`` when
    the file was written for other features (a stale file must not be misread)."""
    if data.get("format") != FORMAT or tuple(data.get("features", ())) != NAMES:  # type: ignore[arg-type]
        raise Unavailable(
            "the ranking model's weights were trained for other features",
            hint="run `kb-mcp bench train-ranker` to retrain them",
        )
    models = {
        name: LegSetModel(_linear(raw["order"]), _linear(raw["answers"]), float(raw["threshold"]))
        for name, raw in data["models"].items()  # type: ignore[union-attr]
    }
    trained_on = tuple(data.get("trained_on", ()))  # type: ignore[arg-type]
    return Ranker(models, trained_on, int(data.get("abstains_from_passages", 0)))  # type: ignore[arg-type]


def _linear(raw: dict[str, list[float] | float]) -> LinearModel:
    return LinearModel(
        tuple(raw["weights"]),  # type: ignore[arg-type]
        float(raw["bias"]),  # type: ignore[arg-type]
        tuple(raw["mean"]),  # type: ignore[arg-type]
        tuple(raw["scale"]),  # type: ignore[arg-type]
    )


@cache
def shipped() -> Ranker:
    """The weights shipped with kb-mcp."""
    return parse(json.loads(WEIGHTS_FILE.read_text(encoding="utf-8")))
