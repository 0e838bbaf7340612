"""Finds and imports the compiled extension ``tictac.torch._C``.

Installed with ``pip install .`` the module sits inside this package. In a source tree it is in
the Meson build folder: ``$TICTAC_BUILD_DIR`` (default ``<repo>/build``), under
``integration/torch/``. ``make build`` writes a .pth file into the project's .venv so that
``import tictac`` works there.
"""
from __future__ import annotations

import importlib
import os
import pathlib

_REPO = pathlib.Path(__file__).resolve().parents[3]


def build_dir_candidates() -> list[pathlib.Path]:
    build = os.environ.get("TICTAC_BUILD_DIR")
    roots = [pathlib.Path(build)] if build else [_REPO / "build"]
    return [root / "integration" / "torch" for root in roots]


def load_extension(package_path: list[str]):
    """Imports ``_C``, extending the package path with the build folder when needed."""
    try:
        return importlib.import_module("tictac.torch._C")
    except ImportError as first:
        tried = []
        for candidate in build_dir_candidates():
            tried.append(str(candidate))
            if candidate.is_dir() and str(candidate) not in package_path:
                package_path.append(str(candidate))
        try:
            return importlib.import_module("tictac.torch._C")
        except ImportError as second:
            raise ImportError(
                "tictac.torch: the compiled backend (_C) was not found or failed to load "
                f"({second}; first attempt: {first}). Build it with `make build` (it needs torch in "
                f"the project's .venv), or set TICTAC_BUILD_DIR to the Meson build folder. "
                f"Looked in: {', '.join(tried)}"
            ) from second
