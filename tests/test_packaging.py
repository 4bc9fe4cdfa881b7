"""The wheel and sdist (issue 12, "Install and wiring"): built once per session, checked.

``python -m build --no-isolation`` uses the setuptools and build of the test virtualenv
(the dev extra), so the test downloads nothing; CI's own README check builds with
isolation. The wheel must hold every non-Python file under ``kb_mcp/`` (the demo corpus,
the golden sets, the tokenizer: all read at run time) and nothing from tests; its entry
point must run from the wheel's files, not from this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from kb_mcp import __version__

REPO = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = 600


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the built wheel and sdist of this checkout."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    warnings = [
        line
        for line in (done.stdout + done.stderr).lower().splitlines()
        if "warning" in line and "byte-compiling is disabled" not in line
    ]
    assert not warnings, warnings  # e.g. setuptools' deprecations of pyproject fields
    return out


def _package_data_files() -> set[str]:
    """Non-Python files of the package in this checkout (what run time may read)."""
    root = REPO / "kb_mcp"
    return {
        path.relative_to(REPO).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }


def test_packaging_wheel_holds_every_runtime_file(dist: Path) -> None:
    """issue 12: package data included (demo corpus, golden sets, tokenizer); no tests."""
    (wheel,) = dist.glob("kb_mcp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _package_data_files() - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert "kb_mcp/server/instructions.py" in names
    assert not any(n.startswith("tests/") for n in names)
    metadata = zipfile.ZipFile(wheel).read(f"kb_mcp-{__version__}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Provides-Extra: pdf" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert not any("pymupdf" in r and "extra ==" not in r for r in requires), requires
    entry_points = zipfile.ZipFile(wheel).read(f"kb_mcp-{__version__}.dist-info/entry_points.txt")
    assert b"kb-mcp = kb_mcp.cli.main:main" in entry_points


def test_packaging_sdist_holds_the_sources_and_docs(dist: Path) -> None:
    """issue 12: the sdist builds the same package (sources, package data, README)."""
    (sdist,) = dist.glob("kb_mcp-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    assert {"README.md", "pyproject.toml", "kb_mcp/cli/main.py"} <= names
    assert _package_data_files() <= names


@dataclass
class Served:
    server_info: Any
    tools: list[str]


async def _serve_through(script: Path, folder: Path, env: dict[str, str]) -> Served:
    """An MCP session with ``script serve`` (fastmcp's Client): handshake, tools/list."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    home = str(folder / "home")
    transport = StdioTransport(
        str(script), ["serve", "--home", home], env=env, cwd=str(folder), keep_alive=False
    )
    async with Client(transport, timeout=120) as client:
        info = client.server_info
        tools = [tool.name for tool in await client.list_tools()]
    return Served(info, tools)


def run_in(folder: Path, env: dict[str, str]) -> dict:
    """Outside the checkout: ``-m`` and ``-c`` would import it from the current folder."""
    return {"cwd": folder, "env": env, "capture_output": True, "text": True}


def test_packaging_entry_point_runs_from_the_wheel(dist: Path, tmp_path: Path) -> None:
    """issue 12: the wheel's own files run: `kb-mcp --version`, `kb-mcp demo` (the README's
    main command) and a `serve` session.

    Installed without dependencies into a target folder first on PYTHONPATH (this
    virtualenv supplies the dependencies); the server reports which kb_mcp it imported.
    """
    (wheel,) = dist.glob("kb_mcp-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env |= {"PYTHONPATH": str(target), "KB_MCP_EMBEDDER": "none"}
    script = target / "bin" / "kb-mcp"  # the wheel's entry point, as pip writes it
    imported = subprocess.run(
        [sys.executable, "-c", "import kb_mcp; print(kb_mcp.__file__)"],
        **run_in(tmp_path, env),
        check=True,
    )
    assert imported.stdout.strip().startswith(str(target)), imported.stdout
    version = subprocess.run([script, "--version"], **run_in(tmp_path, env))
    assert version.stdout.strip() == f"kb-mcp {__version__}"
    demo = subprocess.run([script, "demo"], timeout=600, **run_in(tmp_path, env))
    assert demo.returncode == 0, demo.stderr[-2000:]  # pip compiled demo_corpus/*.py
    assert "tools: search, grep, read, list, add_document" in demo.stdout
    served = anyio.run(_serve_through, script, tmp_path, env)
    assert served.server_info.name == "kb-mcp" and served.server_info.version == __version__
    tools = set(served.tools)
    assert tools == {"search", "grep", "read", "list", "add_document"}
