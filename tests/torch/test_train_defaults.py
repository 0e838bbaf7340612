"""python -m tictac.torch.train defaults to the tictac backend, and a gloo run says it is the
baseline (issue 20). The README's torchrun example itself (prints `backend tictac (priorities
on)`) runs in the docs suite (tests/docs, docs/testing.md); the gloo run here is its
counter-check: with TicTac switched off, that line is gone and the baseline label is there."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

pytest.importorskip("torch")
from tictac.torch import ps, train  # noqa: E402


def test_default_backend_is_tictac():
    assert ps.DEFAULT_BACKEND == "tictac"
    assert train.parse_args([]).backend == "tictac"
    assert train.parse_args(["--backend", "gloo"]).backend == "gloo"
    import inspect
    for fn in (ps.init_distributed, ps.launch_local):
        assert inspect.signature(fn).parameters["backend"].default == "tictac", fn


def test_summary_names_the_backend():
    assert train.describe_backend("tictac", True) == "backend tictac (priorities on)"
    assert train.describe_backend("cpu:tictac", False) == "backend cpu:tictac (priorities off)"
    assert train.describe_backend("gloo", False) == "backend gloo (baseline: no TicTac transport, priorities off)"


def test_gloo_run_says_it_is_the_baseline():
    pytest.importorskip("torchvision")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    cmd = [sys.executable, "-m", "tictac.torch.train", "--model", "torchvision:squeezenet1_1", "--policy", "tac",
           "--iters", "2", "--warmup", "1", "--batch", "2", "--image-size", "32", "--num-classes", "10",
           "--backend", "gloo", "--local", "3", "--timeout", "30", "--threads", "1", "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "backend gloo (baseline: no TicTac transport, priorities off)" in p.stdout, p.stdout
    assert "backend tictac" not in p.stdout
