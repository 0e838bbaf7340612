"""CUDA tensors in the "tictac" backend on a machine without a GPU: the GPU check script must
end in a visible SKIP (exit 77, with the reason), never a quiet pass; with a GPU it must pass.
(The CUDA path itself is unit-tested against the scripted CUDA table in
tests/unit/group/device_test.cc, which also checks the "CUDA not viable" error.)"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent


def test_cuda_check_skips_visibly_without_a_gpu_and_passes_with_one():
    proc = subprocess.run([sys.executable, str(HERE / "cuda_check.py")], capture_output=True,
                          text=True, timeout=400, env=dict(os.environ))
    out = proc.stdout + proc.stderr
    if torch.cuda.is_available():
        assert proc.returncode == 0, out
        assert "PASS" in out, out
    else:
        assert proc.returncode == 77, out
        assert "SKIP: torch sees no usable CUDA device: " in out, out
        reason = out.split("SKIP: torch sees no usable CUDA device: ", 1)[1].strip()
        assert reason, out
