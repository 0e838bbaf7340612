"""The TF benchmark's parts (bench/tf/tf_ps_bench.py, bench/e2e --framework tf) and the two
product pieces it relies on:

- ``tictac.tf.op_times``: profiles a graph's per-node compute time and writes the file that
  ``TICTAC_TF_POLICY=tac`` reads; a grpc+tictac server with TAC accepts the written file.
- the drop-in's transfer log (``tictac.tf.transfer_log``): in a FULL_TRACE step of the benchmark,
  a tictac arm's worker logged exactly one record per parameter (18: 9 layers x weight + bias),
  the same count as gRPC's RecvTensor entries in the grpc arm's step stats; E is computed from
  them. A log that records nothing leaves the tictac arm with 0 transfers and no E (fails).
- ``bench/e2e/e2e --framework tf`` (unshaped loopback, tiny): one CSV row per policy, the grpc
  row the baseline (speedup 1.0), TicTac carried the tensors and gRPC RecvTensor served none.
"""
import csv
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import tf_cluster as tc  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "tf" / "tf_ps_bench.py"


def test_op_times_profile_writes_a_file_tac_accepts(tmp_path):
    path = tmp_path / "op_times.json"
    code = f"""
import json, numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
import tictac.tf
from tictac.tf import op_times
g = tf.Graph()
with g.as_default():
    x = tf.constant(np.ones((8, 64), np.float32))
    w = tf.Variable(np.ones((64, 64), np.float32), name="w")
    y = tf.reduce_sum(tf.nn.relu(tf.matmul(x, w, name="mm")), name="total")
    init = tf.compat.v1.global_variables_initializer()
with tf.compat.v1.Session(graph=g) as s:
    s.run(init)
    t = op_times.profile(s, y, steps=3)
op_times.write({str(path)!r}, t, default_op_seconds=1e-5)
c = tf.train.ClusterSpec({{'w': ['localhost:{tc_port()}']}})
tf.distribute.Server(c, job_name='w', task_index=0, protocol='grpc+tictac', start=False)
print(json.dumps(sorted(t)))
"""
    out = subprocess.run([tc.PY, "-c", code], capture_output=True, text=True, timeout=180,
                         env=tc.env({"TICTAC_TF_POLICY": "tac", "TICTAC_TF_OP_TIMES": str(path)}))
    assert out.returncode == 0, out.stderr[-3000:]
    names = json.loads(out.stdout.splitlines()[-1])
    assert "mm" in names and "total" in names, names
    assert not any(n.startswith("Const") for n in names), names  # data movers are left out
    doc = json.loads(path.read_text())
    assert doc["ops"]["mm"] > 0 and doc["default_op_seconds"] == 1e-5


def tc_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def test_transfer_log_gives_one_record_per_parameter(tmp_path):
    ops = tmp_path / "op_times.json"
    ops.write_text('{"ops": {}}')
    out = subprocess.run([tc.PY, str(BENCH), "--mode", "run", "--workers", "2", "--batch", "2", "--steps", "2",
                          "--warmup", "1", "--traced", "1", "--arms", "grpc,tic", "--op-times", str(ops)],
                         capture_output=True, text=True, timeout=300, env=tc.env())
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.splitlines()[-1])
    for arm in ("grpc", "tic"):
        traced = res["arms"][arm]["traced"]
        assert len(traced) == 2, traced  # one record per worker
        for w in traced:
            assert w["transfers"] == 18, (arm, w)
            assert w["E"] is not None and w["C_ms"] > 0 and w["N_ms"] > 0, (arm, w)
            assert sorted(w["order"]) == sorted(traced[0]["order"]), (arm, w["order"])
    assert res["stats"]["grpc_recv_tensor"] == 0 and res["stats"]["recv_tensors"] > 0, res["stats"]


def test_e2e_framework_tf_writes_one_row_per_policy(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "bench" / "e2e" / "e2e"), "--framework", "tf", "--workers", "2",
                          "--batch", "2", "--iters", "5", "--warmup", "1", "--policies", "grpc,tic",
                          "--loopback", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600,
                         env=tc.env({"TICTAC_PYTHON": tc.PY, "TICTAC_TF_PYTHON": tc.PY}))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    with open(tmp_path / "results.csv", newline="") as f:
        rows = {r["policy"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"grpc", "tic"}, rows
    assert float(rows["grpc"]["speedup_vs_random"]) == 1.0
    for r in rows.values():
        assert float(r["throughput"]) > 0 and r["status"] == "ok" and r["net_mode"].startswith("loopback")
        assert r["order_inversions"] != "" and r["efficiency"] != ""
    assert json.loads((tmp_path / "op_times.json").read_text())["ops"], "calibration wrote no op times"
    assert "gRPC RecvTensor 0" in out.stdout + out.stderr
