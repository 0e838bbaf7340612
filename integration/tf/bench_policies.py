"""Iteration time of tictac.tf parameter-server training per policy: 1 server + 2 workers on
loopback (subprocesses, FileStore), the tests' MLP (tests/tf/tf_model.py) without biases:
4 float64 weights of DIM x DIM (8 MiB each at DIM 1024), declared in reverse.
usage: .venv-tf/bin/python integration/tf/bench_policies.py [--dim 1024] [--steps 30] [--batch 32]
           [--policies random tic tac] [--overlap] [--rate BYTES_PER_S] [--rounds N]
--overlap: tictac.tf.overlapped steps (each read gated on its own pull) instead of pull-all-first.
--rate: TICTAC_RATE_LIMIT for every process (bytes/s, e.g. 400e6; the server's sends share it);
  tac then gets --bandwidth 8 x rate. --rounds: the policies run in turn, N times (interleaved,
  so drifting machine load hits every policy alike); samples are pooled over the rounds.
Prints, per policy, the median and mean worker iteration time (first 3 steps of each run
dropped), the pooled median relative to the first policy, and the median over rounds of the
per-round ratio (first policy's round median / this policy's, paired within a round). Wrap timing runs in
`flock /tmp/tictac-bench.lock ...` on a shared machine."""
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
p.add_argument("--policies", nargs="+", default=["random", "tic", "tac"])
p.add_argument("--overlap", action="store_true")
p.add_argument("--rate", type=float, default=0.0, help="bytes/s (TICTAC_RATE_LIMIT); 0 = unlimited")
p.add_argument("--rounds", type=int, default=1)
a = p.parse_args()
if a.steps <= 3:
    sys.exit("--steps must be > 3 (the first 3 are dropped)")
env = dict(os.environ, PYTHONPATH=str(REPO / "python"), TF_CPP_MIN_LOG_LEVEL="3")
if a.rate > 0:
    env["TICTAC_RATE_LIMIT"] = str(int(a.rate))  # a byte count: the transport's size syntax


def run(policy):
    """(iteration ms, pull ms) samples of both workers, first 3 steps dropped."""
    with tempfile.TemporaryDirectory(prefix="tictac-tf-bench-") as tmp:
        store = f"file:{tmp}/store"
        srv = subprocess.Popen([sys.executable, "-m", "tictac.tf.server", "--rank", "0", "--world-size", "3",
                                "--store", store, "--policy", policy], env=env)
        wargs = ["--steps", str(a.steps), "--dim", str(a.dim), "--batch", str(a.batch), "--no-bias",
                 "--reverse", "--overlap" if a.overlap else "--graph"]
        wks = [subprocess.Popen([sys.executable, str(REPO / "tests/tf/tf_worker.py"), "--rank", str(r),
                                 "--world", "3", "--store", store, *wargs, "--out", f"{tmp}/w{r}.json"], env=env)
               for r in (1, 2)]
        rcs = [w.wait() for w in wks] + [srv.wait()]
        if any(rcs):
            sys.exit(f"{policy}: exit codes {rcs}")
        res = [json.load(open(f"{tmp}/w{r}.json")) for r in (1, 2)]
        return [x for d in res for x in d["iter_ms"][3:]], [x for d in res for x in d["pull_ms"][3:]]


iters = {q: [] for q in a.policies}
pulls = {q: [] for q in a.policies}
round_medians = {q: [] for q in a.policies}
for rnd in range(a.rounds):
    for policy in a.policies:
        it, pl = run(policy)
        iters[policy] += it
        pulls[policy] += pl
        round_medians[policy].append(statistics.median(it))
        print(f"  round {rnd + 1} {policy:7s} iteration median {statistics.median(it):7.2f} ms", flush=True)
mode = "overlapped" if a.overlap else "pull-all-first"
print(f"# {mode}, dim {a.dim}, batch {a.batch}, rate {a.rate:g} B/s, {a.rounds} round(s) x {a.steps} steps")
base = statistics.median(iters[a.policies[0]])
for policy in a.policies:
    it = iters[policy]
    paired = statistics.median(b / m for b, m in zip(round_medians[a.policies[0]], round_medians[policy]))
    extra = f"  paired {paired:.2f}x"
    extra += f"  pull median {statistics.median(pulls[policy]):7.2f} ms" if pulls[policy] else ""
    print(f"{policy:7s} iteration median {statistics.median(it):7.2f} ms  mean {statistics.mean(it):7.2f} ms"
          f"  ({base / statistics.median(it):.2f}x vs {a.policies[0]}; {len(it)} samples){extra}", flush=True)
