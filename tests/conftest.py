"""Shared fixtures: a library home in ``tmp_path``, the real server over stdio, the library.

Each fixture does one thing and they compose: ``mcp_client`` spawns ``kb-mcp serve`` on
``home``; ``library`` opens the same ``home`` in-process (built by the production
migrations); ``kb_cli`` runs any other ``kb-mcp`` command on it as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ollama_server import OllamaServer, serve_ollama
from postgres_server import drop_database, fresh_database, serve_postgres

from kb_mcp.library import Library
from kb_mcp.settings import Settings

if TYPE_CHECKING:
    from fastmcp import Client

# A hung server fails the request instead of hanging the test run.
MCP_REQUEST_TIMEOUT_S = 30
CLI_TIMEOUT_S = 60

ClientFactory = Callable[..., AbstractAsyncContextManager["Client"]]


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio only: the server stack (FastMCP, mcp) is asyncio-based.

    Session-scoped so module-scoped async fixtures (a server shared by read-only tests)
    can run on the same event loop as the tests that use them.
    """
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The library folder of one test; not created here (kb-mcp creates it on first use)."""
    return tmp_path / "home"


@pytest.fixture(scope="session", autouse=True)
def children_share_bytecode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every subprocess of this run (a server, a CLI command, a crash victim) reads and
    writes compiled bytecode in one cache of the run's temporary folder.

    A ``kb-mcp`` process imports most of ``kb_mcp``; compiling it from source costs each
    process about 0.5 s of CPU (a ``kb-mcp list`` takes 1.2 s instead of 0.65 s), and the
    suite starts a few hundred. With ``PYTHONDONTWRITEBYTECODE`` set (common in containers)
    nothing is cached, so every process paid it. ``PYTHONPYCACHEPREFIX`` keeps the cache
    out of the checkout, as that setting wants; it lives as long as the run's temporary
    folder. Set in this process's environment, so children started with ``os.environ``
    get it as well as those started with ``child_env``.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        patch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path_factory.mktemp("pycache")))
        yield


@pytest.fixture(scope="session")
def child_env(children_share_bytecode: None) -> dict[str, str]:
    """This process's environment minus every ``KB_MCP_*`` variable, plus
    ``KB_MCP_EMBEDDER=none``.

    A developer's ``KB_MCP_ALLOW_AGENT_WRITES=1`` or ``KB_MCP_HOME`` must not change
    what a test's subprocess does. The default embedder (``local``) would load a model
    and embed every test library in the background; tests about vectors ask for an
    embedder explicitly (``--embedder`` or their own ``KB_MCP_EMBEDDER``).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    env["KB_MCP_EMBEDDER"] = "none"
    return env


@pytest.fixture
def server_log(tmp_path: Path) -> Path:
    """Where ``mcp_client`` servers' stderr goes (appended), so a test can read their log."""
    return tmp_path / "server-stderr.log"


@pytest.fixture(scope="session")
def spawn_mcp(child_env: dict[str, str]) -> ClientFactory:
    """Factory: ``async with spawn_mcp(home, log_file=..., allow_agent_writes=...) as client``.

    Spawns ``python -m kb_mcp serve --home <home>`` (``entry`` replaces ``-m kb_mcp``,
    e.g. with a wrapper script that ends by calling ``kb_mcp.cli.main.main``; ``env``
    replaces ``child_env``). Each
    ``async with`` is one server process, ended when the block exits. Use ``mcp_client``
    in a test; this is for fixtures of wider scope.
    """

    @asynccontextmanager
    async def connect(
        home: Path,
        *,
        log_file: Path,
        allow_agent_writes: bool = False,
        entry: Sequence[str] = ("-m", "kb_mcp"),
        env: dict[str, str] | None = None,
    ) -> AsyncIterator[Client]:
        # Imported here: FastMCP is slow to import and most test modules never need it.
        from fastmcp import Client
        from fastmcp.client.transports import StdioTransport

        args = [*entry, "serve", "--home", str(home)]
        if allow_agent_writes:
            args.append("--allow-agent-writes")
        transport = StdioTransport(
            command=sys.executable,
            args=args,
            env=child_env if env is None else env,
            keep_alive=False,
            log_file=log_file,
        )
        async with Client(transport, timeout=MCP_REQUEST_TIMEOUT_S) as client:
            yield client

    return connect


@pytest.fixture
def mcp_client(spawn_mcp: ClientFactory, home: Path, server_log: Path) -> ClientFactory:
    """Factory: ``async with mcp_client(allow_agent_writes=True) as client: ...`` on ``home``.

    Options as for ``spawn_mcp`` (``allow_agent_writes``, ``entry``); stderr goes to
    ``server_log``.
    """

    def connect(**options: Any) -> AbstractAsyncContextManager[Client]:
        return spawn_mcp(home, log_file=server_log, **options)

    return connect


@pytest.fixture
def kb_cli(home: Path, child_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess]:
    """Run ``python -m kb_mcp <command> [args] --home <home>`` with stdin closed (no
    prompt ever waits); returns the completed process."""

    def run(command: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kb_mcp", command, *args, "--home", str(home)],
            env=child_env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )

    return run


@pytest.fixture
def library(home: Path) -> Iterator[Library]:
    """The ``Library`` over ``home`` with default settings, closed at teardown."""
    opened = Library(Settings(home=home))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def ollama_server() -> Iterator[OllamaServer]:
    """A loopback server speaking Ollama's ``/api/embed`` (``tests/ollama_server.py``)."""
    with serve_ollama() as server:
        yield server


# --- figures the adversarial suite measures (issue 11) --------------------------------------

FIGURE = "adversarial figure"


@pytest.fixture(scope="session")
def postgres_server() -> Any:
    """One real PostgreSQL cluster for the run (``tests/postgres_server.py``), shared by
    the xdist workers through the run's id.

    Its folder is not under pytest's temporary tree: as root the server runs as a user
    of its own, and pytest sets its tree's root back to 0700 whenever a run starts,
    which took the folder from under a running server. The last process to leave stops
    the server and deletes the folder.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
    return serve_postgres(Path(tempfile.gettempdir()) / f"kb-mcp-postgres-{run[:16]}")


@pytest.fixture
def postgres_url(postgres_server: Any) -> Iterator[str]:
    """The URL of a new empty database of this test's own, dropped after it."""
    url = fresh_database(postgres_server)
    yield url
    drop_database(postgres_server, url)


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``figures(group, line)``: a measured figure, printed at the end of the run.

    The adversarial suite reports what it tried (inputs per tool, kills survived, clients
    × calls, RSS before / after) so a run's numbers can go into docs/security.md. A figure
    rides on its test's report (``user_properties``), so it reaches the end-of-run summary
    from an xdist worker as well as from a run in one process.
    """

    def record(group: str, line: str) -> None:
        request.node.user_properties.append((FIGURE, (group, line)))

    return record


def pytest_terminal_summary(terminalreporter: Any) -> None:
    recorded: dict[str, list[str]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == FIGURE and getattr(report, "when", "call") == "call":
                    group, line = value
                    recorded.setdefault(group, []).append(line)
    if not recorded:
        return
    terminalreporter.section("adversarial figures (issue 11)")
    for group, lines in sorted(recorded.items()):
        for line in lines:
            terminalreporter.write_line(f"{group}: {line}")
