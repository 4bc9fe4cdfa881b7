"""The CPU of each stage a reader process runs on every file, and a digest of its output.

``python -m kb_mcp.bench.reader_stages FOLDER [--digests OUT.json]`` converts each file of
FOLDER (``readers.convert_bytes``), redacts its text and title (``redact``), chunks it
(``split_document``) and makes each chunk's FTS row (``columns.index_row``), in this one
process, and prints the CPU seconds (``time.process_time``) of each stage: the reader
path of issue 22 without reading files, the writer or the later phases, so one change is
measured apart from the noise of a whole sync. ``--digests`` writes, per file, a digest
of each stage's output, so two runs (before and after a change) can be compared file by
file: a speed-up must leave them identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from kb_mcp.chunk import split_document
from kb_mcp.index.columns import index_row
from kb_mcp.ingest import readers
from kb_mcp.ingest.pipeline import redact_text

STAGES = ("convert", "redact", "chunk", "index")


def _digest(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def measure(folder: Path) -> tuple[dict[str, float], dict[str, dict[str, str]]]:
    """CPU seconds per stage over ``folder``'s files, and each file's output digests."""
    seconds = dict.fromkeys(STAGES, 0.0)
    digests: dict[str, dict[str, str]] = {}
    clock = time.process_time
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        started = clock()
        try:
            converted = readers.convert_bytes(data, readers.format_key(path))
        except Exception as exc:  # a file a sync would record as failed
            digests[str(path.relative_to(folder))] = {"failure": type(exc).__name__}
            continue
        converted_at = clock()
        text = redact_text(converted.markdown)
        title = redact_text(converted.title or path.name)
        redacted_at = clock()
        chunks = split_document(text, converted.kind, converted.language)
        chunked_at = clock()
        language = converted.language if converted.kind == "code" else None
        rows = [index_row(title, c.heading_path, c.text, language) for c in chunks]
        indexed_at = clock()
        spent = (converted_at - started, redacted_at - converted_at, chunked_at - redacted_at)
        for stage, stage_seconds in zip(STAGES, (*spent, indexed_at - chunked_at), strict=True):
            seconds[stage] += stage_seconds
        spans = [(c.heading_path, c.start_line, c.end_line, c.text) for c in chunks]
        digests[str(path.relative_to(folder))] = {
            "convert": _digest(converted.markdown),
            "redact": _digest([text, title]),
            "chunk": _digest(spans),
            "index": _digest(rows),
        }
    return seconds, digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--digests", type=Path, default=None, help="write per-file digests")
    args = parser.parse_args()
    seconds, digests = measure(args.folder)
    figures = ", ".join(f"{stage} {spent:.2f} s" for stage, spent in seconds.items())
    print(f"{len(digests)} files; CPU {figures}; total {sum(seconds.values()):.2f} s")
    if args.digests is not None:
        args.digests.write_text(json.dumps(digests, indent=0, sort_keys=True))


if __name__ == "__main__":
    main()
