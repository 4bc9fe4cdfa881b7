"""Which redaction rules stored text was redacted under.

Trigger: text stored under older rules keeps any secret a newer rule would catch (folder
files are not re-read while their mtime and hash are unchanged; agent documents are never
re-read at all). Outcome: the library records ``RULES_VERSION`` in ``meta`` and a database
redacted under an older one is re-redacted at first use (``ingest/reredact.py``).

Why an int and not a digest of the rules computed at run time: a digest changes on every
harmless refactor, and each change costs every user a scan of all stored text plus a
re-read of every folder file. A digest never forgets to be bumped, though, so it is kept
as a guard: ``RULES_FINGERPRINT`` is a digest of the credential rule modules' code
(docstrings, comments and formatting excluded; ``tests/test_reredact.py`` recomputes it).
When that test fails you changed the rules' code:

- if the change can redact something the old rules left (a new kind, a wider pattern),
  add 1 to ``RULES_VERSION`` and paste the new fingerprint;
- if it cannot (a rename, a refactor, a narrower rule), paste the new fingerprint only.

Exfiltration rules (``exfil``) run on output only, so they are not part of it.
"""

from __future__ import annotations

# 3: issue 11, values in quoted or escaped context, CSV rows past a ragged row, TSV.
# (issue 10 added pem.safe_cut and values.open_table for redact.stream: nothing redacted
# differently, so the fingerprint moved and the version did not.)
# 4: issue 20, key words of other languages and NFKC, pipe-table columns, values on the
# next line (block scalars, heredocs, containers, wrapped prose, string concatenation),
# the key-name grammar, base64 blobs holding a secret, HTML name/content pairs, tokens
# after a joiner, and the generic generated-value-beside-a-key-word rule.
# (issue 22 put cheap cuts in front of the rules; the oracle compared their output over
# 20 MB of package text and the test corpora, byte for byte: the version did not move.)
RULES_VERSION = 4
RULES_FINGERPRINT = "ed5fbefe71e59791"
# The modules whose code decides what ``redact`` takes out of stored text.
RULE_MODULES = (
    *("__init__", "_rule", "pem", "tokens", "values", "confusables", "keywords", "localised"),
    *("generic", "pipes", "blocks", "joined", "encoded"),
)
