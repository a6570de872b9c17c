#!/usr/bin/env bash
# Idempotent: the venv of the estimator end-to-ends (scripts/vio_e2e.py, scripts/orb-slam3/*.py,
# scripts/render_vi_sequence.py): rosbags, numpy, pillow and evo (trajectory metrics), pinned
# here once for VINS-Fusion's and ORB-SLAM3's setups. Prints the interpreter's path.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$ROOT/target/py-vio
if ! "$VENV/bin/python" -c "import rosbags, numpy, PIL, evo" 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q "rosbags==0.11.9" "numpy>=1.26" "pillow>=10" "evo==1.31.1" >&2
fi
echo "$VENV/bin/python"
