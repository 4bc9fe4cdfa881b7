"""Which PDF reader reads manuals best, at what CPU and memory: the evidence for the default.

``python -m kb_mcp.bench.pdf_readers FOLDER [--pages N] [--readers A,B]`` extracts the
text of every PDF in FOLDER (the first N pages of each, 40 by default) with each
candidate reader that is installed, each file in a fresh process, and prints one row per
reader:

- words: word tokens (runs of two or more letters) extracted;
- shared: the share of a reader's words that at least one other reader also found in
  that file (a glued "andthe", a split "inform ation" or a mangled letter is found by no
  other reader, so garbled text lowers it);
- found: the share of the words every other reader agrees on that this reader has
  (text a reader drops lowers it);
- glued: letter runs of 20 or more per 1,000 words (words run together);
- odd: spacing diacritics before a letter ("M¨oller"), U+FFFD and control characters,
  per page (``ingest/normalize`` folds the first two for every reader);
- CPU ms a page, of the extraction alone (the process's CPU clock, so a loaded machine
  does not change it much), and the process's peak RSS (interpreter and library
  included: what a bounded conversion process holds).

Candidates: pypdfium2 (Apache-2.0 / BSD-3-Clause, Google's PDFium), pypdf (BSD-3-Clause,
pure Python), pdfminer.six (MIT, pure Python), and for reference pymupdf's plain text and
pymupdf4llm (AGPL-3.0, the optional rich reader). Only pypdfium2 is a dependency; install
the others in a scratch virtualenv to compare (``docs/architecture.md`` has the command).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

READERS = ("pypdfium2", "pypdf", "pdfminer.six", "pymupdf-text", "pymupdf4llm")
_MODULES = {
    "pypdfium2": "pypdfium2",
    "pypdf": "pypdf",
    "pdfminer.six": "pdfminer",
    "pymupdf-text": "pymupdf",
    "pymupdf4llm": "pymupdf4llm",
}
_WORD = re.compile(r"[^\W\d_]{2,}")
_GLUED = re.compile(r"[^\W\d_]{20,}")
_ODD = re.compile(r"[\u00a8\u00b4\u02c6\u02dc\u02c7\u02d8\u02d9\u02da\u02dd\u00b8\u00af]"
                  r"(?=[^\W\d_])|\ufffd|[\x00-\x08\x0b\x0e-\x1f]")  # fmt: skip


def _extract(reader: str, data: bytes, pages: int) -> list[str]:
    """The text of the first ``pages`` pages, one string a page, as ``reader`` gives it."""
    if reader == "pypdfium2":
        import pypdfium2

        document = pypdfium2.PdfDocument(data)
        out = []
        for index in range(min(pages, len(document))):
            page = document[index]
            textpage = page.get_textpage()
            out.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return out
    if reader == "pypdf":
        import pypdf

        return [p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages[:pages]]
    if reader == "pdfminer.six":
        from pdfminer.high_level import extract_text

        text = extract_text(io.BytesIO(data), page_numbers=set(range(pages)))
        return text.split("\f")[:-1] or [text]
    import pymupdf

    document = pymupdf.open(stream=data, filetype="pdf")
    if reader == "pymupdf-text":
        return [document[i].get_text() for i in range(min(pages, len(document)))]
    import pymupdf4llm

    chunks = pymupdf4llm.to_markdown(
        document,
        pages=list(range(min(pages, len(document)))),
        use_ocr=False,
        show_progress=False,
        page_chunks=True,
    )
    return [chunk["text"] for chunk in chunks]


def _one(reader: str, path: str, pages: int) -> None:
    """Child: extract one file, print its pages and the extraction's CPU seconds as JSON."""
    data = Path(path).read_bytes()
    __import__(_MODULES[reader])  # the import is not the extraction's cost
    started = time.process_time()
    texts = _extract(reader, data, pages)
    cpu = time.process_time() - started
    json.dump({"pages": texts, "cpu": cpu}, sys.stdout)


def _run(reader: str, path: Path, pages: int) -> tuple[list[str], float, int]:
    """One extraction in a fresh process: its pages, CPU seconds and peak RSS in bytes."""
    args = [sys.executable, "-m", "kb_mcp.bench.pdf_readers", "--one", reader, str(path)]
    child = subprocess.Popen([*args, "--pages", str(pages)], stdout=subprocess.PIPE)
    out = child.stdout.read() if child.stdout else b""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        return [], 0.0, 0
    result = json.loads(out)
    return result["pages"], result["cpu"], usage.ru_maxrss * 1024


def _installed(reader: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(_MODULES[reader]) is not None


def compare(folder: Path, pages: int, chosen: tuple[str, ...] = READERS) -> list[dict[str, object]]:
    """One row of figures per installed reader of ``chosen`` over every PDF in ``folder``."""
    readers = [r for r in chosen if _installed(r)]
    files = sorted(folder.glob("*.pdf"))
    totals = {r: Counter() for r in readers}
    peak = dict.fromkeys(readers, 0)
    for path in files:
        words: dict[str, Counter[str]] = {}
        for reader in readers:
            texts, cpu, rss = _run(reader, path, pages)
            text = "\n".join(texts)
            words[reader] = Counter(w.lower() for w in _WORD.findall(text))
            total = totals[reader]
            total["pages"] += len(texts)
            total["cpu"] += cpu
            total["glued"] += len(_GLUED.findall(text))
            total["odd"] += len(_ODD.findall(text))
            total["failed"] += not texts
            peak[reader] = max(peak[reader], rss)
        for reader in readers:
            others = [set(words[o]) for o in readers if o != reader]
            seen_by_others = set().union(*others) if others else set()
            agreed = set.intersection(*others) if others else set()
            own = words[reader]
            total = totals[reader]
            total["words"] += sum(own.values())
            total["shared"] += sum(n for w, n in own.items() if w in seen_by_others)
            total["agreed"] += len(agreed)
            total["found"] += len(agreed & set(own))
    rows = []
    for reader in readers:
        t = totals[reader]
        rows.append(
            {
                "reader": reader,
                "pages": t["pages"],
                "failed files": t["failed"],
                "words": t["words"],
                "shared %": round(100 * t["shared"] / max(t["words"], 1), 1),
                "found %": round(100 * t["found"] / max(t["agreed"], 1), 1),
                "glued /1k words": round(1000 * t["glued"] / max(t["words"], 1), 2),
                "odd /page": round(t["odd"] / max(t["pages"], 1), 2),
                "CPU ms/page": round(1000 * t["cpu"] / max(t["pages"], 1), 1),
                "peak RSS MB": round(peak[reader] / 1e6),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path)
    parser.add_argument("--pages", type=int, default=40, help="first N pages of each file")
    parser.add_argument(
        "--readers",
        default=",".join(READERS),
        help="comma-separated readers to compare (pymupdf4llm takes ~0.7 s a page)",
    )
    parser.add_argument("--one", nargs=2, metavar=("READER", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        _one(args.one[0], args.one[1], args.pages)
        return
    if args.folder is None:
        parser.error("a folder of PDFs is needed")
    rows = compare(args.folder, args.pages, tuple(args.readers.split(",")))
    if not rows:
        print("no PDF reader installed")
        return
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
