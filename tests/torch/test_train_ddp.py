"""python -m tictac.torch.train_ddp: ordered_ddp and the DDP baseline from one command, two ranks
on this machine (file:// rendezvous): the summary names the policy and the backend, bad
arguments exit 2, and a rank whose peer never comes exits 1 with the cause instead of hanging."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

# torchvision is pinned in requirements-torch.txt with torch: a build with the torch suite lacks
# it only when its install is broken, and then this module fails to import (not a skip).
import torchvision  # noqa: E402,F401
import tictac.torch as _tt  # noqa: E402

needs_tictac = pytest.mark.skipif(not _tt.available(), reason=f"tictac backend unavailable: {_tt._C_ERROR}")

SMALL = ["--model", "torchvision:resnet18", "--iters", "3", "--warmup", "1", "--batch", "2", "--image-size", "32",
         "--num-classes", "10", "--threads", "1", "--quiet", "--timeout", "60"]


def _run_ranks(tmp_path, extra, world=2, timeout=180):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    rdv = f"file://{tmp_path / 'rdv'}"
    procs = [subprocess.Popen([sys.executable, "-m", "tictac.torch.train_ddp", *SMALL, *extra, "--init-method", rdv,
                               "--rank", str(r), "--world-size", str(world)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(world)]
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, o, e))
    return out


@needs_tictac
@pytest.mark.parametrize("policy, says", [
    ("tac", "policy tac (ordered_ddp), backend tictac (priorities on)"),
    ("ddp", "policy ddp (DistributedDataParallel), backend gloo (baseline: no TicTac transport, priorities off)"),
])
def test_two_ranks_train_and_rank0_prints_the_summary(tmp_path, policy, says):
    (rc0, out0, err0), (rc1, out1, err1) = _run_ranks(tmp_path, ["--policy", policy])
    assert rc0 == 0 and rc1 == 0, out0 + err0 + out1 + err1
    assert says in out0, out0
    assert "median iter ms (slowest rank):" in out0 and "over 2 iterations after 1 warm-up" in out0, out0
    assert "samples/s" in out0
    assert "median iter ms" not in out1         # only rank 0 reports


def test_bad_arguments_exit_2():
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    p = subprocess.run([sys.executable, "-m", "tictac.torch.train_ddp", "--iters", "2", "--warmup", "2"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--warmup" in p.stderr
    p = subprocess.run([sys.executable, "-m", "tictac.torch.train_ddp", "--policy", "random"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "invalid choice" in p.stderr, p.stderr


@needs_tictac
def test_a_rank_whose_peer_never_comes_exits_1_naming_the_cause(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    p = subprocess.run([sys.executable, "-m", "tictac.torch.train_ddp", *SMALL[:-2], "--timeout", "3",
                        "--init-method", f"file://{tmp_path / 'rdv'}", "--rank", "0", "--world-size", "2"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "tictac.torch.train_ddp: cannot join the process group" in p.stderr, p.stderr
