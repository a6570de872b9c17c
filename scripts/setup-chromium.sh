#!/usr/bin/env bash
# Headless Chromium for the report.html rendering test (tests/replay.rs,
# report_html_renders_in_chromium). Idempotent: does nothing when a chromium binary is on
# PATH; otherwise installs Debian's `chromium` package (needs root, as in CI).
set -euo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "chromium: $(command -v "$b") already installed"
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium: not installed and no apt-get here; install chromium by hand" >&2
  exit 1
fi
SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
echo "chromium: installed $(chromium --version 2>/dev/null || true)"
