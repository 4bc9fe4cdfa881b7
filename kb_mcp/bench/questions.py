"""``kb-mcp bench questions``: agent questions over a real folder corpus, scored per file.

The BEIR bench (``bench/retrieval.py``) writes a synthetic corpus; this one points the
library at folders as a user would: each top-level folder of ``corpus`` becomes a folder
source (registered and synced like ``kb-mcp add``), and every question runs through
``library.lookup.search`` over the whole library, unscoped, as an agent asks. A result counts
when its file, relative to the corpus root, is one of the question's gold paths.

The set is JSON lines (``bench/realcorpus/README.md``): ``id``, ``question``, ``gold``
(paths; ``[]`` when the answer is not in the corpus), ``class``, ``split``, ``note``.
Scores: hit@1, hit@3 and MRR@10 over the questions with gold; abstention (questions
without gold answered with nothing at all: any result is a failure) and false-empty
(questions with gold answered with nothing).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_mcp.bench import metrics
from kb_mcp.errors import InvalidInput, NotFound
from kb_mcp.settings import Settings

if TYPE_CHECKING:  # the CLI reads this module's constants while building its parser,
    # for every command, `serve` included: the library loads only when the bench runs
    from kb_mcp.library import Library
    from kb_mcp.search.engine import Hit

Progress = Callable[[int, int, str], None]
REAL_CORPUS_SET = Path(__file__).parent / "realcorpus" / "questions.jsonl"
"""The real-corpus question set shipped with the package (see realcorpus/README.md)."""
SPLITS = ("all", "tune", "test")
RUN_DEPTH = 10  # MRR@10 reads ten results
SHOWN = 3  # results kept per question in the JSON report, for a reviewer
_LINE_HINT = "each line is one JSON object: id, question, gold (list of paths), class, split, note"


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    gold: tuple[str, ...]
    question_class: str
    split: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """One question's ranked files (corpus-relative) and what adjusted the shown ones."""

    question: Question
    ranked: tuple[str, ...]
    adjustments: tuple[tuple[str, ...], ...]
    reason: str | None
    latency_ms: float

    @property
    def gold_rank(self) -> int | None:
        """1-based rank of the first gold file, or None when none was returned."""
        return next((i for i, p in enumerate(self.ranked, 1) if p in self.question.gold), None)


@dataclass(frozen=True, slots=True)
class Scores:
    hit1: float
    hit3: float
    mrr10: float
    n: int
    abstained: float
    false_empty: float
    n_absent: int

    def to_json(self) -> dict[str, float]:
        return {
            "hit@1": round(self.hit1, 4),
            "hit@3": round(self.hit3, 4),
            "mrr@10": round(self.mrr10, 4),
            "n": self.n,
            "abstained": round(self.abstained, 4),
            "false_empty": round(self.false_empty, 4),
            "absent_queries": self.n_absent,
        }


@dataclass(frozen=True, slots=True)
class QuestionsReport:
    set_name: str
    split: str
    mode: str
    documents: int
    overall: Scores
    per_class: dict[str, Scores]
    answers: tuple[Answer, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "set": self.set_name,
            "split": self.split,
            "mode": self.mode,
            "documents": self.documents,
            "metrics": self.overall.to_json(),
            "per_class": {name: s.to_json() for name, s in self.per_class.items()},
            "questions": [_answer_json(a) for a in self.answers],
        }


def _answer_json(answer: Answer) -> dict[str, Any]:
    return {
        "id": answer.question.id,
        "class": answer.question.question_class,
        "gold_rank": answer.gold_rank,
        "top": [
            {"path": path, "adjustments": list(adj)}
            for path, adj in zip(answer.ranked[:SHOWN], answer.adjustments, strict=False)
        ],
        "reason": answer.reason,
    }


def parse_question(line: str, where: str) -> Question:
    """One JSONL line → ``Question``; a malformed line names its place and stops the run."""
    try:
        raw = json.loads(line)
        gold = raw["gold"]
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            raise TypeError("gold must be a list of paths")
        return Question(
            id=str(raw["id"]),
            text=str(raw["question"]),
            gold=tuple(gold),
            question_class=str(raw["class"]),
            split=str(raw.get("split", "test")),
            note=str(raw.get("note", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{where}: not a question ({exc})", hint=_LINE_HINT) from exc


def load_questions(path: Path, split: str = "all") -> list[Question]:
    """The questions of ``path`` in ``split`` (``all``, ``tune`` or ``test``)."""
    if split not in SPLITS:
        raise InvalidInput(f"unknown split {split!r}; use one of: {', '.join(SPLITS)}")
    if not path.is_file():
        raise NotFound(f"no question set at {path}", hint=_LINE_HINT)
    questions = [
        parse_question(line, f"{path}:{n}")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.strip()
    ]
    return [q for q in questions if split == "all" or q.split == split]


def register_corpus(library: Library, corpus: Path, progress: Progress | None) -> None:
    """Every top-level folder of ``corpus`` as a folder source named after it, synced."""
    if not corpus.is_dir():
        raise NotFound(f"no corpus folder at {corpus}", hint="pass --corpus DIR")
    known = {Path(s.root).resolve() for s in library.folders.folder_sources()}
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir() and p.name[0] != "."):
        if folder.resolve() not in known:
            library.folders.add_folder(folder, folder.name)
    library.folders.sync(progress=progress)


def corpus_path(hit: Hit, roots: dict[str, Path], corpus: Path) -> str:
    """The hit's file relative to the corpus root ('' when it lies outside the corpus)."""
    root = roots.get(hit.source or "")
    if root is None or not hit.path:
        return ""
    try:
        return (root / hit.path).relative_to(corpus).as_posix()
    except ValueError:
        return ""


def ask(library: Library, questions: Iterable[Question], corpus: Path, mode: str) -> list[Answer]:
    roots = {s.name: Path(s.root).resolve() for s in library.folders.folder_sources()}
    answers = []
    for question in questions:
        started = time.perf_counter()
        result = library.lookup.search(question.text, top_k=RUN_DEPTH, mode=mode)
        elapsed = (time.perf_counter() - started) * 1000
        answers.append(
            Answer(
                question,
                tuple(corpus_path(h, roots, corpus) for h in result.hits),
                tuple(tuple(a.describe() for a in h.adjustments) for h in result.hits[:SHOWN]),
                result.reason,
                elapsed,
            )
        )
    return answers


def score_answers(answers: Sequence[Answer]) -> Scores:
    """File-level hit@1, hit@3, MRR@10, abstention and false-empty rates."""
    judged = [
        (list(a.ranked), dict.fromkeys(a.question.gold, 1)) for a in answers if a.question.gold
    ]
    absent = [a for a in answers if not a.question.gold]
    return Scores(
        hit1=metrics.mean(metrics.hit_at_k(r, g, 1) for r, g in judged),
        hit3=metrics.mean(metrics.hit_at_k(r, g, 3) for r, g in judged),
        mrr10=metrics.mean(metrics.mrr_at_k(r, g, 10) for r, g in judged),
        n=len(judged),
        abstained=metrics.mean(0.0 if a.ranked else 1.0 for a in absent),
        false_empty=metrics.mean(0.0 if r else 1.0 for r, _ in judged),
        n_absent=len(absent),
    )


def run_questions_bench(
    question_set: Path,
    corpus: Path,
    *,
    split: str = "all",
    mode: str = "auto",
    home: Path | None = None,
    progress: Progress | None = None,
    settings: Settings | None = None,
) -> QuestionsReport:
    """Register and sync ``corpus`` (in ``home``, or a temporary one), ask, score."""
    questions = load_questions(question_set, split)
    corpus = corpus.expanduser().resolve()
    temp = None if home else Path(tempfile.mkdtemp(prefix="kb-mcp-questions-"))
    library_home = (home or temp).resolve()
    settings = (settings or Settings(home=library_home)).with_overrides(home=library_home)
    try:
        from kb_mcp.library import Library

        with Library(settings) as lib:
            register_corpus(lib, corpus, progress)
            if mode != "keyword":  # vectors first, as `kb-mcp add` waits for them
                lib.vectors.embed_pending(progress=progress)
            answers = ask(lib, questions, corpus, mode)
            documents = lib.catalog.overview().documents
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    classes = sorted({a.question.question_class for a in answers})
    return QuestionsReport(
        set_name=question_set.name,
        split=split,
        mode=mode,
        documents=documents,
        overall=score_answers(answers),
        per_class={
            c: score_answers([a for a in answers if a.question.question_class == c])
            for c in classes
        },
        answers=tuple(answers),
    )


def report_table(report: QuestionsReport) -> str:
    """The printed table: overall, then one row per class, then abstention."""
    head = f"{'class':<12}{'hit@1':>8}{'hit@3':>8}{'mrr@10':>8}{'n':>5}"
    lines = [
        f"{report.set_name} (split {report.split}, mode {report.mode}): "
        f"{report.documents} documents, {len(report.answers)} questions",
        head,
        _row("all", report.overall),
        *(_row(name, s) for name, s in report.per_class.items() if s.n),
    ]
    o = report.overall
    if o.n_absent:
        lines.append(
            f"abstention: {o.abstained:.3f} of {o.n_absent} absent-answer questions answered "
            f"empty; false-empty rate {o.false_empty:.3f}"
        )
    return "\n".join(lines)


def _row(name: str, s: Scores) -> str:
    return f"{name:<12}{s.hit1:>8.3f}{s.hit3:>8.3f}{s.mrr10:>8.3f}{s.n:>5}"


def write_json(report: QuestionsReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
