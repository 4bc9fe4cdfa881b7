#!/bin/bash
# 10,000 real text files nobody here wrote, each under 40 KB, in a fixed order: CPython's
# standard library, Debian's packaged documentation (html, txt, md, rst), Debian's Python
# packages, then the Python packages of a virtualenv (code and docs). Issue 22's ingest
# figure (`kb-mcp bench ingest 10k`) was measured on the folder this made on a Debian 12
# machine with kb-mcp's dev virtualenv: 9,834 files read, 83.6 MB.
#   usage: make10k.sh [OUT] [SITE_PACKAGES]   (defaults ./10k, this python's site-packages)
set -euo pipefail
OUT=${1:-10k}
SITE=${2:-$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')}
rm -rf "$OUT"; mkdir -p "$OUT"
{ find /usr/lib/python3.11 -type f -not -path '*/venv/*' -name '*.py' -size -40k | sort
  find /usr/share/doc -type f \( -name '*.html' -o -name '*.txt' -o -name '*.md' -o -name '*.rst' \) -size -40k | sort
  find /usr/lib/python3 -type f -name '*.py' -size -40k | sort
  find "$SITE" -type f \( -name '*.py' -o -name '*.md' -o -name '*.rst' -o -name '*.txt' \) -size -40k -size +0 | sort
} | head -n 10000 | while read -r f; do
  r="${f#/}"; r="${r/${SITE#/}/pypi}"; d="$OUT/$(dirname "$r")"
  mkdir -p "$d"; cp "$f" "$d/"
done
echo "built $OUT: $(find "$OUT" -type f | wc -l) files"
