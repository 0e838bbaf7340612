"""Smoke test of `--compute emulated` with the gloo and ddp baselines: a tiny CNN's stored op
profile replayed, inference, random vs gloo vs ddp, 1 warm-up + 2 measured iterations, 1 server +
2 workers. Checks the `compute` column, that every baseline ran and got a speedup with an
interval, and that the op profile is stored in bench/graphs/emulated/. About 30-50 s on two cores."""

import csv
import os
import subprocess
import sys

import pytest

from test_e2e_smoke import RUN, ROOT, _extension_missing, bench_env


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    why = _extension_missing()
    if why:
        pytest.skip(f"the tictac torch extension is not built/importable: {why}")
    out = tmp_path_factory.mktemp("emulated")
    cmd = [sys.executable, *RUN, "--compute", "emulated", "--models", "bench.e2e.tinynet:tiny", "--num-classes", "10",
           "--image-size", "32", "--batch", "4", "--modes", "inference", "--policies", "random,gloo,ddp",
           "--iters", "2", "--warmup", "1", "--no-sim", "--job-timeout", "60", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=ROOT, env=bench_env())
    return out, r


def test_emulated_run_with_baselines(run):
    out, r = run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "compute: emulated" in r.stdout
    with open(out / "results.csv", newline="") as f:
        body = list(csv.DictReader(f))
    assert [b["policy"] for b in body] == ["random", "gloo", "ddp"]
    for b in body:
        assert b["status"] == "ok" and b["compute"] == "emulated", b
        assert float(b["throughput"]) > 0
        assert float(b["speedup_ci_low"]) <= float(b["speedup_vs_random"]) <= float(b["speedup_ci_high"])
        assert float(b["speedup_vs_gloo"]) > 0 and float(b["speedup_vs_ddp"]) > 0
    assert body[1]["policy_used"] == "fifo"            # gloo: the PS in issue order over torch's gloo
    assert os.path.exists(os.path.join(ROOT, "bench", "graphs", "emulated", "tiny_b4_i32_c10.json"))
