"""Finds and loads TicTac's TensorFlow op library (``libtictac_tf_ops.so``).

Looked for in order: ``$TICTAC_TF_LIBRARY`` (a file), ``$TICTAC_BUILD_DIR/integration/tf/``
(default ``<repo>/build``). Meson builds it when ``.venv-tf/bin/python`` imports tensorflow
(``scripts/install-tf-deps.sh``, then ``ninja -C build``).
"""
from __future__ import annotations

import os
import pathlib

_REPO = pathlib.Path(__file__).resolve().parents[3]
LIB_NAME = "libtictac_tf_ops.so"


def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("TICTAC_BUILD_DIR") or (_REPO / "build"))


def candidates() -> list[pathlib.Path]:
    explicit = os.environ.get("TICTAC_TF_LIBRARY")
    if explicit:
        return [pathlib.Path(explicit)]
    return [build_dir() / "integration" / "tf" / LIB_NAME]


def _configure_reason() -> str:
    """The 'tensorflow' line of the build's configure log, when there is one."""
    log = build_dir() / "meson-logs" / "meson-log.txt"
    try:
        lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if l.strip().startswith("tensorflow")]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def load():
    """Returns ``(module, path)``; raises ImportError naming where it looked and why."""
    try:
        import tensorflow as tf
    except Exception as exc:
        raise ImportError(f"tictac.tf needs tensorflow (the project's .venv-tf): {exc}") from exc
    tried = []
    for path in candidates():
        tried.append(str(path))
        if path.is_file():
            try:
                return tf.load_op_library(str(path)), path
            except Exception as exc:
                raise ImportError(f"tictac.tf: loading {path} failed: {exc}") from exc
    reason = _configure_reason()
    raise ImportError(
        "tictac.tf: the op library is not built (looked in: " + ", ".join(tried) + "). "
        "Create .venv-tf with scripts/install-tf-deps.sh, then `meson setup --reconfigure build && "
        "ninja -C build`, or set TICTAC_TF_LIBRARY / TICTAC_BUILD_DIR."
        + (f" Configure said: {reason}" if reason else ""))
