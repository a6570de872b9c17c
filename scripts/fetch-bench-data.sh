#!/usr/bin/env bash
# Big real photos for `gpu_features bench`, into the git-ignored bench-data/ (see
# docs/benchmarks.md). They come from two Debian packages, unpacked without installing:
#   lomiri-wallpapers-20.04 (CC-BY-SA-3.0): Kleiber_by_Lukas_Baubkus.jpg, a 6028x3391 photo
#     (the only source large enough for real 3840x2160 crops)
#   mate-backgrounds (GPL-2+): usr/share/backgrounds/mate/nature/*.jpg, 1280x1024..2560x1920
# The bench crops (never scales) these to each size; without bench-data/ it tiles tests/data.
# Usage: scripts/fetch-bench-data.sh [DEST]   (default: bench-data next to Cargo.toml)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${1:-$ROOT/bench-data}
mkdir -p "$DEST"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
# apt-get download drops privileges to _apt: give it a directory it can write.
chmod 777 "$TMP" 2>/dev/null || true
apt-get download lomiri-wallpapers-20.04 mate-backgrounds ||
    { echo "apt-get download failed (try: apt-get update)" >&2; exit 1; }
mkdir x
for deb in ./*.deb; do dpkg-deb -x "$deb" x; done
cp x/usr/share/backgrounds/Kleiber_by_Lukas_Baubkus.jpg "$DEST/"
cp x/usr/share/backgrounds/mate/nature/*.jpg "$DEST/"
cat > "$DEST/LICENSES.md" <<'TXT'
# bench-data (not committed; fetched by scripts/fetch-bench-data.sh)

- Kleiber_by_Lukas_Baubkus.jpg: Debian package lomiri-wallpapers-20.04, CC-BY-SA-3.0,
  photo by Lukas Baubkus.
- The other *.jpg: Debian package mate-backgrounds (usr/share/backgrounds/mate/nature),
  GPL-2+, see /usr/share/doc/mate-backgrounds/copyright in that package.
TXT
ls -l "$DEST"
