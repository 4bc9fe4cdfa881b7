"""A ranking prior from a file's path: docs and the code that implements a thing first.

On a real corpus (the docs, code and tests of a project) a natural-language question
matches a test file as well as the page that explains the thing, and often better: tests
repeat the feature's words in every function name. An agent asking "how do I set a
timeout" wants the doc page or the module, not ``tests/test_timeouts.py``. So a file's
*path class* (``classify_path``) scales the score the engine orders by, unless the
question asks for that class (``requested_classes``: "which test covers…", "what changed
in 0.28", a test function's name). Pure functions over plain values; the engine applies
them after fusion and before freshness, and reports each ``Adjustment`` on its hit.

Path classes, first match wins (``path`` relative to its source root, ``/``-separated):

=========== ==================================================================
vendored    a folder ``vendor``, ``_vendor``, ``third_party``, ``node_modules``…
generated   ``*_pb2.py``, ``*.min.js``, ``*.generated.*``, lock files…
fixture     a folder ``fixtures``, ``testdata``, ``__snapshots__``, ``cassettes``…
test        a folder ``tests`` / ``test`` / ``__tests__`` / ``spec``, or a name
            ``test_*.py``, ``*_test.py``, ``*_test.go``, ``*.test.ts``,
            ``*.spec.js``, ``conftest.py``…
changelog   a prose file named ``CHANGELOG*``, ``CHANGES*``, ``HISTORY*``,
            ``NEWS*``, ``RELEASE*``, or in lower case ``changelog*``, ``changes``,
            ``history``, ``news``, ``releases``, ``release-notes*``
example     a folder ``examples``, ``docs_src``, ``samples``, ``demo``…
doc         under ``docs`` / ``doc`` / ``documentation``, a ``README*``, or prose
            (``.md``, ``.rst``, ``.txt``, ``.adoc``…)
config      ``pyproject.toml``, ``*.yml``, ``*.ini``, ``Dockerfile``, ``Makefile``…
code        everything else
=========== ==================================================================

A vendored copy that sits in a folder named like a package of its own (Typer keeps Click
in ``typer/_click/``) cannot be told from first-party code by its path, and stays code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

# Multiplicative factors on the score the engine orders documents by (today the keyword
# leg's bm25 score). Tuned by coordinate descent on the `tune` half of bench/realcorpus
# (30 questions; the runs are in bench/realcorpus/README.md), reported on the held-out
# `test` half, checked on the golden set. test 0.5: 0.5 down to 0.2 score alike on the
# tune half, 0.8 loses 0.006 MRR. changelog 0.8: within 0.001 MRR of the best (0.6 and
# below) on the tune half, and the golden set's corrections (a dated changelog entry is
# the answer) lose 6 nDCG points at 0.6. PROMOTE 2.0: 1.5-5 score alike, 1.0 loses
# 0.046 MRR. code stays 1.0: demoting code below docs (0.6-0.85) gains 0.05 MRR on the
# tune half but costs the golden set's code class 3-17 points of nDCG. Not measured, by
# judgement: fixture, vendored and generated files (none ranks in that corpus) take the
# test factor; example and config files moved no result at 0.4-1.0 and stay 1.0.
# Issue 8 moved the prior onto the fused (RRF) score, where a factor reads in ranks
# (×0.5 ≈ 60 ranks, ×0.8 ≈ 15, ×0.95 ≈ 3 at the head). test 0.5 and PROMOTE 2.0 keep
# their realcorpus figures exactly (tune 0.704 / 0.889 / 0.801, test 0.444 / 0.741 /
# 0.599 hit@1 / hit@3 / MRR). changelog 0.8 did too but cost the golden set's
# corrections 12 nDCG points (0.948 → 0.823); re-tuned: 0.9 / 0.95 / 0.97 / 1.0 give
# corrections 0.867 / 0.877 / 0.902 / 0.948 and realcorpus tune MRR 0.801 / 0.800 /
# 0.790 / 0.790, so 0.95 (golden keyword 0.906, hybrid 0.955; realcorpus unchanged).
FACTORS: dict[str, float] = {
    "vendored": 0.5,
    "generated": 0.5,
    "fixture": 0.5,
    "test": 0.5,
    "changelog": 0.95,
    "example": 1.0,
    "config": 1.0,
    "doc": 1.0,
    "code": 1.0,
}
PROMOTE = 2.0  # a file of a class the question asks for ("which test covers…")
REASONS = {
    "vendored": "vendored file",
    "generated": "generated file",
    "fixture": "test fixture",
    "test": "test file",
    "changelog": "changelog",
    "example": "example code",
    "config": "configuration file",
    "doc": "documentation",
    "code": "source code",
}

_VENDOR_DIRS = frozenset(
    "vendor vendored _vendor _vendored third_party third-party thirdparty node_modules "
    "bower_components site-packages".split()
)
_FIXTURE_DIRS = frozenset(
    "fixtures fixture __fixtures__ testdata test_data test-data __snapshots__ snapshots "
    "cassettes".split()
)
_TEST_DIRS = frozenset("tests test __tests__ spec specs e2e".split())
_EXAMPLE_DIRS = frozenset("examples example docs_src samples sample demo demos".split())
_DOC_DIRS = frozenset("docs doc documentation".split())
_PROSE = frozenset(".md .markdown .rst .txt .adoc .asciidoc .org .ipynb".split())
_CONFIG_NAMES = frozenset(
    "pyproject.toml setup.cfg tox.ini noxfile.py makefile justfile dockerfile "
    "manifest.in .gitignore .editorconfig".split()
)
_CONFIG_SUFFIXES = frozenset(".toml .yml .yaml .ini .cfg .lock".split())
_GENERATED = re.compile(
    r"(_pb2(_grpc)?\.py|\.pb\.go|\.min\.(js|css)|[._]generated\.\w+|\.g\.dart"
    r"|^package-lock\.json|^pnpm-lock\.yaml|^go\.sum)$"
)
_TEST_NAME = re.compile(
    r"^(test_.+\.py|.+_test\.(py|go|rb|exs?)|.+\.(test|spec)\.[cm]?[jt]sx?"
    r"|.+_spec\.rb|.+Tests?\.(java|kt|cs|swift)|conftest\.py|tests?\.py)$"
)
# CHANGELOG / HISTORY / NEWS / RELEASE* in capitals is the convention for a project's
# changelog; in lower case only the unambiguous names count ("release-calendar-2024"
# and "history-design-future" are not changelogs).
_CHANGELOG_CAPS = ("CHANGELOG", "CHANGES", "HISTORY", "NEWS", "RELEASE")
_CHANGELOG_LOWER = re.compile(
    r"^(change_?log.*|changes|history|news|releases|release_?notes.*|whats_?new)$"
)


@lru_cache(maxsize=65_536)  # pure, and asked for each of ~100 candidates per search
def classify_path(path: str | None) -> str:
    """The path class of a file (see the module docstring); ``doc`` for a uri or nothing.

    String operations, not ``PurePosixPath``: a library of many files misses the cache
    for most candidates, and three path objects per call cost about 100 µs (half the
    keyword search's fixed cost at 100k chunks, issue 10); the parts, name, suffix and
    stem are pathlib's own (``_name_parts``)."""
    if not path or "://" in path:
        return "doc"
    dirs, name, suffix, _stem = _name_parts(path.lower())
    if dirs & _VENDOR_DIRS:
        return "vendored"
    if _GENERATED.search(name):
        return "generated"
    if dirs & _FIXTURE_DIRS:
        return "fixture"
    _dirs, cased_name, _suffix, cased_stem = _name_parts(path)
    if dirs & _TEST_DIRS or _TEST_NAME.match(cased_name):
        return "test"
    prose = suffix in _PROSE or not suffix
    if prose and _is_changelog(cased_stem):
        return "changelog"
    if dirs & _EXAMPLE_DIRS:
        return "example"
    if prose and (dirs & _DOC_DIRS or name.startswith("readme") or suffix):
        return "doc"
    if name in _CONFIG_NAMES or suffix in _CONFIG_SUFFIXES:
        return "config"
    return "code"


def _name_parts(path: str) -> tuple[set[str], str, str, str]:
    """A POSIX path's folder names, file name, suffix and stem, as ``PurePosixPath``
    gives them (empty and ``.`` parts dropped; a leading-dot name has no suffix)."""
    parts = [p for p in path.split("/") if p and p != "."]
    name = parts[-1] if parts else ""
    dot = name.rfind(".")
    suffix = name[dot:] if 0 < dot < len(name) - 1 else ""
    return set(parts[:-1]), name, suffix, name[: len(name) - len(suffix)]


def _is_changelog(stem: str) -> bool:
    return stem.startswith(_CHANGELOG_CAPS) or bool(
        _CHANGELOG_LOWER.match(stem.lower().replace("-", "_"))
    )


# What a question asks for, by class. A question that mentions a class lifts its demotion
# ("check the output of my app from a pytest test" may want test files as much as docs);
# one that asks for files of that class (``_WANTS``: "which test covers…", a test
# function's name, "what changed in 0.28") promotes them by ``PROMOTE``.
_ASKS = {
    "test": re.compile(
        r"\b(tests?|tested|testing|unit ?tests?|pytest|unittest|test suite|specs?|fixtures?"
        r"|conftest|coverage)\b|\btest_\w+|\w+_test\b|\bTest[A-Z]\w*",
        re.IGNORECASE,
    ),
    "changelog": re.compile(
        r"\b(change ?logs?|release notes?|released?|releases|what'?s new|what changed"
        r"|changed in|deprecat\w*|upgrad\w*|breaking changes?|history|when did|since when"
        r"|which (version|release)|version \d+)\b|\bv?\d+\.\d+(\.\d+)?\b",
        re.IGNORECASE,
    ),
    "example": re.compile(r"(?<!for )\b(examples?|samples?|demos?)\b", re.IGNORECASE),
    "vendored": re.compile(r"\b(vendor\w*|third[- ]party|bundled)\b", re.IGNORECASE),
    "generated": re.compile(r"\b(generated|auto-?generated|codegen)\b", re.IGNORECASE),
    "config": re.compile(
        r"\b(config(uration)? files?|pyproject|setup\.cfg|ya?ml|toml|dockerfile|makefile"
        r"|ci|workflow)\b",
        re.IGNORECASE,
    ),
}
_WANTS = {
    # "during a test" / "in the tests" is where the asker works, not what they look for:
    # "log a user in during a test without the password" wants the test client's docs,
    # and promoting test files put four of them first (Django's docs and code, tried by
    # a new user).
    "test": re.compile(
        r"(?<!during )(?<!\bin )(?<!inside )(?<!within )(?<!from )"
        r"\b(the|which|any|a|what) (unit )?tests?\b(?! (my|our|your|the|this|it)\b)"
        r"|\btests? (that|which|for|of|covering|cover)\b|\btest (files?|suite|cases?)\b"
        r"|\btest_\w+|\w+_test\b|\bTest[A-Z]\w*",
        re.IGNORECASE,
    ),
    "changelog": re.compile(
        r"\b(change ?logs?|release notes?|what changed|changed in|what'?s new|when did"
        r"|since when|which (version|release))\b",
        re.IGNORECASE,
    ),
}
# A question about tests is also about their fixtures.
_ALSO = {"test": ("fixture",)}


def requested_classes(query: str) -> frozenset[str]:
    """The path classes ``query`` mentions, which the prior then does not demote."""
    asked = {name for name, pattern in _ASKS.items() if pattern.search(query)}
    return frozenset(asked | {also for name in asked for also in _ALSO.get(name, ())})


def wanted_classes(query: str) -> frozenset[str]:
    """The path classes ``query`` asks files of, which the prior promotes."""
    return frozenset(name for name, pattern in _WANTS.items() if pattern.search(query))


@dataclass(frozen=True, slots=True)
class Adjustment:
    """What the prior did to one result: why, and the factor its score was scaled by."""

    path_class: str
    factor: float

    @property
    def label(self) -> str:
        """The line a result carries, e.g. ``demoted ×0.5: test file``."""
        if self.factor > 1.0:
            return f"promoted ×{self.factor:g}: {REASONS[self.path_class]}, asked for"
        return f"demoted ×{self.factor:g}: {REASONS[self.path_class]}"


def path_adjustment(
    path: str | None, requested: Iterable[str], wanted: Iterable[str] = ()
) -> Adjustment | None:
    """The adjustment for one file under a question that mentions ``requested`` and asks
    for files of ``wanted``; None when its class is left alone."""
    path_class = classify_path(path)
    if path_class in wanted:
        return Adjustment(path_class, PROMOTE)
    factor = FACTORS[path_class]
    if factor == 1.0 or path_class in requested:
        return None
    return Adjustment(path_class, factor)


def path_adjustments(query: str, paths: dict[str, str | None]) -> dict[str, Adjustment]:
    """Key → adjustment for the ``paths`` (key → path) the prior moves under ``query``."""
    requested, wanted = requested_classes(query), wanted_classes(query)
    found = {key: path_adjustment(path, requested, wanted) for key, path in paths.items()}
    return {key: adj for key, adj in found.items() if adj is not None}
