#!/usr/bin/env bash
# Idempotent: a venv with the pure-Python `rosbags` package (and numpy) for building ROS 2
# test bags without ROS (scripts/make_bags.py; tests/replay.rs uses it when present).
# Prints the interpreter's path. PY_BAGS_VENV overrides the location (default target/py-bags).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${PY_BAGS_VENV:-$ROOT/target/py-bags}
if ! "$VENV/bin/python" -c "import rosbags, numpy" 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q "rosbags==0.11.9" "numpy>=1.26" >&2
fi
echo "$VENV/bin/python"
