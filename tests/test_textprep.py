"""index_copy and split_identifier: the text FTS5 indexes, and the identifier parts it adds.

Guards against: spaceless CJK clauses indexed as one unaddressable token, Hangul words
broken into syllables, Latin text silently rewritten, camelCase identifiers that a
``user id`` query cannot reach.
"""

from __future__ import annotations

import re

import pytest
from inline_snapshot import snapshot

from kb_mcp.index.textprep import index_copy, split_identifier


def test_index_copy_spaces_every_chinese_ideograph() -> None:
    assert index_copy("机器学习") == " 机  器  学  习 "


def test_index_copy_spaces_kana_and_half_width_katakana() -> None:
    assert index_copy("ひらがなカタカナ") == snapshot(" ひ  ら  が  な  カ  タ  カ  ナ ")
    assert index_copy("ｶﾀｶﾅ") == " ｶ  ﾀ  ｶ  ﾅ "


def test_index_copy_spaces_supplementary_plane_ideograph() -> None:
    assert index_copy("𠀀𠀁") == " 𠀀  𠀁 "


def test_index_copy_makes_each_cjk_char_its_own_term_inside_mixed_text() -> None:
    assert index_copy("用Python写索引。") == " 用 Python 写  索  引 。"
    assert index_copy("日本語のテキスト").split() == list("日本語のテキスト")


def test_index_copy_leaves_hangul_untouched() -> None:
    text = "한국어 텍스트는 띄어쓰기를 합니다"
    assert index_copy(text) == text


def test_index_copy_leaves_latin_text_byte_identical_without_camel_case() -> None:
    text = (
        "Run `make test` before pushing; snake_case_name, dotted.module.path,\n"
        "ALLCAPS, HTTP 2.0, café naïve — v1.2.3 and x86_64 (100%).\n"
    )
    assert index_copy(text) == text


def test_index_copy_leaves_snake_case_unchanged() -> None:
    assert index_copy("get_user_by_id MAX_RETRY_COUNT _private") == (
        "get_user_by_id MAX_RETRY_COUNT _private"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call getUserById now", "call getUserById get User By Id now"),
        ("HttpClient", "HttpClient Http Client"),
        ("HTTPServer", "HTTPServer HTTP Server"),
        ("XMLHttpRequest", "XMLHttpRequest XML Http Request"),
        ("utf8Decoder", "utf8Decoder utf 8 Decoder"),
        ("obj.getValue()", "obj.getValue get Value()"),
    ],
)
def test_index_copy_follows_camel_case_word_with_its_parts(text: str, expected: str) -> None:
    assert index_copy(text) == expected


def test_index_copy_splits_cjk_and_camel_case_in_one_pass() -> None:
    assert index_copy("注意 getUserById 的返回值") == snapshot(
        " 注  意  getUserById get User By Id  的  返  回  值 "
    )


@pytest.mark.parametrize(
    ("text", "identifier"),
    [
        ("see getUserById here", "getUserById"),
        pytest.param("调用getUserById函数", "getUserById"),
        pytest.param("test_getUserById", "getUserById"),
        pytest.param("mContext leak", "mContext"),
    ],
)
def test_index_copy_adds_camel_parts_wherever_the_identifier_stands(
    text: str, identifier: str
) -> None:
    """Mixed Chinese/code prose and test_ names are common; the parts must be indexed there too."""
    tokens = index_copy(text).replace("_", " ").split()
    assert identifier in tokens
    assert all(part in tokens for part in split_identifier(identifier))


def test_split_identifier_cases() -> None:
    words = [
        "getUserById",
        "getHTTPResponse2",
        "HTTPServer",
        "XMLHttpRequest",
        "PascalCase",
        "iPhone",
        "ABC",
        "lower",
        "snake_case_name",
        "v2",
    ]
    assert {w: split_identifier(w) for w in words} == snapshot(
        {
            "getUserById": ["get", "User", "By", "Id"],
            "getHTTPResponse2": ["get", "HTTP", "Response", "2"],
            "HTTPServer": ["HTTP", "Server"],
            "XMLHttpRequest": ["XML", "Http", "Request"],
            "PascalCase": ["Pascal", "Case"],
            "iPhone": ["i", "Phone"],
            "ABC": ["ABC"],
            "lower": ["lower"],
            "snake_case_name": ["snake", "case", "name"],
            "v2": ["v", "2"],
        }
    )


@pytest.mark.parametrize(
    "text",
    [
        "3dModel x9Value _fooBar __init__ mContext",  # a run led by a digit is no identifier
        "fooBar.bazQux getHTTPResponse2 xB1y A2B HTTPServer HTTP",
        "éaB北京getUser東京 aB" + "a" * 60 + "B",
        "assertEqual(x, y); self.assertEqual(a, b)  # the same name twice",
    ],
)
def test_index_copy_follows_each_camel_word_run_as_the_pattern_defines_it(text: str) -> None:
    from kb_mcp.index import textprep

    def by_pattern(match: re.Match[str]) -> str:
        parts = textprep.identifier_parts(match.group(0))
        return " ".join([match.group(0), *parts])

    defined = textprep._CAMEL_WORD.sub(by_pattern, text)
    assert index_copy(text) == textprep.CJK_RUN.sub(textprep._spaced_run, defined)
