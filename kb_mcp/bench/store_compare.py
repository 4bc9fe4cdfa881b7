"""``python -m kb_mcp.bench.store_compare A B``: did two libraries answer alike? (issue 24)

``A`` and ``B`` are the ``--runs`` files of two ``kb-mcp bench retrieval`` runs of the
same split and mode — typically one library on SQLite and one on PostgreSQL
(``--store URL``) built from the same folder. Reported: the questions whose top documents
differ (ids in order), the largest score difference among the questions that agree, and
each run's latency. The issue's target is no difference in keyword mode; in hybrid mode
pgvector adds its inner products in its own order, so scores differ by float noise and a
near-tie may swap, which the nDCG@10 of both reports bounds.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kb_mcp.bench import metrics


@dataclass(slots=True)
class Answer:
    ranked: list[str]
    scores: list[float]
    ms: float


@dataclass(slots=True)
class Agreement:
    questions: int
    different: list[str]  # question ids whose top documents differ
    max_score_difference: float  # over the questions whose top documents agree
    ms: tuple[list[float], list[float]]


def read_runs(path: Path) -> dict[str, Answer]:
    answers = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        answers[row["query"]] = Answer(row["ranked"], row["scores"], row["ms"])
    return answers


def agreement(first: dict[str, Answer], second: dict[str, Answer]) -> Agreement:
    """Both runs over the questions they share (a run on a subset compares on it)."""
    shared = [q for q in first if q in second]
    different = [q for q in shared if first[q].ranked != second[q].ranked]
    worst = max(
        (
            abs(a - b)
            for q in shared
            if q not in different
            for a, b in zip(first[q].scores, second[q].scores, strict=True)
        ),
        default=0.0,
    )
    ms = ([first[q].ms for q in shared], [second[q].ms for q in shared])
    return Agreement(len(shared), different, worst, ms)


def report(result: Agreement, names: tuple[str, str]) -> str:
    lines = [
        f"{result.questions} questions; top documents differ on {len(result.different)}; "
        f"largest score difference where they agree {result.max_score_difference:.2e}"
    ]
    for name, ms in zip(names, result.ms, strict=True):
        p50, p95 = metrics.percentile(ms, 50), metrics.percentile(ms, 95)
        lines.append(f"{name}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    if result.different:
        lines.append("differ: " + ", ".join(result.different[:20]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kb_mcp.bench.store_compare", description=__doc__
    )
    parser.add_argument("first", type=Path, help="a --runs file of kb-mcp bench retrieval")
    parser.add_argument("second", type=Path, help="the other library's --runs file")
    args = parser.parse_args(argv)
    result = agreement(read_runs(args.first), read_runs(args.second))
    print(report(result, (args.first.name, args.second.name)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
