"""The path prior: which class a file is, what a question asks for, and the adjustment.

Pure functions, so these are tables. The paths come from the real-corpus projects
(``kb_mcp/bench/realcorpus``) and from the layouts of other ecosystems the rules name.
"""

from __future__ import annotations

import pytest

from kb_mcp.search.prior import (
    FACTORS,
    PROMOTE,
    Adjustment,
    classify_path,
    path_adjustment,
    path_adjustments,
    requested_classes,
    wanted_classes,
)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tests/test_timeouts.py", "test"),
        ("tests/client/test_auth.py", "test"),
        ("test_api.py", "test"),
        ("pkg/api_test.go", "test"),
        ("pkg/handler_test.py", "test"),
        ("src/app.test.ts", "test"),
        ("web/button.spec.jsx", "test"),
        ("src/test/java/FooTest.java", "test"),
        ("conftest.py", "test"),
        ("__tests__/render.js", "test"),
        ("tests/assets/cli/multiapp-docs.md", "test"),
        ("tests/fixtures/.netrc", "fixture"),
        ("pkg/testdata/golden.json", "fixture"),
        ("web/__snapshots__/button.snap", "fixture"),
        ("vendor/github.com/x/y.go", "vendored"),
        ("web/node_modules/react/index.js", "vendored"),
        ("pip/_vendor/requests/api.py", "vendored"),
        ("third_party/zlib/zlib.h", "vendored"),
        ("api/service_pb2.py", "generated"),
        ("static/app.min.js", "generated"),
        ("package-lock.json", "generated"),
        ("CHANGELOG.md", "changelog"),
        ("CHANGES.md", "changelog"),
        ("HISTORY.rst", "changelog"),
        ("NEWS", "changelog"),
        ("RELEASE_NOTES.txt", "changelog"),
        ("docs/changelog.rst", "changelog"),
        ("docs/release-notes.md", "changelog"),
        ("docs/changes.md", "changelog"),
        ("changelog-2023-05.md", "changelog"),
        ("release-calendar-2024.md", "doc"),
        ("docs/history-design-future.md", "doc"),
        ("docs_src/arguments/envvar/tutorial001_py310.py", "example"),
        ("examples/aliases/aliases.py", "example"),
        ("docs/advanced/timeouts.md", "doc"),
        ("docs/python-api.rst", "doc"),
        ("README.md", "doc"),
        ("README", "doc"),
        ("notes/meeting.txt", "doc"),
        ("pyproject.toml", "config"),
        (".github/workflows/test.yml", "config"),
        ("Dockerfile", "config"),
        ("docs/js/custom.js", "code"),
        ("httpx/_client.py", "code"),
        ("src/click/testing.py", "code"),
        ("scripts/test.sh", "code"),
        (None, "doc"),
        ("https://example.com/tests/test_a.py", "doc"),
    ],
)
def test_classify_path_names_the_class_of_a_file(path: str | None, expected: str) -> None:
    assert classify_path(path) == expected


def test_classify_path_puts_fixtures_before_tests_and_vendored_before_all() -> None:
    """The first match wins: a fixture lives under tests/, a vendored package has tests."""
    assert classify_path("tests/fixtures/data.json") == "fixture"
    assert classify_path("vendor/lib/tests/test_lib.py") == "vendored"


@pytest.mark.parametrize(
    ("query", "requested", "wanted"),
    [
        ("how do I set a timeout for a single request", set(), set()),
        ("where are the tests for digest authentication", {"test", "fixture"}, {"test"}),
        ("is there a test for invoking chained subcommands", {"test", "fixture"}, {"test"}),
        (
            "what does test_nested_atomic_rolls_back_to_savepoint check",
            {"test", "fixture"},
            {"test"},
        ),
        ("check the output of my app from a pytest test", {"test", "fixture"}, set()),
        (
            "log a user in during a test without knowing the password",
            {"test", "fixture"},
            set(),
        ),
        ("how do I use a temporary database in the test", {"test", "fixture"}, set()),
        ("what changed in the 0.28 release", {"changelog"}, {"changelog"}),
        ("when did typer stop depending on click", {"changelog"}, {"changelog"}),
        ("this helper is deprecated, what should I use instead", {"changelog"}, set()),
        ("show me an example of a custom transport", {"example"}, set()),
        ("pass options, for example a timeout", set(), set()),
        ("is the vendored copy of click patched", {"vendored"}, set()),
    ],
)
def test_requested_and_wanted_classes_read_what_the_question_asks_for(
    query: str, requested: set[str], wanted: set[str]
) -> None:
    assert requested_classes(query) == requested
    assert wanted_classes(query) == wanted


def test_path_adjustment_demotes_a_test_file_for_a_how_to_question() -> None:
    requested = requested_classes("how do I set a timeout for a single request")
    adjusted = path_adjustment("tests/test_timeouts.py", requested)
    assert adjusted == Adjustment("test", FACTORS["test"])
    assert FACTORS["test"] < 1.0
    assert adjusted.label == f"demoted ×{FACTORS['test']:g}: test file"


def test_path_adjustment_leaves_docs_and_code_alone() -> None:
    assert path_adjustment("docs/advanced/timeouts.md", frozenset()) is None
    assert path_adjustment("httpx/_config.py", frozenset()) is None


def test_path_adjustment_does_not_demote_a_class_the_question_mentions() -> None:
    requested = requested_classes("check the output of my app from a pytest test")
    assert path_adjustment("tests/test_cli.py", requested) is None
    assert path_adjustment("tests/fixtures/app.json", requested) is None


def test_path_adjustment_promotes_a_class_the_question_asks_for() -> None:
    query = "where are the tests for digest authentication"
    adjusted = path_adjustment(
        "tests/test_auth.py", requested_classes(query), wanted_classes(query)
    )
    assert adjusted == Adjustment("test", PROMOTE)
    assert PROMOTE > 1.0
    assert adjusted.label == f"promoted ×{PROMOTE:g}: test file, asked for"


def test_path_adjustments_returns_only_the_files_it_moves() -> None:
    paths = {
        "a": "docs/timeouts.md",
        "b": "tests/test_timeouts.py",
        "c": "CHANGELOG.md",
        "d": None,
    }
    moved = path_adjustments("how do I change the timeout", paths)
    assert moved == {
        "b": Adjustment("test", FACTORS["test"]),
        "c": Adjustment("changelog", FACTORS["changelog"]),
    }


@pytest.mark.parametrize(
    "path",
    ["docs/README.md", "a//b/./c.tar.gz", "/abs/.env", "x/foo.", "../up/History.rst", "Makefile"],
)
def test_prior_name_parts_are_pathlibs(path: str) -> None:
    """issue 10: the string split that replaced three PurePosixPath objects per candidate
    (about 100 µs each uncached) gives pathlib's folders, name, suffix and stem."""
    from pathlib import PurePosixPath

    from kb_mcp.search.prior import _name_parts

    pure = PurePosixPath(path)
    folders = {p for p in pure.parts[:-1] if p != "/"}
    assert _name_parts(path) == (folders, pure.name, pure.suffix, pure.stem)
