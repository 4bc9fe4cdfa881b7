"""``python -m kb_mcp`` is the ``kb-mcp`` command."""

import sys

from kb_mcp.cli.main import main

sys.exit(main())
