"""Generated documentation: the settings table and the CLI reference.

``python -m kb_mcp.cli.docgen`` rewrites the generated sections of docs/configuration.md
and docs/cli.md; ``tests/test_public_surface.py`` fails when they are stale.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

from kb_mcp.cli.main import build_parser
from kb_mcp.settings import settings_markdown

BEGIN = "<!-- generated: {name} (python -m kb_mcp.cli.docgen) -->"
END = "<!-- end generated: {name} -->"


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, str]]:
    """(command line, --help text) for every command, nested ones included, in order."""
    found = []
    for action in parser._actions:  # argparse exposes no public way to walk subcommands
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _subcommands(sub, f"{prefix} {name}")
                # A fixed width: the generated text must not depend on the terminal.
                sub.formatter_class = functools.partial(argparse.HelpFormatter, width=90)
                found += nested or [(f"{prefix} {name}", sub.format_help())]
    return found


def cli_markdown() -> str:
    """Every command's ``--help``, as the CLI prints it."""
    blocks = []
    for command, help_text in _subcommands(build_parser(), "kb-mcp"):
        blocks.append(f"### `{command}`\n\n```text\n{help_text.rstrip()}\n```")
    return "\n\n".join(blocks)


GENERATED = {"settings": settings_markdown, "cli": cli_markdown}
FILES = {"settings": "docs/configuration.md", "cli": "docs/cli.md"}


def replace_section(text: str, name: str, body: str) -> str:
    begin, end = BEGIN.format(name=name), END.format(name=name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no generated section {name!r} in the file")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def main(root: Path) -> int:
    for name, relative in FILES.items():
        path = root / relative
        path.write_text(
            replace_section(path.read_text(encoding="utf-8"), name, GENERATED[name]()),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
