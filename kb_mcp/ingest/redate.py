"""Document dates brought under today's date rules, once per rules version (issue 21).

Trigger: a document's date is read at ingest (``ingest/filework``: frontmatter, else a
date its text states for itself, else one in its file name, else the file's mtime), and
the rules that read it improve (``text/document_dates.DATES_VERSION``: "Stand: 14.03.2025",
"发布日期：2025年3月14日" came to be read). A library ingested before keeps the old dates:
folder files are not re-read while they are unchanged, uploads never are. The ranking
model reads those dates (``search/features``: recency, dated after the period asked
about), so an old library would rank as if the new rules did not exist.

Outcome, at the first use of such a library: every document a folder or an upload holds
is dated again from its stored text (``dates.text_date``, as the ingest does): a date the
text gives now replaces the stored one; where it gives none, the stored date stays (it
came from the file name or the mtime, read as before). Cheap: no file is re-read, no
chunk re-made; one read of each document's text. A document only the ``agent`` source
holds is dated by its frontmatter alone (``ingest/agent``): it is left as it is.

Changing a date also changes the year a relation's undated "effective 3 February" takes:
``relations.RELATIONS_VERSION`` is bumped with ``DATES_VERSION``, and the state redoes
the dates before the relations (``state.ready``).

Like ``relations/relink.StoredRelations``: run by the first reader, never before the MCP
handshake, in transactions of at most ``BATCH_DOCUMENTS`` documents or
``BATCH_SECONDS``, each recording where it stopped, and the version written only with
the last one.
"""

from __future__ import annotations

import time

from kb_mcp.store import documents as rows
from kb_mcp.store import link_queue, meta
from kb_mcp.store.db import Database
from kb_mcp.text.document_dates import DATES_VERSION, text_date

VERSION_KEY = "dates_version"
# Where an unfinished run stopped: "<rules version>:<last document id done>".
CURSOR_KEY = "dates_cursor"
BATCH_DOCUMENTS = 500
BATCH_SECONDS = 1.0
_READ = 50  # documents read (with their text) at a time


class StoredDates:
    """Documents dated under older rules: dated again (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._current = False

    def ensure_current(self) -> bool:
        """Date every document again when the stored version is not today's; whether it
        ran."""
        if self._current:
            return False
        wanted = str(DATES_VERSION)
        if meta.get(self.db.conn, VERSION_KEY) == wanted:
            self._current = True
            return False
        while not self._batch(wanted):
            pass
        self._current = True
        return True

    def _batch(self, wanted: str) -> bool:
        """Date the next documents in one transaction; whether the run is done."""
        with self.db.write() as conn:
            if meta.get(conn, VERSION_KEY) == wanted:  # another process finished it
                return True
            version, _, done = (meta.get(conn, CURSOR_KEY) or "").partition(":")
            after = int(done) if version == wanted else 0
            ends_at, count = time.monotonic() + BATCH_SECONDS, 0
            while count < BATCH_DOCUMENTS and time.monotonic() < ends_at:
                batch = rows.user_documents_after(conn, after, _READ)
                if not batch:
                    meta.put(conn, VERSION_KEY, wanted)
                    meta.delete(conn, CURSOR_KEY)
                    return True
                for document_id, kind, text, stored in batch:
                    dated = text_date(text, kind)
                    if dated and dated != stored:
                        rows.set_doc_date(conn, document_id, dated)
                        if link_queue.is_queued(conn, document_id):  # relations read the date
                            link_queue.enqueue(conn, document_id)
                after, count = batch[-1][0], count + len(batch)
            meta.put(conn, CURSOR_KEY, f"{wanted}:{after}")
            return False
