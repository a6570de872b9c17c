#!/usr/bin/env bash
# Python tools for regenerating fixtures/goldens and the OpenCV comparisons (not needed to
# build or test): a venv at .venv-py with opencv-python-headless, scikit-image, numpy.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${PY_VENV:-$ROOT/.venv-py}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -r "$ROOT/scripts/requirements.txt"
echo "$VENV/bin/python"
