"""kb-mcp install for six agents (issue 12, "Install and wiring").

Each target is checked the way its agent would use it: the entry is read back from the
file ``install`` wrote, its command is launched with its args and env, and an MCP
``initialize`` is completed through it. The per-OS user paths, the TOML writer (Codex)
and the ready files in ``agent_configs/`` are pinned here too.
"""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from kb_mcp.cli.agent_config import read_entry
from kb_mcp.cli.agents import AGENTS, user_config_path
from kb_mcp.cli.install import server_command
from kb_mcp.cli.main import main

REPO = Path(__file__).resolve().parent.parent
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "install-test", "version": "1"},
    },
}
STARTUP_TIMEOUT_S = 120  # the prelude answers in < 1 s; the shared 2-core machine is slow


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user folder of this test: HOME, no KB_MCP_* / agent variables from the developer."""
    folder = tmp_path / "user"
    folder.mkdir()
    for name in list(os.environ):
        if name.startswith("KB_MCP_") or name in {"CODEX_HOME", "XDG_CONFIG_HOME", "OLLAMA_HOST"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_DATA_HOME", str(folder / "data"))
    return folder


def install(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["install", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def written_path(agent: str, user: Path, project: Path) -> Path:
    spec = AGENTS[agent]
    if spec.default_scope == "user":
        found = user_config_path(spec, "Linux", user, {})
        assert found is not None
        return found
    assert spec.project_file is not None
    return project / spec.project_file


def initialize_through(entry: dict, timeout_s: float = STARTUP_TIMEOUT_S) -> dict:
    """Start ``entry`` as the agent would (its command, args, env) and complete initialize."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env |= entry.get("env", {})
    process = subprocess.Popen(
        [entry["command"], *entry["args"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], timeout_s)
        assert ready, f"no initialize reply within {timeout_s} s"
        return json.loads(process.stdout.readline())
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("agent", list(AGENTS))
def test_install_each_agent_writes_an_entry_that_completes_initialize(
    agent: str, user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12 "Done when": each install target is tested by launching the command it
    wrote and completing an MCP initialize through it, on the library it names."""
    project = tmp_path / "project"
    project.mkdir()
    library = tmp_path / "library"
    where = [] if AGENTS[agent].default_scope == "user" else ["--project", str(project)]
    code, _, err = install(capsys, agent, *where, "--home", str(library), "--embedder", "none")
    assert code == 0, err
    path = written_path(agent, user, project)
    spec = AGENTS[agent]
    entry = read_entry(path.read_text(), spec.fmt, spec.servers_key, "kb")
    assert entry is not None
    assert entry["args"][-3:] == ["serve", "--home", str(library.resolve())]
    assert entry["env"] == {"KB_MCP_EMBEDDER": "none"}
    assert ("type" in entry) == spec.typed
    reply = initialize_through(entry)
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "kb-mcp"
    assert "keyword only" in reply["result"]["instructions"]  # the recorded embedder


def test_install_claude_desktop_paths_per_os(tmp_path: Path) -> None:
    """issue 12: claude_desktop_config.json in the app's folder on Linux, macOS, Windows."""
    agent = AGENTS["claude-desktop"]
    home = tmp_path
    assert user_config_path(agent, "Linux", home, {}) == (
        home / ".config" / "Claude" / "claude_desktop_config.json"
    )
    assert user_config_path(agent, "Linux", home, {"XDG_CONFIG_HOME": str(tmp_path / "x")}) == (
        tmp_path / "x" / "Claude" / "claude_desktop_config.json"
    )
    assert user_config_path(agent, "Darwin", home, {}) == (
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    )
    roaming = str(tmp_path / "Roaming")
    assert user_config_path(agent, "Windows", home, {"APPDATA": roaming}) == (
        Path(roaming) / "Claude" / "claude_desktop_config.json"
    )


def test_install_user_paths_of_cursor_vscode_codex_kiro(tmp_path: Path) -> None:
    """issue 12: the user-wide file of each agent that has one (VS Code's profile folder,
    Codex's $CODEX_HOME)."""
    home = tmp_path
    paths = {name: user_config_path(AGENTS[name], "Linux", home, {}) for name in AGENTS}
    assert paths["cursor"] == home / ".cursor" / "mcp.json"
    assert paths["vscode"] == home / ".config" / "Code" / "User" / "mcp.json"
    assert paths["codex"] == home / ".codex" / "config.toml"
    assert paths["kiro"] == home / ".kiro" / "settings" / "mcp.json"
    assert paths["claude-code"] is None  # its own `claude mcp add --scope user`
    mac = user_config_path(AGENTS["vscode"], "Darwin", home, {})
    assert mac == home / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
    codex = user_config_path(AGENTS["codex"], "Linux", home, {"CODEX_HOME": str(tmp_path / "c")})
    assert codex == tmp_path / "c" / "config.toml"


def test_install_cursor_user_writes_the_home_folders_config(
    user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: cursor --user writes ~/.cursor/mcp.json."""
    code, _, err = install(capsys, "cursor", "--user")
    assert code == 0, err
    assert "kb" in json.loads((user / ".cursor" / "mcp.json").read_text())["mcpServers"]


def test_install_vscode_uses_servers_and_keeps_inputs(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: VS Code's schema is {"servers": {name: {"type": "stdio", ...}}}; its
    "inputs" and other servers stay."""
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    other = {"type": "stdio", "command": "x"}
    config.write_text(json.dumps({"inputs": [{"id": "k"}], "servers": {"other": other}}))
    code, _, err = install(capsys, "vscode", "--project", str(tmp_path))
    assert code == 0, err
    data = json.loads(config.read_text())
    assert data["inputs"] == [{"id": "k"}] and data["servers"]["other"] == other
    assert data["servers"]["kb"]["type"] == "stdio" and "mcpServers" not in data


CODEX_CONFIG = """\
# my codex settings
model = "o3"   # keep this comment

[mcp_servers.other]
command = "x"
args = ["a"]

[profiles.fast]
model = "mini"
"""


def test_install_codex_keeps_comments_and_other_tables(
    user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: Codex's config.toml is the user's hand-edited file: everything but the new
    [mcp_servers.kb] table stays as it was, comments included."""
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    code, _, err = install(capsys, "codex", "--embedder", "none")
    assert code == 0, err
    text = config.read_text()
    assert "# my codex settings" in text and 'model = "o3"   # keep this comment' in text
    data = tomllib.loads(text)
    assert data["model"] == "o3" and data["profiles"] == {"fast": {"model": "mini"}}
    assert data["mcp_servers"]["other"] == {"command": "x", "args": ["a"]}
    command, _ = server_command()
    assert data["mcp_servers"]["kb"]["command"] == command
    assert data["mcp_servers"]["kb"]["env"] == {"KB_MCP_EMBEDDER": "none"}
    assert install(capsys, "codex", "--embedder", "none")[0] == 0  # the same entry again: ok
    assert config.read_text() == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[mcp_servers\nbroken", "not valid TOML"),
        ('mcp_servers = "nope"\n', "is not a table"),
    ],
)
def test_install_codex_leaves_an_invalid_config_untouched(
    user: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    """issue 12: an invalid config is a clear error (which file, what is wrong), unchanged."""
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(text)
    code, _, err = install(capsys, "codex")
    assert code == 2 and message in err and str(config) in err and "nothing was changed" in err
    assert config.read_text() == text


def test_install_codex_refuses_a_different_entry_without_force(
    user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: a [mcp_servers.kb] of the user's is not replaced silently."""
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.kb]\ncommand = "old"\n')
    code, _, err = install(capsys, "codex")
    assert code == 6 and "--force" in err
    assert config.read_text() == '[mcp_servers.kb]\ncommand = "old"\n'
    assert install(capsys, "codex", "--force")[0] == 0
    assert tomllib.loads(config.read_text())["mcp_servers"]["kb"]["command"] != "old"


def test_install_invalid_utf8_config_is_a_clear_error(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: an unreadable config names the file and changes nothing."""
    config = tmp_path / ".cursor" / "mcp.json"
    config.parent.mkdir()
    config.write_bytes(b'{"mcpServers": {"\xff": 1}}')
    code, _, err = install(capsys, "cursor", "--project", str(tmp_path))
    assert code == 2 and str(config) in err and "nothing was changed" in err
    assert config.read_bytes() == b'{"mcpServers": {"\xff": 1}}'


def test_install_records_the_embedder_settings_of_flags_and_environment(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """issue 12: --embedder / --embed-model and KB_MCP_* / OLLAMA_HOST of the installing
    shell go into the entry's env; the library's config.toml is left to the server."""
    library = tmp_path / "library"
    library.mkdir()
    (library / "config.toml").write_text('graph_extractor = "ollama"\n')
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    monkeypatch.setenv("KB_MCP_GRAPH_MODEL", "tiny")
    code, _, err = install(
        capsys,
        *("kiro", "--project", str(tmp_path), "--home", str(library)),
        *("--embedder", "ollama", "--embed-model", "nomic-embed-text"),
    )
    assert code == 0, err
    entry = json.loads((tmp_path / ".kiro/settings/mcp.json").read_text())["mcpServers"]["kb"]
    assert entry["env"] == {
        "KB_MCP_EMBEDDER": "ollama",
        "KB_MCP_EMBED_MODEL": "nomic-embed-text",
        "KB_MCP_OLLAMA_HOST": "http://127.0.0.1:9",
        "KB_MCP_GRAPH_MODEL": "tiny",
    }


def test_install_records_the_reranker_with_its_folder_made_absolute(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """issue 21: --reranker / --reranker-model go into the entry's env; an onnx folder
    given relative to the installing shell is written absolute (the agent's server runs
    in another working directory)."""
    (tmp_path / "models" / "xenc").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "models")
    code, _, err = install(
        capsys,
        *("kiro", "--project", str(tmp_path)),
        *("--embedder", "none", "--reranker", "onnx", "--reranker-model", "xenc"),
    )
    assert code == 0, err
    entry = json.loads((tmp_path / ".kiro/settings/mcp.json").read_text())["mcpServers"]["kb"]
    assert entry["env"] == {
        "KB_MCP_EMBEDDER": "none",
        "KB_MCP_RERANKER": "onnx",
        "KB_MCP_RERANKER_MODEL": str((tmp_path / "models" / "xenc").resolve()),
    }


def test_install_claude_desktop_refuses_a_project(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: Claude Desktop has only a user-wide config; --project is an error."""
    code, _, err = install(capsys, "claude-desktop", "--project", str(tmp_path))
    assert code == 2 and "no per-project MCP config" in err
    assert not (user / ".config").exists()


def test_install_codex_dry_run_prints_and_writes_nothing(
    user: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: --dry-run prints the file it would write."""
    code, out, _ = install(capsys, "codex", "--dry-run")
    assert code == 0 and "[mcp_servers.kb]" in out and str(user / ".codex") in out
    assert not (user / ".codex").exists()


def test_install_keeps_a_codex_configs_mode(user: Path, capsys: pytest.CaptureFixture[str]):
    """issue 12: file modes are preserved (a 0600 config.toml stays 0600)."""
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    config.chmod(0o600)
    assert install(capsys, "codex")[0] == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


TEAM_STORE = "postgresql://kb_writer:pw@db.example.com:5432/kb?sslmode=verify-full"
READY_FILES = {
    "claude-code.mcp.json": ("claude-code", []),
    "claude-code-writable.mcp.json": ("claude-code", ["--allow-agent-writes"]),
    # a team library: the store goes in as a variable, without the password it was given
    "claude-code-team.mcp.json": (
        "claude-code",
        ["--allow-agent-writes", "--store", TEAM_STORE],
    ),
    "claude_desktop_config.json": ("claude-desktop", []),
    "cursor.mcp.json": ("cursor", []),
    "vscode.mcp.json": ("vscode", []),
    "codex.config.toml": ("codex", []),
    "kiro-mcp.json": ("kiro", []),
}


def _portable(entry: dict) -> dict:
    """The entry with this machine's absolute command replaced by `kb-mcp` on PATH."""
    command, prefix = server_command()
    assert entry["command"] == command and entry["args"][: len(prefix)] == prefix
    return {**entry, "command": "kb-mcp", "args": entry["args"][len(prefix) :]}


@pytest.mark.parametrize("ready", list(READY_FILES))
def test_agent_configs_ready_file_matches_what_install_writes(
    ready: str, user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: agent_configs/ has a ready file for each agent, equal to what `install`
    writes for the default library, the absolute command aside."""
    agent, extra = READY_FILES[ready]
    spec = AGENTS[agent]
    where = [] if spec.default_scope == "user" else ["--project", str(tmp_path)]
    code, out, err = install(capsys, agent, *where, *extra, "--dry-run")
    assert code == 0, err
    written = out.split("\n", 1)[1]
    entry = read_entry(written, spec.fmt, spec.servers_key, "kb")
    ready_text = (REPO / "agent_configs" / ready).read_text()
    assert read_entry(ready_text, spec.fmt, spec.servers_key, "kb") == _portable(entry)


def test_agent_configs_kiro_agent_runs_the_same_server(
    user: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 12: the Kiro custom agent's server is the kiro entry (plus its timeout)."""
    _, out, _ = install(capsys, "kiro", "--project", str(tmp_path), "--dry-run")
    entry = _portable(json.loads(out.split("\n", 1)[1])["mcpServers"]["kb"])
    agent = json.loads((REPO / "agent_configs" / "kiro-agent.json").read_text())
    server = agent["mcpServers"]["kb"]
    assert {k: v for k, v in server.items() if k != "timeout"} == entry
