"""``python -m kb_mcp.bench.store_search`` (issue 24's 1M figures): whole searches over a
library the perf bench built, timed per question with the PostgreSQL server's CPU beside
the caller's, on a real server."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from kb_mcp.bench import perf, store_search
from kb_mcp.errors import NotFound
from kb_mcp.settings import Store
from tests.test_bench_perf import data  # noqa: F401  (the tiny public-set fixture)


def _data_folder(url: str) -> Path:
    """The test cluster listens on a socket in its own data folder."""
    return Path(psycopg.conninfo.conninfo_to_dict(url)["host"])


def test_store_search_times_keyword_and_hybrid_with_the_servers_cpu(
    data: Path,  # noqa: F811
    tmp_path: Path,
    postgres_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = Store(postgres_url)
    perf.measure_size(12, tmp_path, data, hybrid=True, store=store)
    assert (tmp_path / "home" / perf.STANDIN_MARK).is_file()
    assert (_data_folder(postgres_url) / "postmaster.pid").is_file()

    rows = store_search.run(tmp_path / "home", store, data, _data_folder(postgres_url))

    assert [(r.queries, r.mode, r.asked) for r in rows] == [
        ("scifact", "keyword", 2),
        ("scifact", "hybrid", 2),
        ("nfcorpus", "keyword", 1),
        ("nfcorpus", "hybrid", 1),
        ("cmrc2018", "keyword", 1),  # the stand-in model, as the real one, reads no Chinese
    ]
    for row in rows:
        assert row.stopped == 0
        # every search sends statements, so the server worked for each one
        assert row.server_cpu is not None and row.server_cpu[0] > 0
        for p in (0, 1):  # each question's sum is at least either part
            assert row.cpu[p] >= max(row.client_cpu[p], row.server_cpu[p])
    printed = capsys.readouterr().out
    assert printed.count("| scifact |") == 2


def test_store_search_without_the_server_folder_has_no_server_column(
    data: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """On SQLite (or a server elsewhere) only the caller's time is measured."""
    perf.measure_size(12, tmp_path, data)
    rows = store_search.run(tmp_path / "home", Store(), data, modes=["keyword"])
    assert [r.queries for r in rows] == ["scifact", "nfcorpus", "cmrc2018"]
    assert all(r.server_cpu is None and r.cpu == r.client_cpu for r in rows)
    with pytest.raises(NotFound, match="no stand-in vectors"):
        store_search.run(tmp_path / "home", Store(), data, modes=["hybrid"])


def test_a_server_process_that_ends_mid_search_does_not_take_time_back() -> None:
    """Other sessions' backends come and go while a search runs (a test run shares the
    cluster): one that ended drops out, one that started counts whole."""
    before = {101: 5_000_000, 102: 9_000_000}  # ns; 102 ends during the search
    after = {101: 7_000_000, 103: 1_000_000}  # 103 starts during it
    assert store_search.server_ms_between(before, after) == 3.0
