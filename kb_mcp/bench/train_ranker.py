"""``kb-mcp bench train-ranker``: fit the ranking model (``search/model.py``) and write
``kb_mcp/search/ranker.json``.

Where the examples come from: the training and development splits of the public sets
(``../shared/eval-data``: SciFact train, CoSQA dev, CMRC2018 dev) and the hand-written
sets' development splits (golden, golden2 dev, golden3 dev). Test splits are never read
here. Each question is run through the real engine (``Lookup.ranked``) in each leg set
(``keyword``; ``hybrid`` when an embedder is configured) and yields one row of features
per candidate of the fused head, labelled by its judged grade over the question's top
grade; a document a question marks ``stale`` (superseded, withdrawn, outdated for the
date asked) is labelled 0 whatever its grade.

Absent answers: every judged question is asked a second time with its judged documents
left out (the topic stays, the answer goes), and all its candidates are negatives. The
hand-written sets' abstention questions add real ones. The answers head is fitted on each
question's first candidate (by the order head), labelled by whether the library holds an
answer, and thresholded at the lowest of the sets' ``FALSE_EMPTY`` quantiles.

The fit: L2-regularised logistic regression on standardised features by Newton's method
(numpy), each question weighing the same within its set and each set the same overall,
so an 800-question set does not drown a 60-question one with the hard classes.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kb_mcp.bench import metrics
from kb_mcp.bench.beir import BeirSet, load_beir
from kb_mcp.bench.retrieval import doc_id_from_path, embed, ingest
from kb_mcp.errors import NotFound
from kb_mcp.library import Library
from kb_mcp.search.features import NAMES
from kb_mcp.search.model import ANSWER_NAMES, FORMAT, WEIGHTS_FILE, LegSetModel, LinearModel
from kb_mcp.search.rank import Ranking
from kb_mcp.settings import Settings

# (name, folder or built-in set, split): the tuning ground. Never a test split.
TRAINING_SETS = (
    ("scifact", "scifact", "train"),
    ("cosqa", "cosqa", "dev"),
    ("cmrc2018", "cmrc2018-ctx", "dev"),
    ("golden", "golden", "test"),  # written beside the code it was tuned on: dev material
    ("golden2", "golden2", "dev"),
    ("golden3", "golden3", "dev"),
)
L2 = 0.1  # ridge penalty on standardised weights (per unit of total sample weight)
FALSE_EMPTY = 0.02  # share of answerable development questions the threshold may empty
LEG_SETS = ("keyword", "hybrid")


@dataclass(slots=True)
class Examples:
    """Feature rows of one leg set, with what each row is."""

    rows: list[list[float]] = field(default_factory=list)
    labels: list[float] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # one group per (question, variant)
    group_set: list[str] = field(default_factory=list)  # group → training set name
    group_answerable: list[bool] = field(default_factory=list)
    group_judged: list[dict[str, int]] = field(default_factory=list)  # for nDCG
    group_keys: list[list[str]] = field(default_factory=list)
    group_removed: list[bool] = field(default_factory=list)  # asked with its answer gone

    def add(
        self,
        name: str,
        keys: list[str],
        rows: list[list[float]],
        labels: list[float],
        answerable: bool,
        judged: dict[str, int],
        removed: bool = False,
    ) -> None:
        group = len(self.group_set)
        self.group_removed.append(removed)
        self.group_set.append(name)
        self.group_answerable.append(answerable)
        self.group_judged.append(judged)
        self.group_keys.append(keys)
        self.rows += rows
        self.labels += labels
        self.groups += [group] * len(rows)


def merged(parts: Sequence[Examples], keep: Callable[[str], bool] = lambda _name: True) -> Examples:
    """One ``Examples`` holding the groups of every part whose set ``keep`` accepts,
    renumbered."""
    out = Examples()
    for part in parts:
        for g, idx in _rows_by_group(part).items():
            if keep(part.group_set[g]):
                out.add(
                    part.group_set[g],
                    part.group_keys[g],
                    [part.rows[i] for i in idx],
                    [part.labels[i] for i in idx],
                    part.group_answerable[g],
                    part.group_judged[g],
                    part.group_removed[g],
                )
    return out


def _dataset_path(folder: str, eval_data: Path) -> Path:
    if folder.startswith("golden"):
        return Path(__file__).with_name(folder)
    return eval_data / folder


def _doc_id(path: str | None, key: str) -> str:
    return doc_id_from_path(path) if path else key


def collect(
    library: Library, beir: BeirSet, name: str, modes: Sequence[str], found: dict[str, Examples]
) -> None:
    """Every question of ``beir`` in each of ``modes``, as asked and with its answer gone."""
    for query in beir.queries:
        judged = {d: g for d, g in beir.qrels.get(query.id, {}).items() if g > 0}
        stale = set(query.metadata.get("stale", ()) or ())
        top = max(judged.values(), default=0)
        if not query.text.strip():
            continue  # the search refuses a blank question; it has nothing to rank
        for mode in modes:
            ranked = library.lookup.ranked(query.text, mode, beir.name, frozenset())
            if ranked.ranking is None:
                continue
            leg_set = "hybrid" if "vector" in ranked.plan.legs else "keyword"
            if mode != "keyword" and leg_set == "keyword":
                continue  # vectors did not run (CJK, unusable): the keyword rows have it
            ids = _ids(ranked.ranking)
            labels = [0.0 if d in stale or not top else judged.get(d, 0) / top for d in ids]
            rows = ranked.ranking.features
            found[leg_set].add(name, ids, rows, labels, bool(judged), judged)
            if not judged:
                continue
            # Asked again as if the judged documents were not stored: an absent answer.
            paths = {p.doc_key: _doc_id(p.path, p.doc_key) for p in ranked.ranking.found.values()}
            gone = frozenset(key for key, d in paths.items() if d in judged)
            again = library.lookup.ranked(query.text, mode, beir.name, gone).ranking
            if again is not None:
                rows = again.features
                found[leg_set].add(name, _ids(again), rows, [0.0] * len(rows), False, {}, True)


def _ids(ranking: Ranking) -> list[str]:
    """The BEIR ids of a ranking's fused head, in its order."""
    return [_doc_id(ranking.passage(e.key).path, e.key) for e in ranking.evidence]


def fit(
    rows: list[list[float]], labels: list[float], weight: np.ndarray, l2: float = L2
) -> LinearModel:
    """Weighted, L2-regularised logistic regression on standardised features (Newton)."""
    x = np.asarray(rows, dtype=float)
    y = np.asarray(labels, dtype=float)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(y), 1)), (x - mean) / scale])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2 * weight.sum() * 1e-2)
    penalty[0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ beta, -30, 30)))
        gradient = z.T @ (weight * (p - y)) + penalty * beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian + 1e-9 * np.eye(len(beta)), gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return LinearModel(
        tuple(float(w) for w in beta[1:]),
        float(beta[0]),
        tuple(float(m) for m in mean),
        tuple(float(s) for s in scale),
    )


def _group_weights(group_set: Sequence[str]) -> np.ndarray:
    """Each group's weight: every training set weighs the same, and within it every group."""
    names = sorted(set(group_set))
    sizes = {name: sum(1 for s in group_set if s == name) for name in names}
    return np.asarray([1.0 / (sizes[s] * len(names)) for s in group_set])


def _rows_by_group(examples: Examples) -> dict[int, list[int]]:
    by_group: dict[int, list[int]] = {}
    for i, g in enumerate(examples.groups):
        by_group.setdefault(g, []).append(i)
    return by_group


def fit_leg_set(examples: Examples, l2: float = L2) -> LegSetModel:
    """The order head on every candidate, the answers head on each group's first, and the
    threshold that empties at most ``FALSE_EMPTY`` of each set's answerable questions."""
    per_group = _group_weights(examples.group_set)
    by_group = _rows_by_group(examples)
    weight = np.zeros(len(examples.rows))
    for g, idx in by_group.items():
        weight[idx] = per_group[g] / len(idx)
    order = fit(examples.rows, examples.labels, weight, l2)
    heads, labels, answerable, groups = [], [], [], []
    for g, idx in by_group.items():
        logits = [order.logit(examples.rows[i]) for i in idx]
        ranked = sorted(range(len(idx)), key=lambda j: -logits[j])
        first = ranked[0]
        margin = logits[first] - logits[ranked[1]] if len(ranked) > 1 else 10.0
        heads.append([logits[first], margin, *examples.rows[idx[first]]])
        # Whether the library holds an answer at all (not whether the first is it): an
        # answerable question whose first result is a stale version still has an answer,
        # and emptying it would be a false empty.
        labels.append(1.0 if examples.group_answerable[g] else 0.0)
        answerable.append(examples.group_answerable[g])
        groups.append(g)
    answers = fit(heads, labels, per_group[groups], l2)
    # The threshold holds for every set, not for their pool: a set whose answers score
    # lower must not pay for the others (each set's FALSE_EMPTY quantile; the lowest).
    by_set: dict[str, list[float]] = {}
    for h, a, g in zip(heads, answerable, groups, strict=True):
        if a:
            by_set.setdefault(examples.group_set[g], []).append(answers.probability(h))
    cuts = []
    for tops in by_set.values():
        tops.sort()
        cuts.append(tops[math.floor(FALSE_EMPTY * len(tops))] - 1e-9)
    threshold = max(min(cuts), 0.0) if cuts else 0.0
    return LegSetModel(order, answers, threshold)


def _orders(examples: Examples, model: LegSetModel | None) -> dict[int, tuple[list[str], float]]:
    """Group → (its keys in the model's order, the probability that the first answers)."""
    out = {}
    for g, idx in _rows_by_group(examples).items():
        keys = examples.group_keys[g]
        if model is None:
            out[g] = (keys, 1.0)
            continue
        logits, confidence = model.confidence([examples.rows[i] for i in idx])
        order = sorted(range(len(idx)), key=lambda j: -logits[j])
        out[g] = ([keys[j] for j in order], confidence)
    return out


def report(examples: Examples, model: LegSetModel | None) -> dict[str, dict[str, float]]:
    """Per training set: nDCG@10 of the answerable questions, answerable questions emptied,
    and absent-answer ones emptied (with ``model``'s threshold)."""
    orders = _orders(examples, model)
    out: dict[str, dict[str, float]] = {}
    cut = model.threshold if model is not None else 0.0
    for name in sorted(set(examples.group_set)):
        groups = [g for g in orders if examples.group_set[g] == name]
        answerable = [g for g in groups if examples.group_answerable[g]]
        absent = [
            g for g in groups if not examples.group_answerable[g] and not examples.group_removed[g]
        ]
        removed = [g for g in groups if examples.group_removed[g]]
        out[name] = {
            "ndcg@10": round(
                metrics.mean(
                    metrics.ndcg_at_k(orders[g][0], examples.group_judged[g]) for g in answerable
                ),
                4,
            ),
            "false_empty": round(metrics.mean(float(orders[g][1] < cut) for g in answerable), 4),
            "absent_emptied": round(metrics.mean(float(orders[g][1] < cut) for g in absent), 4),
            "removed_emptied": round(metrics.mean(float(orders[g][1] < cut) for g in removed), 4),
            "questions": len(answerable),
            "absent": len(absent),
        }
    return out


def leave_one_out(found: dict[str, Examples]) -> dict[str, dict[str, dict[str, float]]]:
    """Per leg set and training set: that set scored by a model fitted on the others
    (what the model does on data it was not fitted on), beside the fused order's score."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for leg_set, examples in found.items():
        for held in sorted(set(examples.group_set)):
            rest = merged([examples], lambda name, held=held: name != held)
            alone = merged([examples], lambda name, held=held: name == held)
            if not rest.rows or not alone.rows:
                continue
            scored = report(alone, fit_leg_set(rest))[held]
            scored["fused_ndcg@10"] = report(alone, None)[held]["ndcg@10"]
            out.setdefault(leg_set, {})[held] = scored
    return out


def _collect_set(
    homes: Path,
    name: str,
    folder: str,
    split: str,
    settings: Settings | None,
    eval_data: Path,
    progress: Any,
) -> tuple[dict[str, Examples], int]:
    """One training set's examples per leg set, and its library's passage count."""
    path = _dataset_path(folder, eval_data)
    if not path.exists():
        raise NotFound(
            f"training set {name} not found at {path}",
            hint="name the folder of the public sets with --eval-data, or leave the set "
            "out with --sets",
        )
    beir = load_beir(path, split)
    home = homes / name
    base = settings or Settings(home=home)
    found = {leg_set: Examples() for leg_set in LEG_SETS}
    with Library(
        base.with_overrides(home=home.resolve(), max_files_per_source=len(beir.docs) + 1)
    ) as library:
        ingest(library, beir, progress)
        modes = ["keyword"]
        if library.settings.embedder != "none":
            embed(library, progress)
            modes.append("hybrid")
        collect(library, beir, name, modes, found)
        return found, library.lookup.fts.chunk_count()


def train(
    homes: Path,
    settings: Settings | None = None,
    sets: Sequence[tuple[str, str, str]] = TRAINING_SETS,
    output: Path = WEIGHTS_FILE,
    progress: Any = None,
    cache: Path | None = None,
    eval_data: Path = Path("../shared/eval-data"),
    held_out: bool = False,
) -> dict[str, Any]:
    """Collect, fit, threshold and write the weights; the report says what each set
    scores in-sample with the fused order and with the model. With ``cache`` (a folder)
    each set's examples are kept there and read instead of collected again. With
    ``held_out`` nothing is written: each set is scored by a model fitted on the others."""
    parts: dict[str, list[Examples]] = {leg_set: [] for leg_set in LEG_SETS}
    smallest = 1 << 62
    for name, folder, split in sets:
        kept = cache / f"{name}-{split}.pkl" if cache is not None else None
        if kept is not None and kept.exists():
            found, passages = pickle.loads(kept.read_bytes())
        else:
            found, passages = _collect_set(
                homes, name, folder, split, settings, eval_data, progress
            )
            if kept is not None:
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_bytes(pickle.dumps((found, passages)))
        smallest = min(smallest, passages)
        for leg_set, examples in found.items():
            parts[leg_set].append(examples)
    found = {leg_set: merged(p) for leg_set, p in parts.items()}
    if held_out:  # measure only: nothing is written
        return {"leave_one_set_out": leave_one_out(found)}
    models: dict[str, LegSetModel] = {}
    summary: dict[str, Any] = {}
    for leg_set, examples in found.items():
        if not examples.rows:
            continue
        model = models[leg_set] = fit_leg_set(examples)
        summary[leg_set] = {
            "fused": report(examples, None),
            "model": report(examples, model),
            "threshold": round(model.threshold, 4),
            "order": dict(zip(NAMES, (round(w, 3) for w in model.order.weights), strict=True)),
            "answers": dict(
                zip(ANSWER_NAMES, (round(w, 3) for w in model.answers.weights), strict=True)
            ),
        }
    if "hybrid" not in models and "keyword" in models:
        models["hybrid"] = models["keyword"]
    data = {
        "format": FORMAT,
        "features": list(NAMES),
        "models": {k: m.as_json() for k, m in models.items()},
        "trained_on": sorted({n for e in found.values() for n in e.group_set}),
        "abstains_from_passages": smallest,
    }
    output.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return summary
