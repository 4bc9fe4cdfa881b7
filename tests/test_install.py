"""kb-mcp install: merges the server entry into an agent's config, never clobbers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def kb_mcp(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def install(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return kb_mcp("install", *args, env=env)


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose default library is under ``tmp_path`` and no KB_MCP_* is set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env["HOME"] = str(tmp_path / "user")
    env["XDG_DATA_HOME"] = str(tmp_path / "user" / "data")
    return env


def _entry(project: Path) -> dict:
    return json.loads((project / ".mcp.json").read_text())["mcpServers"]["kb"]


def test_install_claude_code_creates_mcp_json_with_a_runnable_entry(tmp_path: Path) -> None:
    result = install("claude-code", "--project", str(tmp_path), "--home", str(tmp_path / "kb"))
    assert result.returncode == 0, result.stderr
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["kb"]
    assert entry["type"] == "stdio"
    assert entry["args"][-3:] == ["serve", "--home", str(tmp_path / "kb")]
    assert Path(entry["command"]).is_file()


def test_install_keeps_other_servers_and_keys(tmp_path: Path) -> None:
    config = tmp_path / ".kiro" / "settings" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "keep": 1}))
    assert install("kiro", "--project", str(tmp_path), "--allow-agent-writes").returncode == 0
    data = json.loads(config.read_text())
    assert data["keep"] == 1 and data["mcpServers"]["other"] == {"command": "x"}
    assert data["mcpServers"]["kb"]["args"][-1] == "--allow-agent-writes"
    assert "type" not in data["mcpServers"]["kb"]


def test_install_refuses_to_replace_a_different_entry_without_force(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {"kb": {"command": "old"}}}))
    refused = install("claude-code", "--project", str(tmp_path))
    assert refused.returncode == 6 and "--force" in refused.stderr
    assert json.loads(config.read_text())["mcpServers"]["kb"] == {"command": "old"}
    assert install("claude-code", "--project", str(tmp_path), "--force").returncode == 0
    assert json.loads(config.read_text())["mcpServers"]["kb"]["command"] != "old"


def test_install_leaves_an_invalid_config_untouched(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    config.write_text("{not json")
    result = install("claude-code", "--project", str(tmp_path))
    assert result.returncode == 2 and "nothing was changed" in result.stderr
    assert config.read_text() == "{not json"


def test_install_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = install("kiro", "--project", str(tmp_path), "--dry-run")
    assert result.returncode == 0 and '"mcpServers"' in result.stdout
    assert not (tmp_path / ".kiro").exists()


def test_install_user_wide_claude_code_points_at_its_own_command(tmp_path: Path) -> None:
    result = install("claude-code", "--user")
    assert result.returncode == 2
    assert "claude mcp add --scope user kb -- " in result.stderr


def test_install_writes_kb_mcp_home_into_the_entry(tmp_path: Path, user_env: dict) -> None:
    """issue 7 item 21: the agent does not share the shell's KB_MCP_HOME."""
    library = tmp_path / "my-library"
    env = {**user_env, "KB_MCP_HOME": str(library)}
    assert install("claude-code", "--project", str(tmp_path), env=env).returncode == 0
    assert _entry(tmp_path)["args"][-2:] == ["--home", str(library.resolve())]


def test_install_leaves_the_default_home_implicit(tmp_path: Path, user_env: dict) -> None:
    """issue 7 item 21: the default library needs no --home (and stays portable)."""
    done = install("claude-code", "--project", str(tmp_path), env=user_env)
    assert done.returncode == 0, done.stderr
    assert "--home" not in _entry(tmp_path)["args"]


def test_install_home_before_the_subcommand_counts_too(tmp_path: Path, user_env: dict) -> None:
    """issue 7 item 21: `kb-mcp --home DIR install ...` works like `install ... --home DIR`."""
    library = tmp_path / "lib"
    done = kb_mcp("--home", str(library), "install", "claude-code", "--project", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert _entry(tmp_path)["args"][-2:] == ["--home", str(library.resolve())]


def test_install_refuses_a_project_folder_that_does_not_exist(tmp_path: Path) -> None:
    """issue 7 item 21: a mistyped --project is an error, not a new folder."""
    missing = tmp_path / "no-such-project"
    done = install("kiro", "--project", str(missing))
    assert done.returncode == 2
    assert "does not exist" in done.stderr and str(missing) in done.stderr
    assert not missing.exists()


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o664])
def test_install_keeps_an_existing_config_files_mode(tmp_path: Path, mode: int) -> None:
    """issue 7 item 21: a 0644 .mcp.json used to become 0600."""
    config = tmp_path / ".mcp.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    config.chmod(mode)
    assert install("claude-code", "--project", str(tmp_path)).returncode == 0
    assert stat.S_IMODE(config.stat().st_mode) == mode
    assert "kb" in json.loads(config.read_text())["mcpServers"]


def test_install_new_config_file_is_0644(tmp_path: Path) -> None:
    """issue 7 item 21: a new config holds a command line, no secret: a normal 0644."""
    assert install("kiro", "--project", str(tmp_path)).returncode == 0
    config = tmp_path / ".kiro" / "settings" / "mcp.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o644


def test_cli_version_prints_the_package_version() -> None:
    """issue 7 item 21: `kb-mcp --version`."""
    from kb_mcp import __version__

    done = kb_mcp("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"kb-mcp {__version__}"


def test_cli_home_before_the_subcommand_opens_that_library(tmp_path: Path) -> None:
    """issue 7 item 21: --home works before and after the subcommand, for every command."""
    before = kb_mcp("--home", str(tmp_path / "a"), "list", "--json")
    after = kb_mcp("list", "--json", "--home", str(tmp_path / "b"))
    assert json.loads(before.stdout)["home"] == str((tmp_path / "a").resolve())
    assert json.loads(after.stdout)["home"] == str((tmp_path / "b").resolve())


@pytest.mark.anyio
async def test_cli_serve_with_home_before_the_subcommand_serves_that_library(
    tmp_path: Path, user_env: dict
) -> None:
    """issue 7 item 21: `kb-mcp --home DIR serve` (what an entry may hold) is still `serve`:
    stdout is protected and the server opens DIR."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    library = tmp_path / "served"
    transport = StdioTransport(
        command=sys.executable,
        args=["-m", "kb_mcp", "--home", str(library), "serve"],
        env=user_env,
        keep_alive=False,
    )
    async with Client(transport, timeout=30) as client:
        listed = await client.call_tool("list", {})
    assert listed.structured_content["home"] == str(library.resolve())


def test_install_writes_through_a_symlinked_config(tmp_path: Path) -> None:
    """Outside run after issue 7: the link was replaced by a file, the real config kept {}."""
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}}))
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").symlink_to(real)
    assert install("claude-code", "--project", str(project)).returncode == 0
    assert (project / ".mcp.json").is_symlink()
    servers = json.loads(real.read_text())["mcpServers"]
    assert set(servers) == {"other", "kb"}
