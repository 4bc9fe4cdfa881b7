"""``kb-mcp install AGENT``: write the server entry into an agent's MCP config.

Six agents (``cli/agents.py`` says where each keeps its servers and in what shape). The
entry is merged into the file (``cli/agent_config.py``): other servers and keys are kept,
the file is written atomically, and nothing is written when the file is not valid JSON /
TOML or already holds a different entry under the same name (unless ``--force``).

The agent starts the server in its own environment, not the installing shell's, so the
entry carries what this shell would use: the library (``--home``, else ``$KB_MCP_HOME``)
whenever that is not the default, as ``--home``; and the embedder settings given as flags
(``--embedder``, ``--embed-model``, ``--graph-extractor``, ``--reranker``,
``--reranker-model``) or ``KB_MCP_*`` / ``OLLAMA_HOST``
variables, as ``KB_MCP_*`` variables in the entry's ``env``; a PostgreSQL store
(``--store`` or ``$KB_MCP_STORE``) too, without its password (``url.shown``): a config
file is no place for a secret, so the agent's server reads it where libpq looks, in
``~/.pgpass`` or ``$PGPASSWORD``. An environment variable, not an argument, because a
command line is visible to every user of the machine in ``ps``. Settings from the library's
``config.toml`` are not copied: the server reads that file itself. An existing config
keeps its file mode; a new one is 0644 (it holds a command line, no secret). A
``--project`` folder must already exist.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import stat
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb_mcp.cli.agent_config import merged_text
from kb_mcp.cli.agents import AGENTS, Agent, user_config_path
from kb_mcp.errors import InvalidInput
from kb_mcp.fsutil import atomic_write
from kb_mcp.settings import SETTINGS, load, non_default_home, process_environment
from kb_mcp.store.postgres.url import CREDENTIALS_HINT, has_secret

NEW_FILE_MODE = 0o644
# The settings an entry carries when the installing shell set them (flag or environment).
RECORDED_SETTINGS = (
    "embedder",
    "embed_model",
    "ollama_host",
    "graph_extractor",
    "graph_model",
    "reranker",
    "reranker_model",
    "store",
)


def server_command() -> tuple[str, list[str]]:
    """The absolute command of *this* kb-mcp, so the agent's PATH does not matter.

    The ``kb-mcp`` script beside the running interpreter first (a pipx / uv tool / venv
    install), then one on PATH, else this interpreter with ``-m kb_mcp``.
    """
    name = "kb-mcp.exe" if os.name == "nt" else "kb-mcp"
    beside = Path(sysconfig.get_path("scripts")) / name
    if beside.is_file():
        return str(beside), []
    installed = shutil.which("kb-mcp")
    return (installed, []) if installed else (sys.executable, ["-m", "kb_mcp"])


def recorded_env(args: argparse.Namespace) -> dict[str, str]:
    """``KB_MCP_*`` variables for the settings this shell set by flag or environment."""
    settings = load(
        home=args.home,
        overrides={
            "embedder": args.embedder,
            "embed_model": args.embed_model,
            "graph_extractor": args.graph_extractor,
            "reranker": args.reranker,
            "reranker_model": args.reranker_model,
            "store": args.store,
        },
    )
    by_name = {s.name: s for s in SETTINGS}
    env = {}
    for name in RECORDED_SETTINGS:
        origin = settings.origin(name)
        if origin == "flag" or origin.startswith("$"):
            env[by_name[name].env] = str(getattr(settings, name))  # a store: no password
    if settings.reranker == "onnx" and "KB_MCP_RERANKER_MODEL" in env:
        # a folder: the agent starts the server in a working directory of its own
        env["KB_MCP_RERANKER_MODEL"] = str(Path(settings.reranker_model).expanduser().resolve())
    return env


def server_entry(agent: Agent, args: argparse.Namespace) -> dict[str, Any]:
    """The entry that starts ``kb-mcp serve`` on this shell's library and embedder."""
    command, prefix = server_command()
    serve = [*prefix, "serve"]
    home = non_default_home(args.home)
    if home is not None:
        serve += ["--home", str(home)]
    if args.allow_agent_writes:
        serve.append("--allow-agent-writes")
    return agent.entry(command, serve, recorded_env(args))


def config_path(agent: Agent, args: argparse.Namespace) -> Path:
    """The file to write: the project's or the user's, as asked or as the agent defaults."""
    scope = "user" if args.user else "project" if args.project else agent.default_scope
    if scope == "user":
        path = user_config_path(agent, platform.system(), Path.home(), process_environment())
        if path is None:
            raise _no_user_config(agent, args)
        return path
    if agent.project_file is None:
        raise InvalidInput(
            f"{agent.name} has no per-project MCP config; nothing was written",
            hint=f"run `kb-mcp install {agent.name}` without --project (it is user-wide)",
        )
    return project_folder(args.project or ".") / agent.project_file


def _no_user_config(agent: Agent, args: argparse.Namespace) -> InvalidInput:
    # Claude Code keeps user-wide servers in ~/.claude.json with much else of its own
    # state, written while it runs: its own command is the safe way in.
    entry = server_entry(agent, args)
    env = [f"--env {k}={v}" for k, v in entry.get("env", {}).items()]
    command = " ".join([args.name, *env, "--", entry["command"], *entry["args"]])
    return InvalidInput(
        "Claude Code's user-wide servers live in its own state file; kb-mcp does not edit it",
        hint=f"run: claude mcp add --scope user {command}",
    )


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


def read_text(path: Path) -> str:
    """The config's current text, '' when there is none yet."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"cannot read {path}: {exc}; nothing was changed",
            hint="fix the file's permissions or encoding, then run the install again",
        ) from exc


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
    """Add kb-mcp to an agent's MCP config: Claude Code, Claude Desktop, Cursor, VS Code,
    Codex or Kiro."""
    agent = AGENTS[args.agent]
    path = config_path(agent, args)
    entry = server_entry(agent, args)
    text = merged_text(
        path, read_text(path), agent.fmt, agent.servers_key, args.name, entry, args.force
    )
    if args.dry_run:
        print(f"would write {path}:\n{text}", end="")
        return 0
    write_config(path, text)
    print(f"installed {args.name!r} in {path}; restart {agent.name} (or reload its MCP servers)")
    store = _store_url(args)
    if store is not None and has_secret(store):
        print(f"the store's password is not written in {path}: {CREDENTIALS_HINT}")
    return 0


def _store_url(args: argparse.Namespace) -> str | None:
    """The PostgreSQL URL the entry carries (chosen by flag or environment; one in the
    library's config.toml is read there by the server), secrets included."""
    settings = load(home=args.home, overrides={"store": args.store})
    recorded = settings.origin("store") == "flag" or settings.origin("store").startswith("$")
    return settings.store.postgres_url if recorded else None


def add_install_parser(
    sub: argparse._SubParsersAction,
    common: Callable[[argparse.ArgumentParser], None],
    embedder_flags: Callable[..., None],
) -> None:
    p = sub.add_parser("install", help=cmd_install.__doc__, description=cmd_install.__doc__)
    common(p)
    p.add_argument("agent", choices=list(AGENTS), help="which agent's config to write")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--project",
        help="project folder (default: the current one, for the agents with project configs)",
    )
    where.add_argument("--user", action="store_true", help="the user-wide config instead")
    p.add_argument("--name", default="kb", help="server name in the config (default: kb)")
    p.add_argument("--allow-agent-writes", action="store_true", help="let the agent add documents")
    p.add_argument("--force", action="store_true", help="replace a different existing entry")
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    embedder_flags(p, rerank_flag=True)
    p.set_defaults(func=cmd_install)
