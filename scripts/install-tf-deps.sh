#!/usr/bin/env bash
# Creates .venv-tf and installs requirements-tf.txt into it (tensorflow-cpu, pinned exactly;
# about 1.6 GB installed). Idempotent: a stamp holding the requirements' hash skips pip when
# nothing changed. Writes a .pth file so that `import tictac.tf` works in .venv-tf straight from
# the source tree (python/). Then `meson setup --reconfigure build && ninja -C build` builds the
# op library (integration/tf). Set TICTAC_SKIP_TF=1 to skip.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TICTAC_SKIP_TF:-0}" = 1 ] && { echo "tf deps: TICTAC_SKIP_TF=1, skipping .venv-tf"; exit 0; }

python=${PYTHON:-python3}
if [ ! -x .venv-tf/bin/python ]; then
  echo "tf deps: creating .venv-tf with $($python --version 2>&1)"
  $python -m venv .venv-tf || {
    echo "tf deps: '$python -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
fi
want=$(sha256sum requirements-tf.txt | cut -d' ' -f1)
stamp=.venv-tf/.tictac-requirements
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "tf deps: installing requirements-tf.txt into .venv-tf (tensorflow-cpu is large: a few minutes the first time)"
  .venv-tf/bin/python -m pip install -q --upgrade pip
  .venv-tf/bin/python -m pip install -q -r requirements-tf.txt
  echo "$want" > "$stamp"
fi
site=$(.venv-tf/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/python" > "$site/tictac-dev.pth"
