"""Iteration time of tictac.tf parameter-server training per policy: 1 server + 2 workers on
loopback (subprocesses, FileStore), the tests' MLP (tests/tf/tf_model.py) without biases:
4 float64 weights of DIM x DIM (8 MiB each at DIM 1024), declared in reverse.
usage: .venv-tf/bin/python integration/tf/bench_policies.py [--dim 1024] [--steps 30] [--policies random tic]
Prints the median and mean worker iteration time (first 3 steps dropped) per policy."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
p = argparse.ArgumentParser()
p.add_argument("--dim", type=int, default=1024)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--policies", nargs="+", default=["random", "tic"])
a = p.parse_args()
env = dict(os.environ, PYTHONPATH=str(REPO / "python"), TF_CPP_MIN_LOG_LEVEL="3")
for policy in a.policies:
    with tempfile.TemporaryDirectory(prefix="tictac-tf-bench-") as tmp:
        store = f"file:{tmp}/store"
        srv = subprocess.Popen([sys.executable, "-m", "tictac.tf.server", "--rank", "0", "--world-size", "3",
                                "--store", store, "--policy", policy], env=env)
        wks = [subprocess.Popen([sys.executable, str(REPO / "tests/tf/tf_worker.py"), "--rank", str(r),
                                 "--world", "3", "--store", store, "--steps", str(a.steps), "--dim", str(a.dim),
                                 "--batch", str(a.batch), "--no-bias", "--reverse", "--graph",
                                 "--out", f"{tmp}/w{r}.json"], env=env) for r in (1, 2)]
        rcs = [w.wait() for w in wks] + [srv.wait()]
        if any(rcs):
            sys.exit(f"{policy}: exit codes {rcs}")
        it = [x for r in (1, 2) for x in json.load(open(f"{tmp}/w{r}.json"))["iter_ms"][3:]]
        pull = [x for r in (1, 2) for x in json.load(open(f"{tmp}/w{r}.json"))["pull_ms"][3:]]
        print(f"{policy:7s} iteration median {statistics.median(it):7.2f} ms  mean {statistics.mean(it):7.2f} ms"
              f"  (pull median {statistics.median(pull):7.2f} ms; {len(it)} samples, dim {a.dim})", flush=True)
