"""The library: ``Library`` and the services it owns, one concept per module.

``Library`` (``library.py``) opens a home folder's state once (``state.py``) and owns one
service per concept as a public attribute; the adapters (MCP tools, CLI, web view,
bench) call the services directly, ``library.lookup.search(q)``. The services, in
data-flow order: ``writing``, ``folders``, ``links``, ``lookup`` (with ``reader``),
``entities``, ``catalog``, ``health``, ``views``; ``results`` holds the values they
return. Vectors and the LLM pass are ``embed/active.py`` and ``graph/enrich.py``.

Names are imported lazily, as in ``kb_mcp/__init__.py``: lower layers import
``kb_mcp.library.results`` for its value types, and that must not open the whole
library (nor cost the server's start-up the ~0.3 s of importing it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Library": "kb_mcp.library.library",
    "DB_FILE": "kb_mcp.home",
    "MODEL_LOADING": "kb_mcp.library.lookup",
    # what the adapters ask in their last ``except`` (store/failures.py)
    "storage_failure": "kb_mcp.store.failures",
}

__all__ = ["DB_FILE", "MODEL_LOADING", "Library", "storage_failure"]

if TYPE_CHECKING:
    from kb_mcp.home import DB_FILE
    from kb_mcp.library.library import Library
    from kb_mcp.library.lookup import MODEL_LOADING
    from kb_mcp.store.failures import storage_failure


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kb_mcp.library' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
