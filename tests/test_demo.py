"""``kb-mcp demo``, the README's main command: a real server over stdio, hybrid search."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_a_real_session_with_hybrid_search(child_env: dict[str, str]) -> None:
    """The demo builds its vectors before the session (as `kb-mcp add --wait` does), so
    its English questions are answered in hybrid mode, and Chinese ones by keywords,
    saying why (the local model reads no Chinese; issue 22: a lesser mode says so)."""
    done = subprocess.run(
        [sys.executable, "-m", "kb_mcp", "demo"],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "for 'how do I roll back a deploy' (mode: hybrid)" in done.stdout
    assert "Deploy runbook" in done.stdout
    assert "for '代码评审' (mode: keyword, fell back to keyword)" in done.stdout
    assert "does not read Chinese or Japanese; the vector leg sat this one out" in done.stdout
