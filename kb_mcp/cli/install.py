"""``kb-mcp install``: write the server entry into an agent's MCP config JSON.

The entry is merged into the file's ``mcpServers`` object: other servers and keys are
kept, the file is written atomically, and nothing is written when the file is not valid
JSON or already holds a different entry under the same name (unless ``--force``).

The entry names the library the installing shell uses (``--home``, else
``$KB_MCP_HOME``) whenever that is not the default: the agent starts the server in its
own environment. An existing config keeps its file mode; a new one is 0644 (it holds a
command line, no secret). A ``--project`` folder must already exist.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

from kb_mcp.errors import Conflict, InvalidInput
from kb_mcp.fsutil import atomic_write
from kb_mcp.settings import non_default_home

# Where each agent reads MCP servers from, relative to the chosen folder (a project, or
# the user's home with --user).
TARGETS: dict[str, str] = {
    "claude-code": ".mcp.json",
    "kiro": ".kiro/settings/mcp.json",
}
NEW_FILE_MODE = 0o644


def server_entry(agent: str, home: Path | None, allow_writes: bool) -> dict[str, Any]:
    """The command that starts ``kb-mcp serve``; absolute, so the agent's PATH does not matter."""
    installed = shutil.which("kb-mcp")
    command, args = (installed, []) if installed else (sys.executable, ["-m", "kb_mcp"])
    args = [*args, "serve"]
    if home is not None:
        args += ["--home", str(home)]
    if allow_writes:
        args.append("--allow-agent-writes")
    entry: dict[str, Any] = {"command": command, "args": args}
    if agent == "claude-code":
        entry = {"type": "stdio", **entry}
    return entry


def merge_server(
    config: dict[str, Any], name: str, entry: dict[str, Any], force: bool
) -> dict[str, Any]:
    """``config`` with ``mcpServers[name] = entry``; Conflict if a different one is there."""
    servers = config.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidInput("the config's mcpServers is not an object; fix the file first")
    current = servers.get(name)
    if current is not None and current != entry and not force:
        raise Conflict(
            f"an MCP server named {name!r} is already configured differently: "
            f"{json.dumps(current)}",
            hint="pass --force to replace it, or --name to install under another name",
        )
    return {**config, "mcpServers": {**servers, name: entry}}


def read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(
            f"cannot read {path}: {exc}", hint="fix the file; nothing was changed"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; nothing was changed")
    return data


def project_folder(project: str) -> Path:
    """The ``--project`` folder, which must exist: a typo must not create a new folder."""
    folder = Path(project).expanduser().resolve()
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InvalidInput(
            f"project folder {folder} {what}; nothing was written",
            hint="pass the project's folder with --project (or run from inside it)",
        )
    return folder


def write_config(path: Path, text: str) -> None:
    """Write atomically, keeping an existing file's mode (a new file gets 0644).

    A symlinked config (dotfiles kept in one repository) is written through the link:
    replacing the link with a file would leave the real config without the entry.
    """
    path = path.resolve() if path.is_symlink() else path
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    atomic_write(path, text.encode("utf-8"))
    os.chmod(path, mode)


def cmd_install(args: argparse.Namespace) -> int:
    """Add kb-mcp to an agent's MCP config (Claude Code .mcp.json, Kiro mcp.json)."""
    home = non_default_home(args.home)
    entry = server_entry(args.agent, home, args.allow_agent_writes)
    if args.user and args.agent == "claude-code":
        # Claude Code keeps user-wide servers in ~/.claude.json with much else of its own
        # state, written while it runs: its own command is the safe way in.
        command = " ".join([entry["command"], *entry["args"]])
        raise InvalidInput(
            "Claude Code's user-wide servers live in its own state file; kb-mcp does not edit it",
            hint=f"run: claude mcp add --scope user {args.name} -- {command}",
        )
    base = Path.home() if args.user else project_folder(args.project)
    path = base / TARGETS[args.agent]
    merged = merge_server(read_config(path), args.name, entry, args.force)
    text = json.dumps(merged, indent=2) + "\n"
    if args.dry_run:
        print(f"would write {path}:\n{text}", end="")
        return 0
    write_config(path, text)
    print(f"installed {args.name!r} in {path}")
    return 0


def add_install_parser(sub: argparse._SubParsersAction, common: Any) -> None:
    p = sub.add_parser("install", help=cmd_install.__doc__, description=cmd_install.__doc__)
    common(p)
    p.add_argument("agent", choices=sorted(TARGETS), help="which agent's config to write")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--project", default=".", help="project folder (default: current)")
    where.add_argument("--user", action="store_true", help="the user-wide config instead")
    p.add_argument("--name", default="kb", help="server name in the config (default: kb)")
    p.add_argument("--allow-agent-writes", action="store_true", help="let the agent add documents")
    p.add_argument("--force", action="store_true", help="replace a different existing entry")
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    p.set_defaults(func=cmd_install)
