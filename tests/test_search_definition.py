"""A question naming a code identifier ranks the passage that defines it first (a new
user's trial over Django's docs and code: "get_object_or_404 implementation" found the
definition ninth, behind call sites and pages that repeat the name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.library import Library
from kb_mcp.search.definition import defined_names, defines_any, named_identifiers
from kb_mcp.settings import Settings

SHORTCUTS = '''"""Shortcuts for views."""


def get_object_or_404(klass, *args, **kwargs):
    """Fetch one object; raise Http404 when there is none."""
    queryset = _get_queryset(klass)
    try:
        return queryset.get(*args, **kwargs)
    except queryset.model.DoesNotExist:
        raise Http404("No object matches the given query.")


def redirect(to, *args, **kwargs):
    return HttpResponseRedirect(resolve_url(to, *args, **kwargs))
'''


def _calls(n: int) -> str:
    return "\n".join(
        f"def view_{i}(request, pk):\n    item = get_object_or_404(Item, pk=pk)\n"
        f"    other = get_object_or_404(Other, item=item)\n    return render(request, item)\n"
        for i in range(n)
    )


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("get_object_or_404 implementation", {"get_object_or_404"}),
        ("what does getUserById return", {"getuserbyid"}),
        ("where is BlobStore defined", {"blobstore"}),
        ("is django.shortcuts.redirect safe", {"redirect"}),
        ("the `retry` option of the client", {"retry"}),
        ("call load() twice", {"load"}),
        ("how does load work", set()),
        ("Where Is The Backup Kept", set()),
        ("what is the p99 of ledger-api", set()),
    ],
)
def test_named_identifiers_are_the_identifier_shaped_words(query: str, names: set[str]) -> None:
    assert named_identifiers(query) == names


def test_defined_names_read_section_labels_and_definition_lines() -> None:
    assert defined_names("shortcuts.py / def get_object_or_404", "") == {"get_object_or_404"}
    assert defined_names("store.py / class BlobStore", "") == {"blobstore"}
    assert defined_names("client.ts", "export async function getUserById(id) {") == {"getuserbyid"}
    assert defined_names("shortcuts.py", SHORTCUTS) == {"get_object_or_404", "redirect"}
    assert defined_names("Guide / Restore", "Use the class of service you need.") == set()


def test_search_puts_the_definition_before_the_call_sites(tmp_path: Path) -> None:
    """Views calling the shortcut twice each and a page about it match its name more
    often; the passage that defines it is first and says why."""
    folder = tmp_path / "project"
    (folder / "django").mkdir(parents=True)
    (folder / "django" / "shortcuts.py").write_text(SHORTCUTS, encoding="utf-8")
    (folder / "app").mkdir()
    for n in range(4):
        (folder / "app" / f"views_{n}.py").write_text(_calls(3), encoding="utf-8")
    (folder / "docs").mkdir()
    (folder / "docs" / "shortcuts.md").write_text(
        "# Shortcuts\n\n## get_object_or_404\n\nUse get_object_or_404 in a view: "
        "get_object_or_404 raises Http404, so get_object_or_404 saves a try block.\n",
        encoding="utf-8",
    )
    with Library(Settings(home=tmp_path / "home", embedder="none")) as library:
        library.add_folder(folder)
        library.sync()
        result = library.search("get_object_or_404 implementation", mode="keyword")
    first = result.hits[0]
    assert first.path == "django/shortcuts.py"
    assert [a.reason for a in first.adjustments] == [
        "promoted: defines a name the question asks about"
    ]
    assert all(not hit.adjustments for hit in result.hits[1:])


@pytest.mark.parametrize(
    ("topic", "text"),
    [
        ("", "def spinRotor():\n    return 1"),
        ("", "x = spinRotor()  # a call, not a definition"),
        ("", "    class Load(Base):"),
        ("", "export default function load() {}"),
        ("", "async def load_all():"),
        ("", "a class of load-bearing walls"),
        ("pump.py / def load", "return cached"),
        ("", "pub fn LOAD$x() {}"),
    ],
)
def test_defines_any_agrees_with_defined_names(topic: str, text: str) -> None:
    """issue 10: the shortlist's one-scan check says what ``defined_names`` would."""
    names = frozenset({"spinrotor", "load", "load$x"})
    assert defines_any(names, topic, text) == bool(names & defined_names(topic, text))
