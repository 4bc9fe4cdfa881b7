"""The name of this machine, as a shared library records it.

On a library several machines share (PostgreSQL), a folder source belongs to the machine
that registered it: only that machine can read its files. The name is the host name
(``socket.gethostname()``); the ``host`` setting (``KB_MCP_HOST``) overrides it, so one
machine can act as two (tests, or two homes meant to own their folders apart) and a
machine whose name changes can keep claiming its folders.
"""

from __future__ import annotations

import socket

HOST_ENV = "KB_MCP_HOST"


def this_host(configured: str) -> str:
    """This machine's name: ``configured`` (the ``host`` setting) when not blank, else the
    host name."""
    return configured.strip() or socket.gethostname()
