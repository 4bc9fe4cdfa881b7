"""The files of a library's home folder that more than one layer names.

Why a module of its own: the server's audit writer (``server/audit.py``) and the web
view's reader (``views.py``) name the same log, and the server's instructions
(``server/instructions.py``, read before the library is imported) name the same
database the library opens. Plain names with no imports, so none of them imports more
to know them. Files one module owns stay with it
(``ingest/agent.DOCS_DIR``, ``ingest/sources.REGISTRY_FILE``, ``store/locks.LOCKS_DIR``).
"""

from __future__ import annotations

DB_FILE = "kb.db"  # the index: rebuildable from the files (docs/architecture.md)
AUDIT_FILE = "audit.log"  # one JSON line per tool call, appended by server/audit.py
# ``<home>/web/<name>/``: a web source's pages, named by the registry (ingest/sources.py)
# and written by the crawl (ingest/fetch/mirror.py)
WEB_DIR = "web"
