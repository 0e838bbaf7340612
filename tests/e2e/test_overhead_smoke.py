"""Smoke test of `bench/e2e/e2e --overhead` (bench/e2e/overhead.py): a tiny CNN, inference,
fifo, tac, fifo in 2 interleaved rounds of 1 warm-up + 2 measured iterations. Checks the job order
(ABBA), the CSV, the JSON ratios and the printed verdict; not the value of the ratio (a toy on
a shared machine). About 15-25 s."""

import csv
import json
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
    out = tmp_path_factory.mktemp("overhead")
    cmd = [sys.executable, *RUN, "--overhead", "--models", "bench.e2e.tinynet:tiny", "--num-classes", "10", "--image-size", "32",
           "--batch", "4", "--modes", "inference", "--policies", "tac", "--rounds", "2", "--iters", "2",
           "--warmup", "1", "--job-timeout", "60", "--out", str(out)]
    build = os.environ.get("TICTAC_BUILD_DIR")
    if build:
        cmd += ["--build", build]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=bench_env())
    return out, r


def test_interleaved_rounds_and_ratios(run):
    out, r = run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(out / "overhead.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(x["round"], x["policy"], x["slot"]) for x in rows] == [("0", "fifo", "a"), ("0", "tac", ""), ("0", "fifo", "b"),
                                                                   ("1", "fifo", "a"), ("1", "tac", ""), ("1", "fifo", "b")]
    assert all(x["status"] == "ok" and float(x["throughput"]) > 0 for x in rows)
    res = json.loads((out / "overhead.json").read_text())
    (cfg,) = res["configs"]
    assert cfg["policy"] == "tac" and len(cfg["iter_median_ratio"]["ratios"]) == 2
    for key in ("iter_median_ratio", "throughput_ratio"):
        s = cfg[key]
        assert s["min"] <= s["median"] <= s["max"] and s["within_target"] == (s["median"] >= 0.98)
    assert "tac/fifo: median-iteration ratio" in r.stdout and "within 2%" in r.stdout
    (aa,) = res["aa_control"]
    assert aa["policy"] == "fifo" and aa["same_order_as_fifo"] and "A/A control" in r.stdout
    assert "not far below 1" in r.stdout          # a toy CNN is not the a << 1 setting: it says so


def test_bad_overhead_options_are_refused():
    r = subprocess.run([sys.executable, *RUN, "--overhead", "--policies", "fifo"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT, env=bench_env())
    assert r.returncode != 0 and "other than fifo" in (r.stdout + r.stderr)
    r = subprocess.run([sys.executable, *RUN, "--overhead", "--rounds", "0"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT, env=bench_env())
    assert r.returncode == 2 and "--rounds" in r.stderr
