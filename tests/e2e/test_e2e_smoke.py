"""Smoke test of the end-to-end benchmark (python -m bench.e2e): a tiny CNN, inference,
random vs tic, 1 warm-up + 2 measured iterations, 1 server + 2 workers through bench/cluster
(network namespaces when root, else loopback). Checks the CSV's columns and rows, the plots and
the one-iteration traces. About 20-40 s on two cores."""

import csv
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = ["-m", "bench.e2e"]       # run from ROOT with ROOT and ROOT/python on PYTHONPATH (bench_env())
COLUMNS = ["model", "mode", "policy", "a", "throughput", "iter_ms_median", "iter_ms_p95",
           "straggler_spread_ms", "efficiency", "speedup_vs_random", "sim_makespan_ms",
           "measured_makespan_ms", "compute", "speedup_ci_low", "speedup_ci_high"]
PNG = b"\x89PNG\r\n\x1a\n"


def bench_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.path.join(ROOT, "python"),
                                                                   os.environ.get("PYTHONPATH", "")) if p))


def _extension_missing():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    code = "import sys, tictac.torch; sys.exit(0 if tictac.torch.available() else str(tictac.torch._C_ERROR))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["import failed"])[-1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    why = _extension_missing()
    if why:
        pytest.skip(f"the tictac torch extension is not built/importable: {why}")
    out = tmp_path_factory.mktemp("e2e")
    cmd = [sys.executable, *RUN, "--models", "bench.e2e.tinynet:tiny", "--num-classes", "10", "--image-size", "32",
           "--batch", "4", "--modes", "inference", "--policies", "random,tic", "--iters", "2", "--warmup", "1",
           "--job-timeout", "60", "--out", str(out)]
    build = os.environ.get("TICTAC_BUILD_DIR")
    if build:
        cmd += ["--build", build]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=85, cwd=ROOT, env=bench_env())
    return out, r


def test_runs_and_prints_table(run):
    out, r = run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "== results" in r.stdout and "speedup" in r.stdout
    assert "[2/2]" in r.stdout and "ETA" in r.stdout


def test_csv_columns_and_rows(run):
    out, r = run
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][:len(COLUMNS)] == COLUMNS
    body = [dict(zip(rows[0], x)) for x in rows[1:]]
    assert [(b["model"], b["mode"], b["policy"]) for b in body] == [("tiny", "inference", "random"),
                                                                    ("tiny", "inference", "tic")]
    for b in body:
        assert b["status"] == "ok"
        assert b["compute"] == "real"
        assert float(b["speedup_ci_low"]) <= float(b["speedup_vs_random"]) <= float(b["speedup_ci_high"])
        for k in ("a", "throughput", "iter_ms_median", "iter_ms_p95", "straggler_spread_ms",
                  "speedup_vs_random", "measured_makespan_ms"):
            assert float(b[k]) >= 0, (k, b[k])
        assert float(b["throughput"]) > 0
        assert float(b["iter_ms_p95"]) >= float(b["iter_ms_median"])
        if b["efficiency"]:
            float(b["efficiency"])
    assert float(body[0]["speedup_vs_random"]) == pytest.approx(1.0)


def test_plots_are_pngs(run):
    out, r = run
    names = ["throughput.png", "iter_time_tiny_inference.png", "timeline_tiny_inference.png"]
    for n in names:
        p = out / n
        assert p.exists(), n
        data = p.read_bytes()
        assert len(data) > 1000 and data.startswith(PNG), n


def test_one_iteration_traces(run):
    out, r = run
    traces = sorted((out / "traces").glob("*.json"))
    assert len(traces) == 2
    for t in traces:
        ev = json.loads(t.read_text())["traceEvents"]
        iters = {e["name"] for e in ev if e.get("ph") == "X" and e.get("tid") == 1}
        assert len(iters) == 1, iters
        assert any(e.get("ph") == "X" and e.get("tid") == 2 for e in ev)   # compute events
