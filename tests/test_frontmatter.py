"""YAML frontmatter: split, render, and the date / list fields read from it.

Guards against: a stray ``---`` or broken YAML making a note unindexable, body line
numbers that drift from the file, and unicode mangled on the way back out.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from kb_mcp.ingest.readers import convert_bytes
from kb_mcp.library import Library
from kb_mcp.text.frontmatter import (
    MAX_TITLE_CHARS,
    Frontmatter,
    cap_title,
    meta_date,
    meta_list,
    render_frontmatter,
    split_frontmatter,
)


def test_split_frontmatter_without_frontmatter_returns_whole_text() -> None:
    text = "# Title\n\nBody text.\n"
    assert split_frontmatter(text) == Frontmatter({}, text, 1)
    assert split_frontmatter("") == Frontmatter({}, "", 1)


def test_split_frontmatter_with_frontmatter() -> None:
    text = "---\ntitle: Install notes\ntags: [build, ci]\n---\n# Install\nRun make.\n"
    assert split_frontmatter(text) == Frontmatter(
        meta={"title": "Install notes", "tags": ["build", "ci"]},
        body="# Install\nRun make.\n",
        body_start_line=5,
    )


def test_split_frontmatter_body_start_line_is_the_bodys_line_in_the_file() -> None:
    text = "---\na: 1\nb: 2\nc: 3\n---\nfirst body line\nsecond"
    split = split_frontmatter(text)
    assert text.split("\n")[split.body_start_line - 1] == "first body line"
    assert split.body_start_line == 6


def test_split_frontmatter_accepts_dots_closing_fence_and_crlf() -> None:
    assert split_frontmatter("---\na: 1\n...\nbody") == Frontmatter({"a": 1}, "body", 4)
    assert split_frontmatter("---\r\na: 1\r\n---\r\nbody\r\n") == Frontmatter(
        {"a": 1}, "body\r\n", 4
    )


def test_split_frontmatter_empty_block_is_empty_meta() -> None:
    assert split_frontmatter("---\n---\nbody") == Frontmatter({}, "body", 3)


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: [unclosed\n---\nbody",
        "---\n: : :\n  - bad\n---\nbody",
        "---\nkey: 'open\n---\nbody",
    ],
)
def test_split_frontmatter_malformed_yaml_is_body(text: str) -> None:
    split = split_frontmatter(text)
    assert (split.meta, split.body, split.body_start_line) == ({}, text, 1)
    assert split.problem is not None and split.problem.startswith("frontmatter ignored: invalid")


@pytest.mark.parametrize("block", ["- a\n- b", "just a string", "42", "[1, 2]"])
def test_split_frontmatter_non_mapping_yaml_is_body(block: str) -> None:
    text = f"---\n{block}\n---\nbody"
    split = split_frontmatter(text)
    assert (split.meta, split.body, split.body_start_line) == ({}, text, 1)
    assert split.problem is not None and "not a mapping" in split.problem


def test_split_frontmatter_unclosed_fence_is_body() -> None:
    text = "---\nThis note starts with a rule.\nNo closing fence."
    assert split_frontmatter(text) == Frontmatter({}, text, 1)


def test_split_frontmatter_fence_not_on_first_line_is_body() -> None:
    text = "\n---\na: 1\n---\nbody"
    assert split_frontmatter(text) == Frontmatter({}, text, 1)


def test_render_frontmatter_split_round_trip_with_unicode() -> None:
    meta = {
        "title": "机器学习 — café notes",
        "tags": ["日本語", "über", "한국어"],
        "date": date(2024, 3, 1),
        "weird": "---",
        "multi": "line one\n---\nline three",
    }
    body = "# 正文\n\n---\nA rule above, ünïcödé below.\n"
    rendered = render_frontmatter(meta, body)
    assert "机器学习 — café notes" in rendered  # written as UTF-8, not \u escapes
    assert split_frontmatter(rendered) == Frontmatter(
        meta, body, rendered.split("\n").index("# 正文") + 1
    )


def test_render_frontmatter_keeps_key_order_and_body_unchanged() -> None:
    rendered = render_frontmatter({"z": 1, "a": 2}, "\nbody\n\n")
    assert rendered == "---\nz: 1\na: 2\n---\n\nbody\n\n"


def test_meta_date_from_date_and_datetime() -> None:
    assert meta_date({"date": date(2024, 1, 5)}, "date") == "2024-01-05"
    assert meta_date({"date": datetime(2024, 1, 5, 10, 30)}, "date") == "2024-01-05T10:30:00"
    aware = datetime(2024, 1, 5, 10, 30, tzinfo=timezone(timedelta(hours=2)))
    assert meta_date({"date": aware}, "date") == "2024-01-05T10:30:00+02:00"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-01-05T10:30:00", "2024-01-05T10:30:00"),
        ("2024-01-05T10:30:00Z", "2024-01-05T10:30:00+00:00"),
        (" 2024-01-05 10:30 ", "2024-01-05T10:30:00"),
        ("2024-01-05 weekly sync", "2024-01-05"),
    ],
)
def test_meta_date_from_string_variants(value: str, expected: str) -> None:
    assert meta_date({"date": value}, "date") == expected


def test_meta_date_same_for_quoted_and_unquoted_yaml_date() -> None:
    unquoted = split_frontmatter("---\ndate: 2024-01-05\n---\n").meta
    quoted = split_frontmatter("---\ndate: '2024-01-05'\n---\n").meta
    assert meta_date(unquoted, "date") == meta_date(quoted, "date") == "2024-01-05"


def test_meta_date_first_key_holding_a_date_wins() -> None:
    meta = {"date": "someday", "updated": datetime(2024, 2, 1, tzinfo=UTC), "created": "2020-01-01"}
    assert meta_date(meta, "date", "updated", "created") == "2024-02-01T00:00:00+00:00"
    assert meta_date(meta, "created", "updated") == meta_date({"d": "2020-01-01"}, "d")


@pytest.mark.parametrize("value", [None, "", "   ", "not a date", 20240105, ["2024-01-05"]])
def test_meta_date_none_without_a_date(value: object) -> None:
    assert meta_date({"date": value}, "date") is None
    assert meta_date({}, "date") is None


def test_meta_list_variants() -> None:
    meta = {
        "tags": ["build", " ", "ci", 3],
        "one": "solo",
        "blank": "  ",
        "nothing": None,
        "number": 7,
    }
    assert meta_list(meta, "tags") == ("build", "ci", "3")
    assert meta_list(meta, "one") == ("solo",)
    assert meta_list(meta, "blank") == ()
    assert meta_list(meta, "nothing") == ()
    assert meta_list(meta, "number") == ()
    assert meta_list(meta, "missing") == ()


def test_meta_list_drops_null_items() -> None:
    meta = split_frontmatter("---\ntags:\n  - build\n  -\n---\n").meta
    assert meta_list(meta, "tags") == ("build",)


# --- hostile frontmatter (issue 7 item 13) --------------------------------------------------

_BOMB = "\n".join(
    [
        "---",
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        "title: *i",
        "---",
        "# Laughs",
        "",
        "The body of a note with a hostile header.",
    ]
)


def test_split_frontmatter_alias_bomb_is_refused_in_milliseconds() -> None:
    """issue 7 item 13: ~400 bytes that expand to 9^9 strings are refused unexpanded."""
    assert len(_BOMB) < 600

    # CPU time of this thread: other processes on a loaded machine do not count.
    started = time.thread_time()
    split = split_frontmatter(_BOMB)
    elapsed = time.thread_time() - started

    assert elapsed < 0.05
    assert (split.meta, split.body, split.body_start_line) == ({}, _BOMB, 1)
    assert split.problem == (
        "frontmatter ignored: YAML anchors and aliases are not accepted (line 2)"
    )


def test_split_frontmatter_refuses_a_single_anchor_and_alias() -> None:
    """issue 7 item 13: even a harmless-looking alias is refused, naming its line."""
    split = split_frontmatter("---\ntags: [a]\ntitle: &t Hello\nalt: *t\n---\nbody\n")
    assert split.meta == {}
    assert (
        split.problem == "frontmatter ignored: YAML anchors and aliases are not accepted (line 3)"
    )


def test_split_frontmatter_drops_fields_of_the_wrong_shape_and_keeps_the_rest() -> None:
    """issue 7 item 13: title must be text and tags a list of texts."""
    text = "---\ntitle: {nested: map}\ntags: [[a, b], c]\ndate: 2024-05-01\n---\nbody\n"

    split = split_frontmatter(text)

    assert split.meta == {"date": date(2024, 5, 1)}
    assert split.body == "body\n"
    assert split.problem == (
        "frontmatter fields ignored: title (a dict, expected text), tags (expected a list of texts)"
    )


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ("title: " + "x" * 70_000, "it is 70,007 characters, over 65,536"),
        ("deep: " + "[" * 40 + "]" * 40, "nested deeper than 16 levels"),
        ("n: " + "9" * 5_000, "unreadable value (ValueError)"),
    ],
)
def test_split_frontmatter_oversized_deep_or_unreadable_is_ignored(block: str, reason: str) -> None:
    """issue 7 item 13: size and depth are capped; a value the loader chokes on is refused."""
    text = f"---\n{block}\n---\nbody\n"

    started = time.thread_time()  # CPU time: other processes do not count
    split = split_frontmatter(text)

    assert time.thread_time() - started < 0.5
    assert (split.meta, split.problem) == ({}, f"frontmatter ignored: {reason}")


def test_cap_title_cuts_long_titles_with_an_ellipsis() -> None:
    """issue 7 item 13: folder titles are capped like agent titles (300 by default)."""
    assert cap_title("Short") == "Short"
    capped = cap_title("word " * 200)
    assert len(capped) <= MAX_TITLE_CHARS
    assert capped.endswith("…")


def test_render_frontmatter_never_writes_aliases() -> None:
    """issue 7 item 13: what we write, split_frontmatter reads back (no &anchors)."""
    shared = ["a", "b"]
    text = render_frontmatter({"tags": shared, "supersedes": shared}, "body")
    assert "&" not in text and "*" not in text
    assert split_frontmatter(text).meta == {"tags": ["a", "b"], "supersedes": ["a", "b"]}


def test_folder_file_with_hostile_frontmatter_is_indexed_with_a_small_title(
    library: Library, tmp_path: Path
) -> None:
    """issue 7 item 13: the bomb file is indexed (frontmatter ignored, title from its H1), and
    a 5,000-character frontmatter title is capped."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "bomb.md").write_text(_BOMB, encoding="utf-8")
    (folder / "long.md").write_text(f"---\ntitle: {'Long ' * 1000}\n---\nZebrafish.\n")
    library.folders.add_folder(folder)

    started = time.perf_counter()
    [report] = library.folders.sync()

    assert time.perf_counter() - started < 5
    assert (report.added, report.failed) == (2, 0)
    bomb = library.lookup.search("hostile header").hits[0]
    assert bomb.title == "Laughs"
    long = library.lookup.search("Zebrafish").hits[0]
    assert len(long.title) <= MAX_TITLE_CHARS
    assert converted_notes(_BOMB) == (
        "frontmatter ignored: YAML anchors and aliases are not accepted (line 2)",
    )


def converted_notes(text: str) -> tuple[str, ...]:
    return convert_bytes(text.encode("utf-8"), ".md").notes
