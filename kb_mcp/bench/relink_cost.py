"""What relation matching costs at ingest, and how long it holds the write lock.

``python -m kb_mcp.bench.relink_cost N [--share 0.05]`` writes a generated folder of N
small Markdown files (titles of common and rare words, some with an ``ADR-n`` or
``TICKET-n`` id, some titles shared by two files), of which ``share`` state a relation
to another file by its title ("Errata for the …"), its id ("Supersedes ADR-12", "This
notice cancels TICKET-88") or its file name ("Errata for d3/….md"), and syncs it into a
fresh home. It then removes 1 % of the files and syncs again, and finally redoes every
relation as after a rules change (the backfill, ``StoredRelations.ensure_current``).

It prints, for each phase, the CPU seconds spent in ``record_relations`` /
``forget_document`` (this process, the writer) and the CPU and wall seconds of the
longest write transaction, with the rows by state and the peak RSS. CPU, not wall: the
machine is shared. The module only uses what the library had before issue 10's relink
change, so the same file measures the old code (``PYTHONPATH`` at an old checkout).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kb_mcp.ingest import pipeline
from kb_mcp.library import Library
from kb_mcp.relations import relink
from kb_mcp.settings import Settings
from kb_mcp.store import meta
from kb_mcp.store import relations as relation_rows

_SYLLABLES = "ka lo mi ne ru sa ti vo ze pa do fi gu he ja ko lu ma no pe ri so tu".split()


def _words(rng: random.Random, count: int) -> list[str]:
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def generate(n: int, share: float, seed: int = 1) -> dict[str, str]:
    """N files (relative path → text); ``share`` of them state one relation each."""
    rng = random.Random(seed)
    vocab = _words(rng, 3000)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # a Zipf-like title vocabulary
    titles, paths = [], []
    for i in range(n):
        title = " ".join(rng.choices(vocab, weights, k=rng.randint(3, 6))).capitalize()
        if rng.random() < 0.05:
            title = f"ADR-{i}: {title}"
        elif rng.random() < 0.05:
            title = f"TICKET-{i} {title}"
        elif titles and rng.random() < 0.01:
            title = rng.choice(titles)  # two documents of one title: an ambiguity
        titles.append(title)
        paths.append(f"d{i % 50}/{'-'.join(title.lower().split()[:3]).replace(':', '')}-{i}.md")
    files = {}
    for title, path in zip(titles, paths, strict=True):
        body = f"{title} covers {' '.join(rng.choices(vocab, k=40))}.\n"
        if rng.random() < share:
            target = rng.randrange(n)
            how = rng.choice(("title", "id", "file"))
            if how == "title":
                title, body = f"Errata for the {titles[target]}", body + "One fix.\n"
            elif how == "id":
                ref = rng.choice((f"ADR-{target}", f"TICKET-{target}"))
                verb = "Supersedes" if ref.startswith("ADR") else "This notice cancels"
                body += f"\n{verb} {ref}.\n"
            else:
                title = f"Errata for {paths[target]}"
        files[path] = f"# {title}\n\n{body}"
    return files


class Meter:
    """CPU seconds inside the relations functions, and the outermost transactions'."""

    def __init__(self) -> None:
        self.relations_cpu = 0.0
        self.transactions: list[tuple[float, float]] = []  # (cpu, wall)

    def wrap(self, fn: Callable[..., None]) -> Callable[..., None]:
        def timed(*args: object, **kwargs: object) -> None:
            started = time.process_time()
            try:
                fn(*args, **kwargs)
            finally:
                self.relations_cpu += time.process_time() - started

        return timed

    def watch(self, lib: Library) -> None:
        real = lib.db.write
        depth = [0]

        @contextmanager
        def write() -> Iterator[object]:
            depth[0] += 1
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                with real() as conn:
                    yield conn
            finally:
                depth[0] -= 1
                if not depth[0]:
                    self.transactions.append(
                        (time.process_time() - cpu, time.perf_counter() - wall)
                    )

        lib.db.write = write  # type: ignore[method-assign]

    def phase(self) -> tuple[float, float, float]:
        """(relations CPU, longest transaction CPU, its wall), then start again."""
        longest = max(self.transactions, default=(0.0, 0.0))
        out = (self.relations_cpu, *longest)
        self.relations_cpu, self.transactions = 0.0, []
        return out


def _states(lib: Library) -> str:
    rows = relation_rows.state_counts(lib.db.conn)
    return " ".join(f"{state}={count}" for state, count in rows)


def run(n: int, share: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="kb-mcp-relink-cost-"))
    meter = Meter()
    relink.record_relations = meter.wrap(relink.record_relations)
    pipeline.forget_document = meter.wrap(pipeline.forget_document)
    try:
        folder = work / "notes"
        files = generate(n, share)
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
        settings = Settings(home=work / "home", embedder="none", max_files_per_source=10**6)
        with Library(settings) as lib:
            lib.folders.add_folder(folder, "notes")
            meter.watch(lib)
            phases = []
            cpu = time.process_time()
            lib.folders.sync("notes")
            phases.append(("sync", *meter.phase(), time.process_time() - cpu, _states(lib)))
            for rel in sorted(files)[::100]:
                (folder / rel).unlink()
            cpu = time.process_time()
            lib.folders.sync("notes")
            phases.append(("remove 1%", *meter.phase(), time.process_time() - cpu, _states(lib)))
            with lib.db.write() as conn:
                meta.delete(conn, relink.VERSION_KEY)
            meter.phase()
            lib.relations._current = False  # as a reader opening the library would find it
            cpu = time.process_time()
            lib.relations.ensure_current()
            phases.append(("backfill", *meter.phase(), time.process_time() - cpu, _states(lib)))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"N={n} share={share} peak RSS {peak:.0f} MB")
        print("phase       relations-CPU-s  longest-txn-CPU-s  longest-txn-wall-s  phase-CPU-s")
        for name, rel_cpu, txn_cpu, txn_wall, total, states in phases:
            print(
                f"{name:<11} {rel_cpu:>15.2f} {txn_cpu:>18.2f} {txn_wall:>19.2f} {total:>12.2f}"
                f"  {states}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--share", type=float, default=0.05)
    args = parser.parse_args()
    run(args.n, args.share)


if __name__ == "__main__":
    main()
