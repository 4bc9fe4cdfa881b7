"""``python -m kb_mcp`` is the ``kb-mcp`` command."""

import sys

from kb_mcp.cli.main import main

if __name__ == "__main__":  # a spawned worker process imports this module again
    sys.exit(main())
