#!/bin/bash
# A real ~4,000-file, ~60 MB folder nobody here wrote, as issue 22 describes it:
#   pypi/       five PyPI sdists unpacked as published (docs, code, tests, locale files)
#   debian-doc/ git's HTML manual as Debian packages it (git-doc: .html pages + their AsciiDoc .txt)
#   man/ja, man/zh_CN  Japanese and Simplified-Chinese man pages (sections 1, 5, 7, 8), gunzipped
#                      to their roff source as a user would to read them (kb-mcp skips .gz)
#   pdf/        five PDF manuals from Debian packages (.pdf.gz ones gunzipped)
# Everything is fetched from PyPI (pip download) or the Debian archive (apt-get download),
# pinned, so a rerun gives the same bytes. Needs: python3 with pip, apt-get (Debian 12
# bookworm lists; run `apt-get update` first if `apt-get download` cannot find a version),
# dpkg-deb, tar, gzip.
#   usage: make4k.sh [OUT] [CACHE]     (defaults ./4k, ./.dl)
set -euo pipefail
OUT=${1:-4k}
DL=${2:-.dl}
PY=${PY:-python3}

PYPI=(sphinx==7.4.7 flask==3.0.3 click==8.1.7 jinja2==3.1.4 requests==2.32.3)
DEBS=(git-doc=1:2.39.5-0+deb12u3 manpages-ja=0.5.0.0.20221215+dfsg-1 manpages-zh=1.6.4.0-1
      libtasn1-doc=4.19.0-2+deb12u1 maint-guide=1.2.53 bzip2-doc=1.0.8-5 nettle-dev=3.8.1-2
      shared-mime-info=2.2-1)

mkdir -p "$DL/pypi" "$DL/deb"
# PyPI only: ignore any local pip config (extra indexes, find-links, constraints).
for spec in "${PYPI[@]}"; do
  name=${spec%%==*}; ver=${spec##*==}
  ls "$DL/pypi/${name}-${ver}.tar.gz" >/dev/null 2>&1 ||
    PIP_CONFIG_FILE=/dev/null "$PY" -m pip download -q --isolated \
      --no-binary :all: --no-deps "$spec" -d "$DL/pypi"
done
( cd "$DL/deb"
  for spec in "${DEBS[@]}"; do
    name=${spec%%=*}
    ls "${name}"_*.deb >/dev/null 2>&1 || apt-get download "$spec"
  done )

# the bytes this recipe was written against (make4k.sha256 beside this script)
SUMS="$(dirname "$(readlink -f "$0")")/make4k.sha256"
[ -f "$SUMS" ] && ( cd "$DL" && sha256sum --quiet -c "$SUMS" )

rm -rf "$OUT" "$DL/x"; mkdir -p "$OUT"/{pypi,debian-doc,man,pdf} "$DL/x"

# 1. five sdists, unpacked as published
for spec in "${PYPI[@]}"; do
  name=${spec%%==*}; ver=${spec##*==}
  tar -xzf "$DL/pypi/${name}-${ver}.tar.gz" -C "$OUT/pypi"
done

# unpack every .deb once
for deb in "$DL"/deb/*.deb; do
  n=$(basename "$deb"); n=${n%%_*}; dpkg-deb -x "$deb" "$DL/x/$n"
done

# 2. a Debian-packaged HTML documentation site, whole (html, AsciiDoc sources, css, changelogs)
cp -a "$DL/x/git-doc/usr/share/doc/git-doc" "$OUT/debian-doc/"

# 3. Japanese and Chinese man pages: regular files of sections 1, 5, 7, 8 (alias symlinks
#    left out, they would dangle once the targets are gunzipped), decompressed to roff text
for lang in ja zh_CN; do
  src="$DL/x/manpages-${lang%%_*}/usr/share/man/$lang"
  for sec in man1 man5 man7 man8; do
    mkdir -p "$OUT/man/$lang/$sec"
    find "$src/$sec" -type f -name '*.gz' -print0 | sort -z | while IFS= read -r -d '' f; do
      gzip -dc "$f" > "$OUT/man/$lang/$sec/$(basename "${f%.gz}")"
    done
  done
done

# 4. a few PDFs
cp "$DL/x/libtasn1-doc/usr/share/doc/libtasn1-doc/libtasn1.pdf" "$OUT/pdf/"
cp "$DL/x/maint-guide/usr/share/doc/maint-guide/maint-guide.en.pdf" "$OUT/pdf/"
cp "$DL/x/shared-mime-info/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf" "$OUT/pdf/"
gzip -dc "$DL/x/bzip2-doc/usr/share/doc/bzip2/manual.pdf.gz" > "$OUT/pdf/bzip2-manual.pdf"
gzip -dc "$DL/x/nettle-dev/usr/share/doc/nettle-dev/nettle.pdf.gz" > "$OUT/pdf/nettle.pdf"

rm -rf "$DL/x"
# fixed mtimes so two builds look the same to a sync
find "$OUT" -exec touch -h -d '2024-01-01 00:00:00 UTC' {} +

echo "built $OUT:"
for part in "$OUT"/pypi/* "$OUT"/debian-doc "$OUT"/man/ja "$OUT"/man/zh_CN "$OUT"/pdf; do
  printf '  %-40s %5d files %6.1f MB\n' "${part#$OUT/}" "$(find "$part" -type f | wc -l)" \
    "$(du -sb "$part" | awk '{print $1/1e6}')"
done
printf '  %-40s %5d files %6.1f MB\n' total "$(find "$OUT" -type f | wc -l)" \
  "$(du -sb "$OUT" | awk '{print $1/1e6}')"
