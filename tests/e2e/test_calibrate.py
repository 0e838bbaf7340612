"""Unit tests of bench/e2e/siminputs.py (the simulator inputs measured in a job) on a
hand-made job: JSON lines of two workers and a Chrome trace with a server, where every
expected figure follows from the numbers written here."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)            # bench is a package at the repository root

from bench.e2e import siminputs as calibrate  # noqa: E402


def _job(tmp_path, training=True):
    """Iteration 1 (measured; 0 is warm-up). Trace time in us from a common base; the server's
    iteration 1 starts at 1000 ms, its first send at 1002 ms; each worker pulls 2 x 1e6 bytes,
    the last arriving 102 ms after that first send; worker ranks 1, 2 start at 1000, 1001 ms."""
    recs, ev = [], []
    for it in (0, 1):
        base = 1000.0 * it
        ev.append({"ph": "X", "pid": 0, "tid": 1, "name": f"iter {it}", "ts": base * 1e3, "dur": 150e3})
        ev.append({"ph": "X", "pid": 0, "tid": 5, "name": "a -> 1", "ts": (base + 2) * 1e3, "dur": 5e3})
        ev.append({"ph": "X", "pid": 0, "tid": 5, "name": "b -> 2", "ts": (base + 3) * 1e3, "dur": 5e3})
        if training:
            ev.append({"ph": "X", "pid": 0, "tid": 7, "name": "optimizer.step", "ts": (base + 60) * 1e3,
                       "dur": 80e3, "args": {"busy_ms": 30.0}})
        for w, rank in ((0, 1), (1, 2)):
            t0 = base + (rank - 1)               # worker 1 starts 1 ms later
            dur = 140.0 if rank == 1 else 160.0  # ends at base+140 and base+161
            ev.append({"ph": "X", "pid": rank, "tid": 1, "name": f"iter {it}", "ts": t0 * 1e3, "dur": dur * 1e3})
            last = base + 104 - t0               # arrival of the last pull: base + 104 ms
            recs.append({"rank": rank, "worker": w, "iter": it, "warmup": it == 0, "iter_ms": dur,
                         "forward": [1.0, 81.0], "stall_ms": 20.0 + w,
                         "backward": [82.0, 82.0 + 90.0 + 10 * w] if training else None,
                         "pulls": [["a", 0.5, 10.0, 1_000_000, 0], ["b", 0.6, last, 1_000_000, 0]],
                         "pushes": [], "compute": []})
    jsonl = tmp_path / "it.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in recs))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": ev}))
    return str(jsonl), str(trace)


def test_measure_reads_every_input(tmp_path):
    m = calibrate.measure(*_job(tmp_path))
    assert m["forward_busy_ms"] == pytest.approx(59.5)            # 80 - stall 20 / 21
    assert m["backward_ms"] == pytest.approx(95.0)                # 90, 100
    assert m["rate_Bps"] == pytest.approx(4e6 / 0.102)            # 4 MB over first send .. last arrival
    assert m["update_ms"] == pytest.approx(30.0)                  # busy_ms, not the 80 ms span
    assert m["cluster_makespan_ms"] == pytest.approx(1161 - 1002)  # first send .. last rank's end


def test_measure_inference_and_missing_trace(tmp_path):
    jsonl, trace = _job(tmp_path, training=False)
    m = calibrate.measure(jsonl, trace)
    assert m["backward_ms"] is None and m["update_ms"] is None and m["rate_Bps"] > 0
    m = calibrate.measure(jsonl, str(tmp_path / "missing.json"))
    assert m["forward_busy_ms"] == pytest.approx(59.5) and m["rate_Bps"] is None


def test_sim_inputs_scale_the_graph_and_give_the_arguments(tmp_path):
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"format": "tictac-graph/1", "ops": [
        {"name": "w", "kind": "recv", "bytes": 1000},
        {"name": "c1", "kind": "compute", "inputs": ["w"], "time": 0.010},
        {"name": "c2", "kind": "compute", "inputs": ["c1"], "time": 0.030}]}))
    p = {"forward_busy_ms": 80.0, "backward_ms": 120.0, "rate_Bps": 1e8, "update_ms": 2.0, "jobs": 1}
    si = calibrate.sim_inputs(p, str(g), "training", 4000, str(tmp_path / "out"), "t", 1.25e9)
    ops = {o["name"]: o for o in json.loads(open(si["graph"]).read())["ops"]}
    assert ops["c1"]["time"] == pytest.approx(0.020) and ops["c2"]["time"] == pytest.approx(0.060)
    assert ops["w"]["bytes"] == 1000
    a = si["args"]
    assert a[a.index("--bandwidth") + 1] == str(8e8)
    assert float(a[a.index("--backward-factor") + 1]) == pytest.approx(1.5)
    assert float(a[a.index("--update-time-per-byte") + 1]) == pytest.approx(0.002 / 4000)
    assert "--chunk" in a and "--window" in a
    inf = calibrate.sim_inputs(dict(p, rate_Bps=None), str(g), "inference", 4000, str(tmp_path / "out"), "i", 1.25e9)
    assert inf["inputs"]["rate_source"] == "nominal" and "--backward-factor" not in inf["args"]
    assert calibrate.sim_inputs(dict(p, forward_busy_ms=None), str(g), "inference", 4000, str(tmp_path), "x", 1e9) is None


def test_pool_takes_medians_and_skips_missing():
    p = calibrate.pool([{"forward_busy_ms": 1.0, "rate_Bps": None}, {"forward_busy_ms": 3.0, "rate_Bps": 5.0},
                        {"forward_busy_ms": 2.0}])
    assert p["forward_busy_ms"] == 2.0 and p["rate_Bps"] == 5.0 and p["update_ms"] is None and p["jobs"] == 3
