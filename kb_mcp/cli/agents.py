"""The six agents ``kb-mcp install`` knows: where each keeps its MCP servers, in what shape.

Checked against each agent's documentation (issue 12):

- Claude Code: a project's ``.mcp.json``, ``mcpServers``, entries with ``"type": "stdio"``.
  User-wide servers live in ``~/.claude.json`` beside Claude Code's own state, which it
  rewrites while it runs: ``install`` prints the ``claude mcp add`` command instead.
- Claude Desktop: ``claude_desktop_config.json`` in the app's folder (Linux
  ``~/.config/Claude/``, macOS ``~/Library/Application Support/Claude/``, Windows
  ``%APPDATA%\\Claude\\``), ``mcpServers``; user-wide only.
- Cursor: ``.cursor/mcp.json`` in a project or in the home folder, ``mcpServers``.
- VS Code: ``.vscode/mcp.json`` in a workspace or ``mcp.json`` in the user profile folder
  (``Code/User/`` under the same per-OS folder as Claude Desktop's). Its top-level key is
  ``servers``, not ``mcpServers``, and each entry needs ``"type": "stdio"``.
- Codex: TOML, ``$CODEX_HOME/config.toml`` (default ``~/.codex/``) or a trusted project's
  ``.codex/config.toml``, one ``[mcp_servers.<name>]`` table per server.
- Kiro: ``.kiro/settings/mcp.json`` in a workspace or the home folder, ``mcpServers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Scope = Literal["project", "user"]


@dataclass(frozen=True, slots=True)
class Agent:
    """One agent's config: the file per scope, the servers key, the entry's shape."""

    name: str
    project_file: str | None  # relative to the project folder; None: no project config
    user_file: str | None  # relative to the user folder the agent keeps (``user_base``)
    default_scope: Scope
    servers_key: str = "mcpServers"
    fmt: Literal["json", "toml"] = "json"
    typed: bool = False  # the entry carries "type": "stdio"

    def entry(self, command: str, args: list[str], env: Mapping[str, str]) -> dict[str, Any]:
        """The server entry in this agent's shape; ``env`` only when it has something."""
        entry: dict[str, Any] = {"type": "stdio"} if self.typed else {}
        entry |= {"command": command, "args": list(args)}
        if env:
            entry["env"] = dict(env)
        return entry


AGENTS: dict[str, Agent] = {
    agent.name: agent
    for agent in (
        Agent("claude-code", ".mcp.json", None, "project", typed=True),
        Agent("claude-desktop", None, "Claude/claude_desktop_config.json", "user"),
        Agent("cursor", ".cursor/mcp.json", "~/.cursor/mcp.json", "project"),
        Agent("vscode", ".vscode/mcp.json", "Code/User/mcp.json", "project", "servers", typed=True),
        Agent(
            "codex", ".codex/config.toml", "$CODEX_HOME/config.toml", "user", "mcp_servers", "toml"
        ),
        Agent("kiro", ".kiro/settings/mcp.json", "~/.kiro/settings/mcp.json", "project"),
    )
}


def app_config_dir(system: str, user_home: Path, environ: Mapping[str, str]) -> Path:
    """The per-user folder desktop apps keep settings in (Claude Desktop, VS Code).

    ``system`` is ``platform.system()``: "Linux", "Darwin" or "Windows". Linux honours
    ``$XDG_CONFIG_HOME`` as Electron apps do.
    """
    if system == "Darwin":
        return user_home / "Library" / "Application Support"
    if system == "Windows":
        appdata = environ.get("APPDATA")
        return Path(appdata) if appdata else user_home / "AppData" / "Roaming"
    return Path(environ.get("XDG_CONFIG_HOME") or user_home / ".config")


def user_config_path(
    agent: Agent, system: str, user_home: Path, environ: Mapping[str, str]
) -> Path | None:
    """Where ``agent`` keeps its user-wide servers on this OS; None when it has no such file."""
    relative = agent.user_file
    if relative is None:
        return None
    if relative.startswith("~/"):
        return user_home / relative[2:]
    if relative.startswith("$CODEX_HOME/"):
        codex_home = environ.get("CODEX_HOME")
        base = Path(codex_home).expanduser() if codex_home else user_home / ".codex"
        return base / relative.removeprefix("$CODEX_HOME/")
    return app_config_dir(system, user_home, environ).joinpath(*relative.split("/"))
