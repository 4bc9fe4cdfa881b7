"""kb-mcp: a local knowledge base for coding agents, served over MCP.

The public API is ``Library`` with the services it owns (``library.lookup.search(q)``,
``kb_mcp/library/``), its ``Settings``, the result types and the ``KbError`` tree.
Names are imported lazily so that ``kb-mcp serve`` starts fast and can protect stdout
before any heavy module loads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Library": "kb_mcp.library",
    "AddResult": "kb_mcp.library.results",
    "ReadResult": "kb_mcp.library.results",
    "Overview": "kb_mcp.library.results",
    "SourceListing": "kb_mcp.library.results",
    "ReindexReport": "kb_mcp.library.results",
    "DoctorReport": "kb_mcp.library.results",
    "Settings": "kb_mcp.settings",
    "load_settings": "kb_mcp.settings",
    "SearchResult": "kb_mcp.search.engine",
    "Hit": "kb_mcp.search.engine",
    "GrepResult": "kb_mcp.grep",
    "GrepMatch": "kb_mcp.grep",
    "Citation": "kb_mcp.cite",
    "KbError": "kb_mcp.errors",
    "InvalidInput": "kb_mcp.errors",
    "NotFound": "kb_mcp.errors",
    "Refused": "kb_mcp.errors",
    "Unavailable": "kb_mcp.errors",
    "Conflict": "kb_mcp.errors",
    "Unreadable": "kb_mcp.errors",
}

__all__ = [  # noqa: RUF022 - grouped by module, as _EXPORTS
    "Library",
    "AddResult",
    "ReadResult",
    "Overview",
    "SourceListing",
    "ReindexReport",
    "DoctorReport",
    "Settings",
    "load_settings",
    "SearchResult",
    "Hit",
    "GrepResult",
    "GrepMatch",
    "Citation",
    "KbError",
    "InvalidInput",
    "NotFound",
    "Refused",
    "Unavailable",
    "Conflict",
    "Unreadable",
]

if TYPE_CHECKING:
    from kb_mcp.cite import Citation
    from kb_mcp.errors import (
        Conflict,
        InvalidInput,
        KbError,
        NotFound,
        Refused,
        Unavailable,
        Unreadable,
    )
    from kb_mcp.grep import GrepMatch, GrepResult
    from kb_mcp.library import Library
    from kb_mcp.library.results import (
        AddResult,
        DoctorReport,
        Overview,
        ReadResult,
        ReindexReport,
        SourceListing,
    )
    from kb_mcp.search.engine import Hit, SearchResult
    from kb_mcp.settings import Settings
    from kb_mcp.settings import load as load_settings


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kb_mcp' has no attribute {name!r}")
    attribute = "load" if name == "load_settings" else name
    return getattr(importlib.import_module(module), attribute)
