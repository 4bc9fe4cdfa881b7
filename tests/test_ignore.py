"""The gitignore subset of ``.kbignore``: each documented syntax, as a specification."""

from __future__ import annotations

import pytest

from kb_mcp.errors import InvalidInput
from kb_mcp.ingest.ignore import IgnoreRules


def ignored(text: str, *paths: str, is_dir: bool = False) -> list[str]:
    """The paths among ``paths`` that the rules in ``text`` exclude."""
    rules = IgnoreRules.parse(text)
    return [p for p in paths if rules.ignores(p, is_dir=is_dir)]


def test_ignore_empty_rules_ignore_nothing() -> None:
    assert not IgnoreRules().ignores("a/b.md", is_dir=False)
    assert IgnoreRules.parse("").rules == ()


def test_ignore_comments_and_blank_lines_are_not_patterns() -> None:
    rules = IgnoreRules.parse("# notes.md\n\n   \n")
    assert rules.rules == ()


def test_ignore_trailing_spaces_are_dropped() -> None:
    assert ignored("notes.md   ", "notes.md") == ["notes.md"]


def test_ignore_name_without_slash_matches_at_any_depth() -> None:
    assert ignored("scratch.md", "scratch.md", "a/b/scratch.md", "scratch.md.bak") == [
        "scratch.md",
        "a/b/scratch.md",
    ]


def test_ignore_star_does_not_cross_folders() -> None:
    assert ignored("docs/*.md", "docs/a.md", "docs/sub/a.md") == ["docs/a.md"]


def test_ignore_question_mark_matches_one_character() -> None:
    assert ignored("v?.md", "v1.md", "v10.md", "v/.md") == ["v1.md"]


def test_ignore_character_class_and_negated_class() -> None:
    assert ignored("draft[0-9].md", "draft1.md", "drafta.md") == ["draft1.md"]
    assert ignored("draft[!0-9].md", "draft1.md", "drafta.md") == ["drafta.md"]


def test_ignore_unclosed_bracket_is_literal() -> None:
    assert ignored("a[b.md", "a[b.md", "ab.md") == ["a[b.md"]


def test_ignore_leading_slash_anchors_to_root() -> None:
    assert ignored("/todo.md", "todo.md", "sub/todo.md") == ["todo.md"]


def test_ignore_middle_slash_anchors_to_root() -> None:
    assert ignored("docs/old", "docs/old", "x/docs/old") == ["docs/old"]


def test_ignore_leading_globstar_matches_at_any_depth() -> None:
    assert ignored("**/logs/*.txt", "logs/a.txt", "x/y/logs/a.txt", "logs/sub/a.txt") == [
        "logs/a.txt",
        "x/y/logs/a.txt",
    ]


def test_ignore_trailing_globstar_matches_everything_inside_only() -> None:
    rules = IgnoreRules.parse("archive/**")
    assert rules.ignores("archive/a.md", is_dir=False)
    assert rules.ignores("archive/x/y/a.md", is_dir=False)
    assert not rules.ignores("archive", is_dir=True)


def test_ignore_middle_globstar_matches_zero_or_more_folders() -> None:
    assert ignored("a/**/b.md", "a/b.md", "a/x/b.md", "a/x/y/b.md", "c/a/b.md") == [
        "a/b.md",
        "a/x/b.md",
        "a/x/y/b.md",
    ]


def test_ignore_trailing_slash_matches_folders_only() -> None:
    rules = IgnoreRules.parse("drafts/")
    assert rules.ignores("drafts", is_dir=True)
    assert rules.ignores("notes/drafts", is_dir=True)
    assert not rules.ignores("drafts", is_dir=False)


def test_ignore_excluded_folder_excludes_its_content() -> None:
    assert IgnoreRules.parse("drafts/").ignores("drafts/deep/a.md", is_dir=False)


def test_ignore_entry_form_does_not_look_at_parents() -> None:
    assert not IgnoreRules.parse("drafts/").ignores_entry("drafts/a.md", is_dir=False)


def test_ignore_negation_last_match_wins() -> None:
    text = "*.md\n!keep.md\n"
    assert ignored(text, "a.md", "keep.md", "sub/keep.md") == ["a.md"]
    assert ignored("!keep.md\n*.md\n", "keep.md") == ["keep.md"]


def test_ignore_negation_cannot_reinclude_below_excluded_folder() -> None:
    rules = IgnoreRules.parse("drafts/\n!drafts/keep.md\n")
    assert rules.ignores("drafts/keep.md", is_dir=False)


def test_ignore_escaped_hash_and_bang_are_literal() -> None:
    assert ignored("\\#inbox.md", "#inbox.md") == ["#inbox.md"]
    assert ignored("\\!important.md", "!important.md") == ["!important.md"]


def test_ignore_regex_metacharacters_are_literal() -> None:
    assert ignored("a+b (1).md", "a+b (1).md", "aab (1).md") == ["a+b (1).md"]


def test_ignore_matching_is_case_sensitive() -> None:
    assert ignored("*.MD", "a.md", "b.MD") == ["b.MD"]


def test_ignore_from_globs_uses_the_same_syntax() -> None:
    rules = IgnoreRules.from_globs(["*.log", "/private/", "!keep.log"])
    assert [p for p in ("a.log", "keep.log", "x/a.log") if rules.ignores(p, False)] == [
        "a.log",
        "x/a.log",
    ]
    assert rules.ignores("private/a.md", is_dir=False)
    assert not rules.ignores("x/private/a.md", is_dir=False)


def test_ignore_followed_by_lets_later_rules_win() -> None:
    combined = IgnoreRules.parse("*.md").followed_by(IgnoreRules.from_globs(["!a.md"]))
    assert not combined.ignores("a.md", is_dir=False)
    assert combined.ignores("b.md", is_dir=False)


def test_ignore_invalid_pattern_raises_naming_the_line() -> None:
    with pytest.raises(InvalidInput, match=r"\.kbignore line 2: cannot use pattern 'x\[z-a\]'"):
        IgnoreRules.parse("ok.md\nx[z-a]\n")
