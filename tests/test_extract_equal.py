"""The extractor's speed-ups change nothing it extracts (issue 9, ingest cost).

``kb_mcp.graph.extract`` is checked against ``extract_oracle`` (the extractor before
them, kept only in the tests) on varied real text, chunked as a sync chunks it: this
repository's docs, README and source, its tests read as prose (their Chinese
strings included), and the golden corpora (Chinese documents among them); then on whole
files at once (many units, the mention and pair caps), on hostile shapes (the candidate
cap, URLs of every length, Unicode whitespace, CRLF), and on seeded random text built
from the characters the patterns and gates turn on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import extract_oracle as oracle
import pytest

from kb_mcp.chunk import split_document
from kb_mcp.graph import extract as fast
from kb_mcp.ingest import readers

ROOT = Path(__file__).resolve().parent.parent
Sample = tuple[str, tuple[str, ...], bool]  # text, heading path, code


def _file_samples() -> Iterator[tuple[str, Sample]]:
    """Each chunk of the repository's own files, chunked as a sync does, then each file
    whole (as prose, and as code for a source file)."""
    paths = [
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "README.md",
        *sorted((ROOT / "kb_mcp").rglob("*.py")),
        *sorted((ROOT / "kb_mcp" / "bench").rglob("README.md")),
        *sorted((ROOT / "tests").glob("test_*.py")),
    ]
    for path in paths:
        converted = readers.convert_bytes(path.read_bytes(), readers.format_key(path))
        as_prose = path.parent.name == "tests"  # test files read as prose: CJK strings
        kind = "markdown" if as_prose else converted.kind
        code = kind == "code"
        name = str(path.relative_to(ROOT))
        for chunk in split_document(converted.markdown, kind, converted.language):
            yield f"{name}#{chunk.ordinal}", (chunk.text, chunk.heading_path, code)
        yield f"{name} whole", (converted.markdown, (path.name,), False)
        if code:
            yield f"{name} whole code", (converted.markdown, (), True)


def _golden_samples() -> Iterator[tuple[str, Sample]]:
    for corpus in ("golden", "golden2"):
        for line in (ROOT / "kb_mcp" / "bench" / corpus / "corpus.jsonl").open(encoding="utf-8"):
            doc = json.loads(line)
            for chunk in split_document(doc["text"], "markdown"):
                yield (
                    f"{corpus}/{doc['_id']}#{chunk.ordinal}",
                    (chunk.text, chunk.heading_path, False),
                )


def _hostile_samples() -> Iterator[tuple[str, Sample]]:
    # Over MAX_CANDIDATES distinct keys of several kinds: the cap drops by order.
    many = " ".join(
        f"svc_{i}_x Service{i}Handler mod{i}.attr{i} ab-{i}x OPS-{i} Name{i}x" for i in range(400)
    )
    yield "candidate cap", (many, ("Heading One",), False)
    yield "candidate cap, units", (many.replace(" Name", "\n\n- Name"), (), False)
    yield "candidate cap, code", (many.replace(" mod", "\nclass Mod"), (), True)
    schemes = ["h", "ht", "http", "https", "git+ssh", "a" * 15, "a" * 16, "a" * 17, "X1.-+y"]
    urls = " ".join(f"see {s}://Host{i}.example/Path_{i}?q=v1.2 " for i, s in enumerate(schemes))
    yield "urls", (urls + " ://bare a://b://c 1http://x _http://y" + urls, (), False)
    yield "urls, adjacent", ("(https://a.b/C_d)https://e.f/G_h`x://y`", (), False)
    spaces = "\u2028\x1c\xa0\u3000\x85\t\r\n"
    yield (
        "unicode whitespace",
        (
            "".join(f"foo_bar{c}Mod.attr{c}ab-cd{c}OPS-1{c}BigName{c}" for c in spaces),
            (),
            False,
        ),
    )
    yield "crlf", ("# Title\r\n\r\n- One_two\r\n- Three.four\r\n\r\nTeam Atlas here\r\n", (), False)
    yield (
        "definitions",
        (
            "def first(): pass\n  export async function second\n\tclass Third:\n"
            "fn fourth\nfunc  fifth\ninterface Sixth\nstruct seventh\n defx no\n"
            "function\nclass\n\n   def eighth_one\n",
            (),
            True,
        ),
    )
    yield "newline first", ("\ndef a_b(): pass\n- item_one\n", (), False)
    yield "non-ascii words", ("éfoo_bar Kelvin_sign naïve.attr x.éy Ölfeld Ärger AÄB-12", (), False)
    yield "empty", ("", (), False)
    yield (
        "cjk",
        (
            "「搜索集群」由**阿特拉斯团队**负责。《运维手册》【值班频道】“发布流程”。",
            ("运维 指南",),
            False,
        ),
    )


# The characters the patterns, gates and unit breaks turn on, and some they must not.
_ALPHABET = (
    list("abcvxyzABCOPSTV0123456789")
    + list("_.-#@`*:/|>+()[]\"' \t\n\n")
    + ["def ", "class ", "fn ", "export ", "async ", "**", "://", "http", "v1.", "- ", "1. "]
    + ["The ", "Team ", "TODO", "é", "Ö", "搜索", "集群", "「", "」", "《", "》", "\u2028", "\xa0"]
)


def _random_samples(count: int = 600) -> Iterator[tuple[str, Sample]]:
    rng = random.Random(20261202)
    for i in range(count):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(0, 300)))
        headings = tuple(
            rng.choice(["", "Setup", "Team Atlas", "搜索 集群", "a b c d e"])
            for _ in range(rng.randrange(3))
        )
        yield f"random {i}", (text, headings, rng.random() < 0.3)


def _all_samples() -> list[tuple[str, Sample]]:
    return [*_file_samples(), *_golden_samples(), *_hostile_samples(), *_random_samples()]


def _differences(samples: list[tuple[str, Sample]], wanted: list | None = None) -> list[str]:
    """The samples whose extraction differs from the oracle's (its results are appended
    to ``wanted``)."""
    wrong = []
    for name, (text, headings, code) in samples:
        want = oracle.extract(text, headings, code=code)
        got = fast.extract(text, headings, code=code)
        same = [tuple(m) for m in got.mentions] == [tuple(m) for m in want.mentions]
        if not same or got.pairs != want.pairs:
            wrong.append(name)
        if wanted is not None:
            wanted.append(want)
    return wrong


def test_extraction_equals_the_oracle_on_real_and_hostile_text() -> None:
    """issue 9 Done-when (ingest cost): the faster extractor's mentions (keys, spellings,
    kinds, weights, order) and pairs equal the oracle's on every sample."""
    samples, found = _all_samples(), []
    assert _differences(samples, found) == []
    # The sample exercises what it claims: every kind, code chunks, the caps.
    kinds = {m.kind for f in found for m in f.mentions}
    assert kinds == set(fast.KINDS)
    assert sum(code for _n, (_t, _h, code) in samples) > 300
    assert sum(len(f.mentions) == fast.MAX_MENTIONS for f in found) > 20
    assert sum(len(f.pairs) == fast.MAX_PAIRS for f in found) > 20
    assert sum(len(f.mentions) for f in found) > 50_000


def test_the_candidate_cap_is_reached_in_the_sample() -> None:
    """The hostile samples hold more distinct keys than ``MAX_CANDIDATES``, so the
    equality above covers which keys the cap drops (the one order-dependent rule)."""
    text, _headings, _code = dict(_hostile_samples())["candidate cap"]
    tally = oracle._Tally()
    oracle._body(tally, text)
    assert len(tally.count) == oracle.MAX_CANDIDATES


@pytest.mark.parametrize("name", ["urls", "definitions", "unicode whitespace"])
def test_a_changed_extractor_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison fails when the extractor differs (here: URLs not blanked, the
    first line's definition skipped, or the word view given every word but the first)."""
    sample = dict(_hostile_samples())[name]
    assert _differences([(name, sample)]) == []
    if name == "urls":
        monkeypatch.setattr(fast, "_without_urls", lambda text: text)
    elif name == "definitions":
        definitions = fast._definitions
        monkeypatch.setattr(
            fast, "_definitions", lambda starts, text: definitions(starts, text)[1:]
        )
    else:
        real = fast._separated_words
        monkeypatch.setattr(
            fast,
            "_separated_words",
            lambda text, starts, code: real(text.split(None, 1)[-1], starts, code),
        )
    assert _differences([(name, sample)]) == [name]
