#!/usr/bin/env bash
# Creates the project's .venv and installs requirements-torch.txt into it (torch's Linux wheel
# is a CUDA build, several GB; pip's cache makes re-installs fast). Idempotent: a stamp holding
# the requirements' hash skips pip when nothing changed. Also writes a .pth file so that
# `import tictac` works in the .venv straight from the source tree (python/).
# Set TICTAC_SKIP_PYTHON=1 to skip (the C++ parts then build without the torch adapter).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TICTAC_SKIP_PYTHON:-0}" = 1 ] && { echo "deps: TICTAC_SKIP_PYTHON=1, skipping the .venv"; exit 0; }

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "deps: creating .venv with $($python --version 2>&1)"
  $python -m venv .venv || {
    echo "deps: '$python -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
fi
want=$(sha256sum requirements-torch.txt | cut -d' ' -f1)
stamp=.venv/.tictac-requirements
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "deps: installing requirements-torch.txt into .venv (torch is large: a few minutes the first time)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements-torch.txt
  echo "$want" > "$stamp"
fi
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/python" > "$site/tictac-dev.pth"
