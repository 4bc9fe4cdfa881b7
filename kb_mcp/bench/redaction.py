"""``kb-mcp bench redaction``: what the redaction rules take out of real public text that
holds no secrets, rule by rule (issue 20: the generic rule's false-positive rate).

Trigger: a rule that catches what nobody listed (``redact.generic``) is only worth having if
it leaves ordinary docs and code alone, and that is a measurement, not an argument.
Outcome: the ``.py``, ``.rst``, ``.md`` and ``.txt`` files under the given folders (default:
this Python's installed packages and ``/usr/share/doc``), shuffled with a fixed seed and
read up to ``--mb`` megabytes, go through the credential rules in their order; each line a
rule changes is counted against that rule, and the generic rule's lines are printed for a
person to judge (that public text holds few real secrets is the premise; the ones it holds
are test fixtures and examples, which is what the samples show).
"""

from __future__ import annotations

import json
import os
import random
import sys
import sysconfig
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

SUFFIXES = (".py", ".rst", ".md", ".txt")
MAX_FILE_BYTES = 2_000_000
GENERIC = "generic.redact_generated_values"


def default_roots() -> list[Path]:
    """This Python's installed packages and the system's package docs."""
    roots = [Path(sysconfig.get_paths()["purelib"]), Path("/usr/share/doc")]
    return [root for root in roots if root.is_dir()]


@dataclass(slots=True)
class RedactionBench:
    files: int = 0
    megabytes: float = 0.0
    lines: int = 0
    seconds: float = 0.0
    lines_by_rule: dict[str, int] = field(default_factory=dict)
    generic_samples: list[tuple[str, str]] = field(default_factory=list)

    def per_mb(self, rule: str) -> float:
        return self.lines_by_rule.get(rule, 0) / self.megabytes if self.megabytes else 0.0


def rule_names() -> dict[int, str]:
    """``id(rule)`` → ``module.NAME`` for every credential rule, found by where it is defined."""
    from kb_mcp import redact

    modules = [getattr(redact, name) for name in dir(redact)]
    modules = [m for m in modules if getattr(m, "__name__", "").startswith("kb_mcp.redact.")]
    names = {}
    for module in modules:
        short = module.__name__.rpartition(".")[2]
        for attribute, value in vars(module).items():
            names.setdefault(id(value), f"{short}.{attribute}")
    return names


def _files(roots: list[Path], seed: int) -> list[Path]:
    found = []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "kb_mcp"))
            found += [Path(folder) / n for n in sorted(names) if n.endswith(SUFFIXES)]
    random.Random(seed).shuffle(found)
    return found


def _texts(roots: list[Path], megabytes: float, seed: int) -> Iterator[tuple[Path, str]]:
    budget = megabytes * 1e6
    for path in _files(roots, seed):
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield path, text
        budget -= len(text.encode("utf-8"))
        if budget <= 0:
            return


def run(roots: list[Path], megabytes: float, seed: int = 1, samples: int = 50) -> RedactionBench:
    """Every credential rule over ``megabytes`` of the files under ``roots``."""
    from kb_mcp.redact import _CREDENTIAL_RULES

    names = rule_names()
    report = RedactionBench()
    counts: dict[str, int] = defaultdict(int)
    started = time.process_time()
    for path, text in _texts(roots, megabytes, seed):
        report.files += 1
        report.megabytes += len(text.encode("utf-8")) / 1e6
        report.lines += text.count("\n") + 1
        for rule in _CREDENTIAL_RULES:
            out = rule(text, [])
            if out != text:
                name = names.get(id(rule), repr(rule)[:40])
                changed = [
                    (a, b) for a, b in zip(text.split("\n"), out.split("\n"), strict=True) if a != b
                ]
                counts[name] += len(changed)
                if name == GENERIC:
                    report.generic_samples += [(str(path), b.strip()[:200]) for _a, b in changed]
            text = out
    report.seconds = time.process_time() - started
    report.lines_by_rule = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    report.generic_samples = report.generic_samples[:samples]
    return report


def table(report: RedactionBench) -> str:
    rows = [
        f"{report.files} files, {report.megabytes:.1f} MB, {report.lines:,} lines, "
        f"{report.seconds:.1f} s CPU",
        f"{'rule':<40} {'lines':>7} {'lines/MB':>9}",
    ]
    rows += [
        f"{rule:<40} {n:>7} {report.per_mb(rule):>9.2f}" for rule, n in report.lines_by_rule.items()
    ]
    rows.append(f"\n{GENERIC}: every line it changed (judge each by hand)")
    rows += [f"  {path}: {line}" for path, line in report.generic_samples]
    return "\n".join(rows)


def main(paths: list[str], megabytes: float, seed: int, samples: int, json_out: str | None) -> int:
    roots = [Path(p).expanduser() for p in paths] or default_roots()
    report = run(roots, megabytes, seed, samples)
    if not report.files:
        print(
            "no .py, .rst, .md or .txt files under " + ", ".join(map(str, roots)), file=sys.stderr
        )
        return 1
    print(table(report))
    if json_out:
        Path(json_out).write_text(json.dumps(asdict(report), indent=2), encoding="utf-8")
    return 0
