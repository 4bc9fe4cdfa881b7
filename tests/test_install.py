"""kb-mcp install: merges the server entry into an agent's config, never clobbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kb_mcp", "install", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


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
