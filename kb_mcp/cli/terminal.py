"""What the CLI prints to a terminal: text with its control characters made visible.

Trigger (a new user's hostile folder): a file named ``esc\\x1b[32mname.md`` holding
``\\x1b]0;pwned\\x07`` went to the terminal as is through ``grep``, ``list``, ``read`` and
``search``, so any indexed document could recolour the user's terminal, set its title,
or clear it (and, on terminals that honour OSC 52, write the clipboard). The MCP tools
return the same text to an agent, not to a terminal, and ``--json`` escapes control
characters itself; only the CLI's text output passes through here.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL, and the C1 controls (``\x9b`` is a CSI).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with each control character but tab and newline written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
