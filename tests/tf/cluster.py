"""Runs tictac.tf clusters for the adapter tests: 1 server + 2 workers (tf_worker.py) as
subprocesses over loopback, a FileStore in a temporary directory."""
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = sys.executable


def _env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), env.get("PYTHONPATH", "")])
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env.update(extra or {})
    return env


def _cluster(tmp, policy, worker_args=(), env=None, timeout=30, wait_s=55, server_args=()):
    """Runs 1 server + 2 workers; returns (server rc, server stderr, stats lines, worker results
    by rank (None for a worker that failed), npz path)."""
    store = f"file:{tmp / 'store'}"
    stats, save = tmp / "stats.jsonl", tmp / "final.npz"
    srv = subprocess.Popen([PY, "-m", "tictac.tf.server", "--rank", "0", "--world-size", "3", "--store", store,
                            "--policy", policy, "--lr", "0.1", "--stats", str(stats), "--save", str(save),
                            "--timeout", str(timeout), *server_args],
                           env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wks = [subprocess.Popen([PY, str(HERE / "tf_worker.py"), "--rank", str(r), "--world", "3", "--store", store,
                             "--out", str(tmp / f"w{r}.json"), "--timeout", str(timeout), *worker_args],
                            env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for r in (1, 2)]
    deadline = time.monotonic() + wait_s
    try:
        _, err = srv.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        for p in [srv] + wks:
            if p.poll() is None:
                try:
                    p.wait(timeout=max(1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    results = {}
    for r, p in zip((1, 2), wks):
        out = tmp / f"w{r}.json"
        results[r] = json.loads(out.read_text()) if p.returncode == 0 and out.exists() else None
        if p.returncode not in (0,) and results[r] is None:
            results[f"stderr{r}"] = p.stderr.read()[-2000:]
    lines = [json.loads(l) for l in stats.read_text().splitlines()] if stats.exists() else []
    return srv.returncode, err, lines, results, save
