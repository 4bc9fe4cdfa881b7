"""The public surface: exports, generated docs, help texts, documented tools and settings."""

from __future__ import annotations

import importlib
from pathlib import Path

import kb_mcp
from kb_mcp.cli import docgen
from kb_mcp.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
# What ``Library`` owns, one service per concept (``library.lookup.search(q)``).
SERVICES = (
    "writing",
    "folders",
    "links",
    "vectors",
    "enrichment",
    "lookup",
    "entities",
    "catalog",
    "health",
    "views",
)


def test_all_names_every_export_and_each_resolves() -> None:
    assert sorted(kb_mcp.__all__) == sorted(kb_mcp._EXPORTS)
    for name in kb_mcp.__all__:
        assert getattr(kb_mcp, name) is not None, name


def test_all_exports_come_from_the_module_that_defines_them() -> None:
    for name, module in kb_mcp._EXPORTS.items():
        attribute = "load" if name == "load_settings" else name
        assert getattr(importlib.import_module(module), attribute) is getattr(kb_mcp, name)


def test_library_declares_no_capability_of_its_own_only_the_services_it_owns(
    tmp_path: Path,
) -> None:
    """Each capability is one method of the service of its concept, and its docstring is
    there (issue 23: ``Library`` forwarded 23 methods one line each, docstrings copied)."""
    from kb_mcp.library import Library
    from kb_mcp.settings import Settings

    assert {name for name in vars(Library) if not name.startswith("__")} == {"close"}
    with Library(Settings(home=tmp_path, embedder="none")) as library:
        for name in SERVICES:
            service = type(getattr(library, name))
            for member, value in vars(service).items():
                if not member.startswith("_") and callable(value):
                    assert value.__doc__, f"library.{name}.{member} has no docstring"


def test_generated_docs_sections_are_current() -> None:
    """Run `python -m kb_mcp.cli.docgen` when this fails."""
    for name, relative in docgen.FILES.items():
        text = (ROOT / relative).read_text(encoding="utf-8")
        assert docgen.replace_section(text, name, docgen.GENERATED[name]()) == text, relative


def test_every_cli_command_has_help_text() -> None:
    commands = docgen._subcommands(docgen.build_parser(), "kb-mcp")
    assert len(commands) >= 12
    for command, help_text in commands:
        description = help_text.split("\n\n")[1] if "\n\n" in help_text else ""
        assert description.strip(), f"{command} has no description"


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        assert f"`{setting.name}`" in text and f"`{setting.env}`" in text, setting.name


def test_every_mcp_tool_is_documented() -> None:
    text = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    for tool in ("list", "search", "grep", "read", "add_document"):
        assert f"## `{tool}`" in text, tool


def test_readme_shows_the_two_commands_and_the_agent_setup() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for needle in ("kb-mcp demo", "python -m pytest", "claude mcp add", "Kiro"):
        assert needle in text, needle
